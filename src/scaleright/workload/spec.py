"""A decoder-only transformer's shape, read from a Hugging Face ``config.json``.

``TransformerSpec`` knows nothing of GPUs, layouts or prices (STYLE habit 2). It is built from a config by
``from_hf_config`` for the families llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe, gemma, gemma2,
phi3, gpt2, gpt_neox, falcon (both the 2023 ``RefinedWebModel`` format and the in-library one), deepseek_v3,
deepseek_v32 (DeepSeek-V3.2: MLA plus the DSA lightning indexer that picks ``index_topk`` keys per query), kimi_k2
(the DeepSeek-V3 architecture), gpt_oss (attention sinks, ``layer_types`` alternating sliding-window and full
attention, biased experts stored in MXFP4) and llama4 (the text model of a ``Llama4ForConditionalGeneration``
config: MoE with a shared expert on interleaved layers, chunked attention on the RoPE layers).
Field names follow the ``transformers`` modelling code of each family; defaults are those of the family's
``PretrainedConfig`` class (e.g. GPT-2 ties its embeddings, Falcon's MLP is 4 x hidden).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from scaleright.errors import CatalogFileError, InputError
from scaleright.limits import LIMITS

__all__ = ["TransformerSpec", "MoESpec", "MLASpec", "SparseAttentionSpec", "from_hf_config", "SUPPORTED_FAMILIES"]


@dataclass(frozen=True)
class MoESpec:
    """Mixture-of-experts feed-forward blocks."""

    num_experts: int  # routed experts per MoE layer
    top_k: int  # routed experts each token visits
    expert_ffn_hidden: int  # intermediate size of one routed expert
    num_shared_experts: int = 0  # always-on experts (DeepSeek, Qwen2-MoE)
    shared_ffn_hidden: int = 0  # intermediate size of one shared expert
    shared_expert_gate: bool = False  # Qwen2-MoE's sigmoid gate on the shared expert (hidden x 1)
    router_bias: bool = False  # DeepSeek-V3's e_score_correction_bias (one per expert)
    num_dense_layers: int = 0  # leading layers with a dense FFN instead of MoE (DeepSeek first_k_dense_replace)
    moe_every: int = 1  # a MoE block every k-th layer (Qwen decoder_sparse_step, Llama 4 interleave); others dense
    expert_bias: bool = False  # biases on every expert's matrices (gpt-oss: gate_up and down projections)
    expert_weight_format: str | None = None  # storage format the checkpoint gives the experts ("mxfp4": gpt-oss)


@dataclass(frozen=True)
class MLASpec:
    """DeepSeek multi-head latent attention (arXiv:2405.04434, section 2.1)."""

    q_lora_rank: int  # 0 means queries are projected directly (no low-rank q)
    kv_lora_rank: int  # compressed KV latent, the part that is cached
    qk_nope_head_dim: int
    qk_rope_head_dim: int  # decoupled RoPE key, cached beside the latent
    v_head_dim: int


@dataclass(frozen=True)
class SparseAttentionSpec:
    """DeepSeek Sparse Attention (DeepSeek-V3.2): a lightning indexer scores every earlier token with
    ``indexer_heads`` small heads of ``indexer_head_dim`` (keys from a ``hidden -> indexer_head_dim`` projection,
    queries from the MLA query latent) and the main attention reads only the ``top_k`` best keys."""

    indexer_heads: int  # index_n_heads
    indexer_head_dim: int  # index_head_dim
    top_k: int  # index_topk: keys the main attention attends per query


LAYER_KINDS = ("full", "sliding", "chunked")  # attention of one layer: all earlier keys, a window, the own chunk


@dataclass(frozen=True)
class TransformerSpec:
    """Shape of a decoder-only transformer. Counts are per model; sizes are in elements, not bytes."""

    name: str  # catalog name or the config's model_type
    family: str  # normalised model_type (llama, mixtral, gpt2, ...)
    layers: int  # transformer blocks
    hidden: int  # model width d_model
    heads: int  # query heads
    kv_heads: int  # key/value heads (= heads for MHA, 1 for MQA)
    head_dim: int  # per-head width of q/k/v (may differ from hidden/heads, e.g. Gemma)
    ffn_hidden: int  # intermediate size of a dense FFN
    vocab: int  # vocabulary size
    gated_mlp: bool  # SwiGLU/GeGLU: three matrices; otherwise two (GPT-2, NeoX, Falcon)
    tied_embeddings: bool  # output head shares the input embedding matrix
    qkv_bias: bool = False  # biases on q, k, v projections
    out_bias: bool = False  # bias on the attention output projection
    mlp_bias: bool = False  # biases on FFN matrices
    norm: str = "rmsnorm"  # "rmsnorm" (weight) or "layernorm" (weight + bias)
    norms_per_layer: int = 2  # Gemma 2 has 4 (pre/post attention and FFN); parallel-attention Falcon has 1
    qk_norm: bool = False  # per-head RMSNorm on q and k (Qwen3)
    learned_positions: int = 0  # rows of a learned position table (GPT-2); 0 for RoPE/ALiBi
    parallel_attn: bool = False  # attention and MLP read the same input (GPT-J/NeoX/Falcon)
    sliding_window: int = 0  # span of local-attention layers (a window, or Llama 4's chunk); 0 = none
    sliding_every: int = 0  # every k-th layer is local (Gemma 2: 2); 1 = all layers; 0 = none
    layer_types: tuple[str, ...] = ()  # per-layer LAYER_KINDS where the config lists them; () = sliding_every rule
    attention_sinks: bool = False  # one learned sink logit per head and layer (gpt-oss)
    dropout: bool = False  # training stores dropout masks (any dropout probability > 0 in the config)
    max_position: int = 0  # max_position_embeddings, informational
    moe: MoESpec | None = None
    mla: MLASpec | None = None
    sparse: SparseAttentionSpec | None = None  # DSA indexer (DeepSeek-V3.2)

    @property
    def is_moe(self) -> bool:
        return self.moe is not None

    @property
    def q_dim(self) -> int:
        """Width of all query heads together."""
        if self.mla:
            return self.heads * (self.mla.qk_nope_head_dim + self.mla.qk_rope_head_dim)
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of all key heads together (equal to all value heads for non-MLA models)."""
        return self.kv_heads * self.head_dim

    def moe_layer_count(self) -> int:
        """How many layers carry a MoE FFN."""
        if not self.moe:
            return 0
        m = self.moe
        return sum(
            1 for i in range(self.layers) if i >= m.num_dense_layers and (i + 1) % m.moe_every == 0
        )

    def layer_kinds(self) -> tuple[str, ...]:
        """The attention kind of every layer (``LAYER_KINDS``): the config's list, else the ``sliding_every`` rule
        (layer i is local when i % sliding_every == 0, Gemma 2's even layers)."""
        if self.layer_types:
            return self.layer_types
        local = bool(self.sliding_window and self.sliding_every)
        return tuple("sliding" if local and i % self.sliding_every == 0 else "full" for i in range(self.layers))

    def local_layer_count(self) -> int:
        """How many layers attend a bounded span (a sliding window or a chunk of ``sliding_window`` tokens)."""
        if not self.sliding_window:
            return 0
        return sum(1 for k in self.layer_kinds() if k != "full")

    @property
    def local_attention(self) -> str:
        """The kind of the local layers: "sliding" (a window) or "chunked" (Llama 4); "full" when there are none."""
        kinds = {k for k in self.layer_kinds() if k != "full"} if self.sliding_window else set()
        return kinds.pop() if kinds else "full"

    def replace(self, **changes: Any) -> TransformerSpec:
        return dataclasses.replace(self, **changes)


SUPPORTED_FAMILIES = (
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2",
    "phi3", "gpt2", "gpt_neox", "falcon", "deepseek_v3", "deepseek_v32", "kimi_k2", "gpt_oss", "llama4",
)  # fmt: skip

_FAMILY_ALIASES = {"RefinedWebModel": "falcon", "RefinedWeb": "falcon", "deepseek_v2": "deepseek_v3",
                   "llama4_text": "llama4"}  # fmt: skip


# Largest width or head count accepted from a config (hidden size, intermediate size, heads, ranks): far beyond any
# model, small enough that products of dimensions stay exact in float64 and int64 arithmetic. Layers, vocabulary,
# experts and positions have their own bounds (``scaleright.limits``), each with its reason.
MAX_DIM = 10_000_000
MAX_LAYERS = int(LIMITS["layers"].high)  # 2**20
MAX_VOCAB = int(LIMITS["vocab"].high)  # 2**26
MAX_EXPERTS = int(LIMITS["experts"].high)  # 2**16
MAX_POSITIONS = int(LIMITS["positions"].high)  # max_position_embeddings is informational and may be large
_WHY = {
    MAX_DIM: "10**7; the widest published models have hidden sizes ~2**14",
    MAX_LAYERS: LIMITS["layers"].why,
    MAX_VOCAB: LIMITS["vocab"].why,
    MAX_EXPERTS: LIMITS["experts"].why,
    MAX_POSITIONS: LIMITS["positions"].why,
}
assert len(_WHY) == 5, "each bound needs its own value to find its reason"

# Keys that name the same quantity in different families' configs (transformers' ``attribute_map``). A config that
# gives two of them with different values is contradictory: which one a reader takes is an accident, so it is an
# error naming both.
_SYNONYMS = (
    ("hidden_size", "n_embd", "d_model"),
    ("num_hidden_layers", "n_layer", "num_layers"),
    ("num_attention_heads", "n_head", "num_heads"),
    ("num_key_value_heads", "num_kv_heads", "n_head_kv"),
    ("intermediate_size", "n_inner", "ffn_hidden_size"),
    ("num_local_experts", "num_experts", "n_routed_experts"),
    ("num_experts_per_tok", "experts_per_token"),
)


class _Reader:
    """Reads fields of one config, naming the file and field in every error."""

    def __init__(self, cfg: dict[str, Any], source: str):
        self.cfg, self.source = cfg, source

    def get(self, *keys: str, default: Any = ...) -> Any:
        for k in keys:
            if k in self.cfg and self.cfg[k] is not None:
                return self.cfg[k]
        if default is ...:
            raise CatalogFileError(
                f"{self.source}: missing field {' or '.join(repr(k) for k in keys)} "
                f"(required for model_type {self.cfg.get('model_type')!r})"
            )
        return default

    def int(self, *keys: str, default: Any = ..., minimum: int = 1, maximum: int = MAX_DIM) -> int:
        """An integer in ``minimum..maximum``. Dimensions and counts need at least 1; pass ``minimum=0`` where 0
        means "none" (q_lora_rank, first_k_dense_replace, shared expert sizes, ...)."""
        v = self.get(*keys, default=default)
        if isinstance(v, bool) or not isinstance(v, int) or not minimum <= v <= maximum:
            why = f" ({_WHY[maximum]})" if isinstance(v, int) and not isinstance(v, bool) and v > maximum else ""
            default = " (not given, so its default)" if all(self.cfg.get(k) is None for k in keys) else ""
            raise CatalogFileError(
                f"{self.source}: field {self._key(keys)!r}{default} must be an integer from {minimum} to "
                f"{maximum:,}, got {_show(v)}{why}"
            )
        return v

    def bool(self, *keys: str, default: Any = ...) -> bool:
        """A JSON boolean (true/false); strings such as "false" and numbers are errors, not truthy values."""
        v = self.get(*keys, default=default)
        if not isinstance(v, bool):
            raise CatalogFileError(f"{self.source}: field {self._key(keys)!r} must be true or false, got {v!r}")
        return v

    def prob(self, key: str) -> float:
        """A probability in [0, 1] (dropout rates); absent or null is 0."""
        v = self.get(key, default=0.0)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
            raise CatalogFileError(f"{self.source}: field {key!r} must be a number from 0 to 1, got {v!r}")
        return float(v)

    def _key(self, keys: tuple[str, ...]) -> str:
        """The key the file used (the first alias when none is present)."""
        return next((k for k in keys if self.cfg.get(k) is not None), keys[0])


def _show(v: Any) -> str:
    """A config value for a message; an integer of more than 40 digits by its length."""
    if isinstance(v, int) and not isinstance(v, bool) and len(str(abs(v))) > 40:
        return f"an integer of {len(str(abs(v)))} digits"
    s = repr(v)
    return s if len(s) <= 60 else s[:57] + "..."


def _json_type(v: Any) -> str:
    return {list: "list", dict: "dict (JSON object)", bool: "boolean", int: "number", float: "number"}.get(
        type(v), type(v).__name__
    ) + f" ({_show(v)})"


def _check_synonyms(cfg: dict[str, Any], source: str) -> None:
    for group in _SYNONYMS:
        given = [(k, cfg[k]) for k in group if cfg.get(k) is not None]
        if len({repr(v) for _, v in given}) > 1:
            (k1, v1), (k2, v2) = given[0], next((k, v) for k, v in given[1:] if repr(v) != repr(given[0][1]))
            raise CatalogFileError(
                f"{source}: {k1}={_show(v1)} and {k2}={_show(v2)} name the same quantity with different values; "
                "keep one of them"
            )


def _dropout(r: _Reader, *keys: str) -> bool:
    """Whether any of the dropout ``keys`` is non-zero; every key is checked (a bad later key is not skipped)."""
    return any([r.prob(k) > 0 for k in keys])


def from_hf_config(cfg: dict[str, Any], *, name: str | None = None, source: str = "config.json") -> TransformerSpec:
    """Build a ``TransformerSpec`` from a Hugging Face config dict.

    Raises ``CatalogFileError`` naming ``source`` and the missing or malformed field, and ``InputError`` for a
    ``model_type`` outside ``SUPPORTED_FAMILIES``.
    """
    if not isinstance(cfg, dict):
        raise CatalogFileError(f"{source}: expected a JSON object at the top level")
    mt = cfg.get("model_type")
    if mt is None:
        raise CatalogFileError(f"{source}: missing field 'model_type' (one of {', '.join(SUPPORTED_FAMILIES)})")
    if not isinstance(mt, str):
        raise CatalogFileError(
            f"{source}: field 'model_type' must be a string, one of {', '.join(SUPPORTED_FAMILIES)}; "
            f"got a {_json_type(mt)}"
        )
    family = _FAMILY_ALIASES.get(mt, mt)
    if family not in SUPPORTED_FAMILIES:
        raise InputError(
            f"{source}: model_type {mt!r} is not supported; supported: {', '.join(SUPPORTED_FAMILIES)}"
        )
    label = name or cfg.get("_name_or_path") or family
    if family == "llama4" and mt == "llama4":  # a multimodal config: the language model is its text_config
        text = cfg.get("text_config")
        if not isinstance(text, dict):
            raise CatalogFileError(f"{source}: model_type 'llama4' needs a 'text_config' object (the language model)"
                                   f", got {_json_type(text) if text is not None else 'none'}")  # fmt: skip
        inner = text.get("model_type", "llama4_text")
        if inner != "llama4_text":
            raise CatalogFileError(f"{source}: field 'text_config.model_type' must be 'llama4_text' (the Llama 4 "
                                   f"language model), got {_show(inner)}")  # fmt: skip
        cfg, source = text, f"{source}: text_config"
    _check_synonyms(cfg, source)
    r = _Reader(cfg, source)
    builder = {
        "gpt2": _gpt2, "gpt_neox": _gpt_neox, "falcon": _falcon, "deepseek_v3": _deepseek, "deepseek_v32": _deepseek,
        "kimi_k2": _deepseek, "gpt_oss": _gpt_oss, "llama4": _llama4,
    }.get(family, _llama_like)  # fmt: skip
    spec = builder(r, family, label)
    hidden_key, heads_key = r._key(("hidden_size", "n_embd")), r._key(("num_attention_heads", "n_head"))
    if spec.head_dim < 1:
        raise CatalogFileError(
            f"{source}: {hidden_key}={spec.hidden} is smaller than {heads_key}={spec.heads}, "
            "so a head would have no width (give head_dim, or fewer heads)"
        )
    if spec.mla is None and cfg.get("head_dim") is None and spec.hidden % spec.heads:
        raise CatalogFileError(
            f"{source}: {hidden_key}={spec.hidden} is not divisible by {heads_key}={spec.heads} "
            f"({spec.hidden} / {spec.heads} = {spec.hidden / spec.heads:g}); give head_dim explicitly, "
            "or a width that is a multiple of the heads"
        )
    if spec.moe and spec.moe.top_k > spec.moe.num_experts:
        raise CatalogFileError(
            f"{source}: num_experts_per_tok={spec.moe.top_k} exceeds the number of experts ({spec.moe.num_experts})"
        )
    if spec.heads % max(spec.kv_heads, 1):
        raise CatalogFileError(
            f"{source}: num_attention_heads={spec.heads} is not a multiple of num_key_value_heads={spec.kv_heads}"
        )
    return spec


def _llama_like(r: _Reader, family: str, name: str) -> TransformerSpec:
    """Llama, Mistral, Mixtral, Qwen2/3 (+MoE), Gemma 1/2 and Phi-3: RMSNorm, RoPE, gated MLP."""
    hidden = r.int("hidden_size")
    heads = r.int("num_attention_heads")
    kv = r.int("num_key_value_heads", default=heads)
    head_dim = r.int("head_dim") if r.cfg.get("head_dim") is not None else hidden // heads  # checked >= 1 below
    layers = r.int("num_hidden_layers", maximum=MAX_LAYERS)
    qwen = family.startswith("qwen")
    gemma2 = family == "gemma2"
    tied_default = family in ("gemma", "gemma2")
    moe = None
    if family == "mixtral":
        moe = MoESpec(
            num_experts=r.int("num_local_experts", maximum=MAX_EXPERTS),
            top_k=r.int("num_experts_per_tok", maximum=MAX_EXPERTS),
            expert_ffn_hidden=r.int("intermediate_size"),
        )  # fmt: skip
    elif family in ("qwen2_moe", "qwen3_moe"):
        shared = r.int("shared_expert_intermediate_size", default=0, minimum=0)
        mlp_only = r.get("mlp_only_layers", default=[]) or []
        if mlp_only:
            raise InputError(f"{r.source}: mlp_only_layers={mlp_only} is not supported yet (must be empty)")
        moe = MoESpec(
            num_experts=r.int("num_experts", maximum=MAX_EXPERTS),
            top_k=r.int("num_experts_per_tok", maximum=MAX_EXPERTS),
            expert_ffn_hidden=r.int("moe_intermediate_size"),
            num_shared_experts=1 if shared else 0, shared_ffn_hidden=shared, shared_expert_gate=bool(shared),
            moe_every=r.int("decoder_sparse_step", default=1, maximum=MAX_LAYERS),
        )  # fmt: skip
    window = r.int("sliding_window", default=0, minimum=0, maximum=MAX_POSITIONS)
    use_window = r.bool("use_sliding_window", default=True)
    sliding_every = 0
    if window and use_window:
        sliding_every = 2 if gemma2 else 1
    return TransformerSpec(
        name=name, family=family, layers=layers, hidden=hidden, heads=heads, kv_heads=kv, head_dim=head_dim,
        ffn_hidden=r.int("intermediate_size"), vocab=r.int("vocab_size", maximum=MAX_VOCAB), gated_mlp=True,
        tied_embeddings=r.bool("tie_word_embeddings", default=tied_default),
        qkv_bias=r.bool("attention_bias", default=family == "qwen2" or family == "qwen2_moe"),
        out_bias=r.bool("attention_bias", default=False) and not qwen,
        mlp_bias=r.bool("mlp_bias", default=False),
        norm="rmsnorm", norms_per_layer=4 if gemma2 else 2, qk_norm=family in ("qwen3", "qwen3_moe"),
        sliding_window=window if sliding_every else 0, sliding_every=sliding_every,
        dropout=_dropout(r, "attention_dropout", "hidden_dropout", "resid_pdrop"),
        max_position=r.int("max_position_embeddings", default=0, minimum=0, maximum=MAX_POSITIONS), moe=moe,
    )  # fmt: skip


def _gpt2(r: _Reader, family: str, name: str) -> TransformerSpec:
    """GPT-2 (Radford et al. 2019) and GPT-3-shaped configs: LayerNorm, learned positions, biases, 4h GELU MLP."""
    hidden = r.int("n_embd", "hidden_size")
    heads = r.int("n_head", "num_attention_heads")
    inner = r.int("n_inner", default=4 * hidden)
    return TransformerSpec(
        name=name, family=family, layers=r.int("n_layer", "num_hidden_layers", maximum=MAX_LAYERS),
        hidden=hidden, heads=heads,
        kv_heads=heads, head_dim=hidden // heads, ffn_hidden=inner, vocab=r.int("vocab_size", maximum=MAX_VOCAB),
        gated_mlp=False, tied_embeddings=r.bool("tie_word_embeddings", default=True), qkv_bias=True,
        out_bias=True, mlp_bias=True, norm="layernorm",
        learned_positions=r.int("n_positions", default=1024, minimum=0, maximum=MAX_POSITIONS),
        dropout=_dropout(r, "resid_pdrop", "attn_pdrop", "embd_pdrop"),
        max_position=r.int("n_positions", default=1024, minimum=0, maximum=MAX_POSITIONS),
    )  # fmt: skip


def _gpt_neox(r: _Reader, family: str, name: str) -> TransformerSpec:
    """GPT-NeoX (Black et al. 2022): LayerNorm, biases everywhere, parallel residual, untied head by default."""
    hidden = r.int("hidden_size")
    heads = r.int("num_attention_heads")
    return TransformerSpec(
        name=name, family=family, layers=r.int("num_hidden_layers", maximum=MAX_LAYERS),
        hidden=hidden, heads=heads, kv_heads=heads,
        head_dim=hidden // heads, ffn_hidden=r.int("intermediate_size"), vocab=r.int("vocab_size", maximum=MAX_VOCAB),
        gated_mlp=False, tied_embeddings=r.bool("tie_word_embeddings", default=False), qkv_bias=True,
        out_bias=True, mlp_bias=True, norm="layernorm", parallel_attn=r.bool("use_parallel_residual", default=True),
        dropout=_dropout(r, "attention_dropout", "hidden_dropout", "attention_probs_dropout_prob",
                         "hidden_dropout_prob"),
        max_position=r.int("max_position_embeddings", default=0, minimum=0, maximum=MAX_POSITIONS),
    )  # fmt: skip


def _falcon(r: _Reader, family: str, name: str) -> TransformerSpec:
    """Falcon (Almazrouei et al. 2023), 2023 RefinedWeb and in-library formats: MQA/GQA, parallel attention."""
    hidden = r.int("hidden_size")
    heads = r.int("num_attention_heads", "n_head")
    new_arch = r.bool("new_decoder_architecture", default=False)
    if new_arch:
        kv = r.int("num_kv_heads", "n_head_kv", default=heads)
    else:
        kv = 1 if r.bool("multi_query", default=True) else heads
    parallel = r.bool("parallel_attn", default=True)
    bias = r.bool("bias", default=False)
    return TransformerSpec(
        name=name, family="falcon", layers=r.int("num_hidden_layers", "n_layer", maximum=MAX_LAYERS),
        hidden=hidden, heads=heads,
        kv_heads=kv, head_dim=hidden // heads, ffn_hidden=r.int("ffn_hidden_size", default=4 * hidden),
        vocab=r.int("vocab_size", maximum=MAX_VOCAB), gated_mlp=False,
        tied_embeddings=r.bool("tie_word_embeddings", default=True), qkv_bias=bias, out_bias=bias,
        mlp_bias=bias, norm="layernorm", norms_per_layer=2 if new_arch or not parallel else 1,
        parallel_attn=parallel, dropout=_dropout(r, "attention_dropout", "hidden_dropout"),
        max_position=r.int("max_position_embeddings", default=2048, minimum=0, maximum=MAX_POSITIONS),
    )  # fmt: skip


def _deepseek(r: _Reader, family: str, name: str) -> TransformerSpec:
    """DeepSeek-V2/V3 (arXiv:2412.19437): MLA attention, shared + routed experts, leading dense layers. Also
    Kimi K2 (the same architecture with 384 experts) and DeepSeek-V3.2 (plus the DSA indexer, ``SparseAttentionSpec``).

    The multi-token-prediction module (``num_nextn_predict_layers``) is not part of the main model and is left out,
    as in the published 671 B count.
    """
    hidden = r.int("hidden_size")
    heads = r.int("num_attention_heads")
    mla = MLASpec(
        q_lora_rank=r.int("q_lora_rank", default=0, minimum=0), kv_lora_rank=r.int("kv_lora_rank"),
        qk_nope_head_dim=r.int("qk_nope_head_dim"), qk_rope_head_dim=r.int("qk_rope_head_dim", minimum=0),
        v_head_dim=r.int("v_head_dim"),
    )  # fmt: skip
    moe_ffn = r.int("moe_intermediate_size")
    moe = MoESpec(
        num_experts=r.int("n_routed_experts", maximum=MAX_EXPERTS),
        top_k=r.int("num_experts_per_tok", maximum=MAX_EXPERTS), expert_ffn_hidden=moe_ffn,
        num_shared_experts=r.int("n_shared_experts", default=0, minimum=0, maximum=MAX_EXPERTS),
        shared_ffn_hidden=moe_ffn,
        router_bias=r.get("topk_method", default="") == "noaux_tc",
        num_dense_layers=r.int("first_k_dense_replace", default=0, minimum=0, maximum=MAX_LAYERS),
        moe_every=r.int("moe_layer_freq", default=1, maximum=MAX_LAYERS),
    )  # fmt: skip
    sparse = None
    if family == "deepseek_v32":  # DSA: the indexer's queries come from the MLA query latent
        if not mla.q_lora_rank:
            raise CatalogFileError(f"{r.source}: model_type 'deepseek_v32' needs q_lora_rank >= 1 (the DSA indexer "
                                   "projects its queries from the query latent)")  # fmt: skip
        sparse = SparseAttentionSpec(
            indexer_heads=r.int("index_n_heads"), indexer_head_dim=r.int("index_head_dim"),
            top_k=r.int("index_topk", maximum=MAX_POSITIONS),
        )  # fmt: skip
    return TransformerSpec(
        name=name, family=family, layers=r.int("num_hidden_layers", maximum=MAX_LAYERS), hidden=hidden, heads=heads,
        kv_heads=heads, head_dim=mla.qk_nope_head_dim + mla.qk_rope_head_dim, sparse=sparse,
        ffn_hidden=r.int("intermediate_size"), vocab=r.int("vocab_size", maximum=MAX_VOCAB), gated_mlp=True,
        tied_embeddings=r.bool("tie_word_embeddings", default=False),
        qkv_bias=r.bool("attention_bias", default=False), norm="rmsnorm",
        dropout=_dropout(r, "attention_dropout"),
        max_position=r.int("max_position_embeddings", default=0, minimum=0, maximum=MAX_POSITIONS),
        moe=moe, mla=mla,
    )  # fmt: skip


_GPT_OSS_LAYER_TYPES = {"full_attention": "full", "sliding_attention": "sliding"}


def _layer_types(r: _Reader, layers: int, names: dict[str, str], default: list[str]) -> tuple[str, ...]:
    """The config's ``layer_types`` mapped to ``LAYER_KINDS`` (``default`` where absent), one entry per layer."""
    given = r.get("layer_types", default=default)
    if not isinstance(given, list) or any(not isinstance(x, str) or x not in names for x in given):
        raise CatalogFileError(f"{r.source}: field 'layer_types' must be a list of {' or '.join(map(repr, names))}"
                               f", one per layer; got {_show(given)}")  # fmt: skip
    if len(given) != layers:
        raise CatalogFileError(f"{r.source}: field 'layer_types' lists {len(given)} layers, but num_hidden_layers="
                               f"{layers}; give one entry per layer")  # fmt: skip
    return tuple(names[x] for x in given)


def _gpt_oss(r: _Reader, family: str, name: str) -> TransformerSpec:
    """gpt-oss (OpenAI 2025, ``transformers`` GptOss): GQA with biases and one learned attention-sink logit per
    head, ``layer_types`` alternating sliding-window (``sliding_window`` keys) and full attention, every layer a
    MoE of biased SwiGLU experts (gate_up and down projections carry biases) with a biased router, untied head.
    ``quantization_config.quant_method`` "mxfp4" is how the checkpoint stores the experts (``expert_weight_format``).
    Defaults are ``GptOssConfig``'s (attention_bias true; layer i sliding when i is even)."""
    hidden = r.int("hidden_size")
    heads = r.int("num_attention_heads")
    layers = r.int("num_hidden_layers", maximum=MAX_LAYERS)
    kinds = _layer_types(r, layers, _GPT_OSS_LAYER_TYPES,
                         ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)])
    window = r.int("sliding_window", default=128, minimum=0, maximum=MAX_POSITIONS)
    if window == 0 and "sliding" in kinds:
        raise CatalogFileError(f"{r.source}: field 'sliding_window' is 0 but 'layer_types' has sliding_attention "
                               "layers; give the window (gpt-oss: 128)")  # fmt: skip
    quant = r.get("quantization_config", default={})
    if not isinstance(quant, dict):
        raise CatalogFileError(f"{r.source}: field 'quantization_config' must be an object, got {_json_type(quant)}")
    fmt = quant.get("quant_method")
    bias = r.bool("attention_bias", default=True)
    moe = MoESpec(
        num_experts=r.int("num_local_experts", maximum=MAX_EXPERTS),
        top_k=r.int("num_experts_per_tok", "experts_per_token", maximum=MAX_EXPERTS),
        expert_ffn_hidden=r.int("intermediate_size"), router_bias=True, expert_bias=True,
        expert_weight_format=fmt if isinstance(fmt, str) else None,
    )  # fmt: skip
    return TransformerSpec(
        name=name, family=family, layers=layers, hidden=hidden, heads=heads,
        kv_heads=r.int("num_key_value_heads", default=heads),
        head_dim=r.int("head_dim") if r.cfg.get("head_dim") is not None else hidden // heads,
        ffn_hidden=r.int("intermediate_size"), vocab=r.int("vocab_size", maximum=MAX_VOCAB), gated_mlp=True,
        tied_embeddings=r.bool("tie_word_embeddings", default=False), qkv_bias=bias, out_bias=bias,
        norm="rmsnorm", sliding_window=window if "sliding" in kinds else 0, layer_types=kinds,
        attention_sinks=True, dropout=_dropout(r, "attention_dropout"),
        max_position=r.int("max_position_embeddings", default=0, minimum=0, maximum=MAX_POSITIONS), moe=moe,
    )  # fmt: skip


def _llama4(r: _Reader, family: str, name: str) -> TransformerSpec:
    """Llama 4 text model (``transformers`` Llama4Text): GQA; MoE layers every ``interleave_moe_layer_step``-th
    layer, each ``num_local_experts`` routed experts (top ``num_experts_per_tok``) plus one always-on shared
    expert, both of ``intermediate_size``; the other layers a dense MLP of ``intermediate_size_mlp``. RoPE layers
    (``no_rope_layers[i]`` = 1; by default all but every 4th) attend within chunks of ``attention_chunk_size``
    tokens; the NoPE layers attend globally. ``use_qk_norm`` is a parameter-free L2 norm (no weights counted)."""
    hidden = r.int("hidden_size")
    heads = r.int("num_attention_heads")
    layers = r.int("num_hidden_layers", maximum=MAX_LAYERS)
    inner = r.int("intermediate_size")
    nope = r.get("no_rope_layers", default=[int((i + 1) % 4 != 0) for i in range(layers)])
    if not isinstance(nope, list) or len(nope) != layers or any(x not in (0, 1) or isinstance(x, bool) for x in nope):
        raise CatalogFileError(f"{r.source}: field 'no_rope_layers' must be a list of 0/1, one per layer "
                               f"({layers}); got {_show(nope)}")  # fmt: skip
    chunk = r.int("attention_chunk_size", default=8192, minimum=0, maximum=MAX_POSITIONS)
    kinds = tuple("chunked" if chunk and rope else "full" for rope in nope)
    r.bool("use_qk_norm", default=True)  # validated; an L2 norm without weights
    moe = MoESpec(
        num_experts=r.int("num_local_experts", maximum=MAX_EXPERTS),
        top_k=r.int("num_experts_per_tok", maximum=MAX_EXPERTS), expert_ffn_hidden=inner,
        num_shared_experts=1, shared_ffn_hidden=inner,
        moe_every=r.int("interleave_moe_layer_step", default=1, maximum=MAX_LAYERS),
    )  # fmt: skip
    bias = r.bool("attention_bias", default=False)
    return TransformerSpec(
        name=name, family=family, layers=layers, hidden=hidden, heads=heads,
        kv_heads=r.int("num_key_value_heads", default=heads),
        head_dim=r.int("head_dim") if r.cfg.get("head_dim") is not None else hidden // heads,
        ffn_hidden=r.int("intermediate_size_mlp", default=inner), vocab=r.int("vocab_size", maximum=MAX_VOCAB),
        gated_mlp=True, tied_embeddings=r.bool("tie_word_embeddings", default=False), qkv_bias=bias, out_bias=bias,
        norm="rmsnorm", sliding_window=chunk if "chunked" in kinds else 0, layer_types=kinds,
        dropout=_dropout(r, "attention_dropout"),
        max_position=r.int("max_position_embeddings", default=0, minimum=0, maximum=MAX_POSITIONS), moe=moe,
    )  # fmt: skip
