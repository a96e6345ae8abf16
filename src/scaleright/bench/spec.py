"""The benchmark model's shape: a nanoGPT-style decoder (no torch needed).

Presets follow karpathy/nanoGPT ``model.py``: ``small`` is GPT-2 small (12 layers, 768 hidden, 12 heads, block
1024, vocab 50304 = 50257 padded to a multiple of 64); ``tiny`` is a 2-layer toy for tests and CPU runs.

Parameter count (token embedding tied to the LM head, learned positions, biases, pre-LayerNorm, MLP 4h):
  per block: LN 2h + qkv (3h^2 + 3h) + attn proj (h^2 + h) + LN 2h + fc (4h^2 + 4h) + proj (4h^2 + h) = 12h^2 + 13h
  total = V*h + T*h + L*(12h^2 + 13h) + 2h (final LN).
``tests/bench/test_model.py`` checks this closed form against the module's counted parameters.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from scaleright.bench.validate import validated
from scaleright.errors import InputError, UnknownNameError
from scaleright.limits import LIMITS

__all__ = ["GPTSpec", "PRESETS", "gpt_spec"]


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
