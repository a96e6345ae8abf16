"""The benchmark model's shape: a nanoGPT-style preset or a Llama-family catalog decoder (no torch needed).

Presets follow karpathy/nanoGPT ``model.py``: ``small`` is GPT-2 small (12 layers, 768 hidden, 12 heads, block
1024, vocab 50304 = 50257 padded to a multiple of 64); ``tiny`` is a 2-layer toy for tests and CPU runs.

Parameter count (token embedding tied to the LM head, learned positions, biases, pre-LayerNorm, MLP 4h):
  per block: LN 2h + qkv (3h^2 + 3h) + attn proj (h^2 + h) + LN 2h + fc (4h^2 + 4h) + proj (4h^2 + h) = 12h^2 + 13h
  total = V*h + T*h + L*(12h^2 + 13h) + 2h (final LN).
``tests/bench/test_model.py`` checks this closed form against the module's counted parameters.

``DecoderSpec`` is a dense Llama-family catalog model (families ``DECODER_FAMILIES``: RMSNorm, SwiGLU, RoPE,
grouped-query attention; Qwen2's q/k/v biases and Qwen3's q/k RMSNorms), read from its ``config.json`` through
``workload.from_hf_config``, optionally truncated in depth (``layers``) and vocabulary (``vocab``). Its fields use the
Hugging Face config names, so ``hf_config()`` is a config ``from_hf_config`` reads back, and its parameter count is
``workload.count_params`` of that config (the catalog's own count for the same shapes). The torch module is
``bench/decoder.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from scaleright.bench.validate import validated
from scaleright.errors import InputError, UnknownNameError
from scaleright.limits import LIMITS

if TYPE_CHECKING:
    from scaleright.catalog.store import Catalog
    from scaleright.workload.spec import TransformerSpec

__all__ = ["GPTSpec", "PRESETS", "gpt_spec", "DecoderSpec", "DECODER_FAMILIES", "decoder_spec", "model_spec",
           "CATALOG_SEQ_LEN"]


class GPTSpec(BaseModel):
    """Shape of the decoder; knows nothing of GPUs or layouts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    layers: int = Field(ge=1, le=LIMITS["layers"].high, description="transformer blocks")
    hidden: int = Field(ge=1, le=LIMITS["hidden"].high, description="model width (embedding size)")
    heads: int = Field(ge=1, le=LIMITS["heads"].high, description="attention heads; must divide hidden")
    vocab: int = Field(ge=2, le=LIMITS["vocab"].high, description="vocabulary size (tokens)")
    seq_len: int = Field(ge=2, le=LIMITS["seq_len"].high,
                         description="context length in tokens (also the training sequence length)")

    @model_validator(mode="after")
    def _heads_divide_hidden(self) -> GPTSpec:
        if self.hidden % self.heads:
            raise ValueError(f"heads={self.heads} does not divide hidden={self.hidden}")
        return self

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.hidden // self.heads

    @property
    def params(self) -> int:
        """Parameter count by the closed form in the module docstring."""
        h, L = self.hidden, self.layers
        return self.vocab * h + self.seq_len * h + L * (12 * h * h + 13 * h) + 2 * h

    def as_dict(self) -> dict[str, Any]:
        """Dims plus the parameter count, as stored with every run."""
        return {**self.model_dump(), "params": self.params}


PRESETS: dict[str, dict[str, int]] = {
    "tiny": {"layers": 2, "hidden": 64, "heads": 4, "vocab": 256, "seq_len": 64},
    "small": {"layers": 12, "hidden": 768, "heads": 12, "vocab": 50304, "seq_len": 1024},
}


def gpt_spec(preset: str | None = "tiny", **overrides: int | None) -> GPTSpec:
    """A preset with explicit dims overriding it (None means keep the preset's value).

    ``preset=None`` requires every dim. Raises ``UnknownNameError`` or ``InputError`` naming the field.
    """
    base: dict[str, int] = {}
    if preset is not None:
        if preset not in PRESETS:
            raise UnknownNameError("model preset", preset, PRESETS)
        base = dict(PRESETS[preset])
    base.update({k: v for k, v in overrides.items() if v is not None})
    missing = [f for f in GPTSpec.model_fields if f not in base]
    if missing:
        flags = ", ".join("--" + m.replace("_", "-") for m in missing)
        raise InputError(f"model dims missing without a preset: {flags}")
    return validated(GPTSpec, base, what="model")


DecoderFamily = Literal["llama", "mistral", "qwen2", "qwen3", "phi3"]  # dense decoders bench/decoder.py builds
DECODER_FAMILIES: tuple[str, ...] = get_args(DecoderFamily)
CATALOG_SEQ_LEN = 2048  # default training sequence length of a catalog model (capped by its context length)


class DecoderSpec(BaseModel):
    """A dense Llama-family decoder from the catalog, as benchmarked (after any truncation)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    arch: Literal["llama-decoder"] = "llama-decoder"
    name: str = Field(min_length=1, max_length=200, description="catalog model name (or the config.json path)")
    family: DecoderFamily = Field(description="model_type of the config")
    num_hidden_layers: int = Field(ge=1, le=LIMITS["layers"].high, description="decoder layers benchmarked")
    catalog_layers: int = Field(ge=1, le=LIMITS["layers"].high, description="decoder layers of the catalog model")
    hidden_size: int = Field(ge=1, le=LIMITS["hidden"].high)
    num_attention_heads: int = Field(ge=1, le=LIMITS["heads"].high)
    num_key_value_heads: int = Field(ge=1, le=LIMITS["heads"].high, description="GQA key/value heads")
    head_dim: int = Field(ge=1)
    intermediate_size: int = Field(ge=1, description="SwiGLU inner width")
    vocab_size: int = Field(ge=2, le=LIMITS["vocab"].high, description="vocabulary benchmarked")
    catalog_vocab: int = Field(ge=2, le=LIMITS["vocab"].high, description="vocabulary of the catalog model")
    tie_word_embeddings: bool
    qkv_bias: bool = False
    out_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False
    rope_theta: float = Field(10000.0, gt=0)
    rms_norm_eps: float = Field(1e-6, gt=0)
    initializer_range: float = Field(0.02, gt=0, description="std of the normal init of every matrix (HF's)")
    seq_len: int = Field(ge=2, le=LIMITS["seq_len"].high, description="training sequence length in tokens")

    @model_validator(mode="after")
    def _shapes(self) -> DecoderSpec:
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"num_attention_heads={self.num_attention_heads} is not a multiple of "
                             f"num_key_value_heads={self.num_key_value_heads}")
        if self.head_dim % 2:
            raise ValueError(f"head_dim={self.head_dim} must be even (RoPE rotates pairs)")
        if self.num_hidden_layers > self.catalog_layers or self.vocab_size > self.catalog_vocab:
            raise ValueError("a truncated model cannot be larger than the catalog's")
        return self

    @property
    def vocab(self) -> int:
        """Vocabulary size (the name the training loop uses for every model)."""
        return self.vocab_size

    @property
    def truncated(self) -> bool:
        """Fewer layers or a smaller vocabulary than the catalog model."""
        return self.num_hidden_layers < self.catalog_layers or self.vocab_size < self.catalog_vocab

    def hf_config(self, *, full: bool = False) -> dict[str, Any]:
        """A Hugging Face config of this model (``full``: of the catalog model, untruncated)."""
        return {
            "model_type": self.family, "hidden_size": self.hidden_size,
            "num_hidden_layers": self.catalog_layers if full else self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads, "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim, "intermediate_size": self.intermediate_size,
            "vocab_size": self.catalog_vocab if full else self.vocab_size,
            "tie_word_embeddings": self.tie_word_embeddings, "attention_bias": self.qkv_bias,
            "mlp_bias": self.mlp_bias, "rope_theta": self.rope_theta, "rms_norm_eps": self.rms_norm_eps,
            "initializer_range": self.initializer_range, "max_position_embeddings": self.seq_len,
            "use_sliding_window": False,
        }  # fmt: skip

    def transformer_spec(self, *, full: bool = False) -> TransformerSpec:
        """The workload model of this decoder (``full``: the catalog model's depth and vocabulary)."""
        from scaleright.workload.spec import from_hf_config

        return from_hf_config(self.hf_config(full=full), name=self.name, source=f"bench model {self.name}")

    @property
    def params(self) -> int:
        """Parameter count of the model as benchmarked (``workload.count_params``; a tied head counted once)."""
        from scaleright.workload.params import count_params

        return count_params(self.transformer_spec()).total

    @property
    def catalog_params(self) -> int:
        """Parameter count of the untruncated catalog model."""
        from scaleright.workload.params import count_params

        return count_params(self.transformer_spec(full=True)).total

    def as_dict(self) -> dict[str, Any]:
        """What every run stores: the catalog name, the config as run, the counts and the truncation.

        The dims are under their Hugging Face names inside ``config`` (none of the preset's ``layers``/``hidden``
        keys), so nothing reads a catalog decoder as the nanoGPT preset's GPT-2 shape."""
        return {"arch": self.arch, "name": self.name, "family": self.family, "seq_len": self.seq_len,
                "params": self.params, "catalog_params": self.catalog_params, "truncated": self.truncated,
                "truncation": {"layers": [self.num_hidden_layers, self.catalog_layers],
                               "vocab": [self.vocab_size, self.catalog_vocab]},
                "config": self.hf_config()}  # fmt: skip


def decoder_spec(name: str, *, layers: int | None = None, vocab: int | None = None, seq_len: int | None = None,
                 catalog: Catalog | None = None) -> DecoderSpec:
    """The catalog model ``name`` (or a config.json path) as a bench decoder, its depth truncated to ``layers`` and
    its vocabulary to ``vocab`` when given; ``seq_len`` defaults to ``CATALOG_SEQ_LEN`` capped by the model's
    context and sliding window. One-line ``InputError`` naming the flag for a family it cannot build or an
    enlargement."""
    from scaleright.workload.model import load_model

    t = load_model(name, catalog=catalog)
    why = ("mixture-of-experts" if t.moe else "latent attention (MLA)" if t.mla else
           f"family {t.family!r}" if t.family not in DECODER_FAMILIES else
           f"{t.norms_per_layer} norms per layer" if t.norms_per_layer != 2 else
           "LayerNorm" if t.norm != "rmsnorm" else None)  # fmt: skip
    if why is not None:
        raise InputError(f"--model={name}: {why} is not built by bench train; give a preset ({', '.join(PRESETS)}) "
                         f"or a dense catalog model of family {', '.join(DECODER_FAMILIES)} (e.g. llama-3.2-1b)")
    for flag, value, have, low in (("--layers", layers, t.layers, 1), ("--vocab", vocab, t.vocab, 2)):
        if value is not None and not low <= value <= have:
            raise InputError(f"{flag}={value}: {t.name} has {have:,}; {flag} truncates a catalog model, so give "
                             f"{low} to {have:,}")
    context = t.max_position or CATALOG_SEQ_LEN
    seq = min(CATALOG_SEQ_LEN, context, t.sliding_window or context) if seq_len is None else seq_len
    if seq > context:
        raise InputError(f"--seq-len={seq} exceeds {t.name}'s context of {context:,} tokens")
    if t.sliding_window and seq > t.sliding_window:
        raise InputError(f"--seq-len={seq} exceeds {t.name}'s sliding window of {t.sliding_window:,} tokens; the "
                         "bench decoder attends causally over the whole sequence, the same as the window only "
                         f"up to {t.sliding_window:,} tokens")
    from scaleright.catalog.models import load_model_config

    cfg, _ = load_model_config(name, catalog=catalog)
    dims = {"name": t.name, "family": t.family, "num_hidden_layers": layers or t.layers, "catalog_layers": t.layers,
            "hidden_size": t.hidden, "num_attention_heads": t.heads, "num_key_value_heads": t.kv_heads,
            "head_dim": t.head_dim, "intermediate_size": t.ffn_hidden, "vocab_size": vocab or t.vocab,
            "catalog_vocab": t.vocab, "tie_word_embeddings": t.tied_embeddings, "qkv_bias": t.qkv_bias,
            "out_bias": t.out_bias, "mlp_bias": t.mlp_bias, "qk_norm": t.qk_norm, "seq_len": seq}  # fmt: skip
    for key in ("rope_theta", "rms_norm_eps", "initializer_range"):
        if isinstance(cfg.get(key), (int, float)) and not isinstance(cfg.get(key), bool):
            dims[key] = float(cfg[key])
    return validated(DecoderSpec, dims, what="model")


def model_spec(name: str, *, layers: int | None = None, hidden: int | None = None, heads: int | None = None,
               vocab: int | None = None, seq_len: int | None = None,
               catalog: Catalog | None = None) -> GPTSpec | DecoderSpec:
    """``--model NAME``: a preset (``gpt_spec``, every dim overridable) or a catalog decoder (``decoder_spec``:
    ``layers`` and ``vocab`` truncate it; ``hidden`` and ``heads`` would make another model and are refused)."""
    if name in PRESETS:
        return gpt_spec(name, layers=layers, hidden=hidden, heads=heads, vocab=vocab, seq_len=seq_len)
    for flag, value in (("--hidden", hidden), ("--heads", heads)):
        if value is not None:
            raise InputError(f"{flag} changes a preset's shape; with a catalog model (--model {name}) only --layers "
                             "and --vocab truncate it (and --seq-len sets the sequence)")
    try:
        return decoder_spec(name, layers=layers, vocab=vocab, seq_len=seq_len, catalog=catalog)
    except UnknownNameError as exc:
        from scaleright.catalog.store import Catalog

        cat = catalog if catalog is not None else Catalog.load()
        names = [*PRESETS, *(n for m in cat.models.values() for n in m.names())]
        raise UnknownNameError("model (a preset or a catalog model)", exc.name, names) from None
