"""Workload: a transformer's shape, parameter counts, FLOPs and numeric formats, from a HF ``config.json``."""

from scaleright.workload.flops import (
    attended_keys_per_layer,
    attention_flops_per_token,
    decode_flops_per_token,
    forward_flops_per_token,
    matmul_params_per_token,
    train_flops_per_token,
)
from scaleright.workload.kv import kv_cache_elements, kv_cache_elements_per_token, kv_cache_tokens_per_layer
from scaleright.workload.model import load_model
from scaleright.workload.params import ParamCounts, count_params
from scaleright.workload.precision import bytes_per_element
from scaleright.workload.spec import (
    SUPPORTED_FAMILIES,
    MLASpec,
    MoESpec,
    SparseAttentionSpec,
    TransformerSpec,
    from_hf_config,
)

__all__ = [
    "SUPPORTED_FAMILIES",
    "MLASpec",
    "MoESpec",
    "ParamCounts",
    "SparseAttentionSpec",
    "TransformerSpec",
    "attended_keys_per_layer",
    "attention_flops_per_token",
    "bytes_per_element",
    "count_params",
    "decode_flops_per_token",
    "forward_flops_per_token",
    "from_hf_config",
    "kv_cache_elements",
    "kv_cache_elements_per_token",
    "kv_cache_tokens_per_layer",
    "load_model",
    "matmul_params_per_token",
    "train_flops_per_token",
]
