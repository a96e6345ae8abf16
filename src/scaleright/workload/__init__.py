"""Workload: a transformer's shape, parameter counts, FLOPs and numeric formats, from a HF ``config.json``.

Each module loads on the first use of one of its names (``scaleright._lazy``).
"""

from typing import TYPE_CHECKING

from scaleright._lazy import lazy_exports

if TYPE_CHECKING:  # what ``__getattr__`` gives, for type checkers
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

_MODULE_OF, __getattr__, __dir__ = lazy_exports(__name__, {
    "flops": ("attended_keys_per_layer", "attention_flops_per_token", "decode_flops_per_token",
              "forward_flops_per_token", "matmul_params_per_token", "train_flops_per_token"),
    "kv": ("kv_cache_elements", "kv_cache_elements_per_token", "kv_cache_tokens_per_layer"),
    "model": ("load_model",),
    "params": ("ParamCounts", "count_params"),
    "precision": ("bytes_per_element",),
    "spec": ("SUPPORTED_FAMILIES", "MLASpec", "MoESpec", "SparseAttentionSpec", "TransformerSpec", "from_hf_config"),
})  # fmt: skip
