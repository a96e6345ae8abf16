"""The models the reference rows name, as ``TransformerSpec``: a catalog model, or a GPT-style shape from the row.

Row model strings map to catalog names (``MODEL_MAP``; None: not in the catalog, the row is skipped with that
reason). Rows that give their own shape (llm-foundry's MPT, BLOOM, Megatron GPT) are built with ``gpt_spec``; a row
that states a shape and names a catalog model must agree with it (``check_shape``).
"""

from __future__ import annotations

import functools
import re

from scaleright.workload import TransformerSpec, load_model
from validation.files import SkipRow, cell_int

__all__ = ["MODEL_MAP", "catalog_spec", "check_shape", "gpt_spec", "model_key"]


# row model string (lower case, suffixes like ' lora' removed) -> catalog name; None: not in the catalog
MODEL_MAP: dict[str, str | None] = {
    "llama 3.1 8b": "llama-3.1-8b", "llama 3 8b": "llama-3.1-8b", "llama3-8b": "llama-3.1-8b",
    "llama3 8b": "llama-3.1-8b", "llama v3.1 8b": "llama-3.1-8b",
    "llama 3.1 70b": "llama-3.1-70b", "llama 3 70b": "llama-3.1-70b", "llama3 70b": "llama-3.1-70b",
    "llama3-70b": "llama-3.1-70b", "llama v3.1 70b": "llama-3.1-70b", "llama 3.3 70b": "llama-3.1-70b",
    "llama3 70b 2-node": "llama-3.1-70b",
    "llama 3.1 405b": "llama-3.1-405b", "llama v3.1 405b": "llama-3.1-405b",
    "llama2-7b": "llama-2-7b", "llama2-13b": "llama-2-13b", "llama2-70b": "llama-2-70b",
    "gpt3-175b": "gpt3-175b",
    "mistral 7b": "mistral-7b-v0.3", "mixtral 8x7b": "mixtral-8x7b", "mixtral 8x22b": "mixtral-8x22b",
    "qwen3-30b-a3b": "qwen3-30b-a3b",
    "llama 4 scout": "llama-4-scout-17b-16e", "llama 4 maverick": None, "qwen3-235b-a22b": "qwen3-235b-a22b",
    "gpt3-5b": None, "gpt3-20b": None, "nemotron-8b": None, "nemotron-22b": None, "nemotron-340b": None,
}  # fmt: skip


def model_key(model: str) -> str:
    m = model.strip().lower()
    m = re.sub(r"\s*\((sft|lora) performance\)$", "", m)
    m = re.sub(r"\s+(sft|lora)$", "", m)
    return m


@functools.cache
def catalog_spec(name: str) -> TransformerSpec:
    return load_model(name)


@functools.cache
def gpt_spec(name: str, layers: int, hidden: int, heads: int, ffn: int, vocab: int, positions: int) -> TransformerSpec:
    """GPT-style block (Radford et al. 2019; Megatron GPT, MPT as benchmarked, BLOOM): LayerNorm with bias, biases on
    every projection, 2-matrix GELU MLP, tied head; ``positions`` rows of learned positions (0 for ALiBi)."""
    return TransformerSpec(
        name=name, family="gpt2", layers=layers, hidden=hidden, heads=heads, kv_heads=heads, head_dim=hidden // heads,
        ffn_hidden=ffn, vocab=vocab, gated_mlp=False, tied_embeddings=True, qkv_bias=True, out_bias=True,
        mlp_bias=True, norm="layernorm", learned_positions=positions, max_position=positions,
    )  # fmt: skip


def check_shape(spec: TransformerSpec, row: dict[str, str]) -> None:
    """A row that states a shape must agree with the catalog model it names."""
    pairs = {"layers": spec.layers, "hidden": spec.hidden, "heads": spec.heads, "kv_heads": spec.kv_heads,
             "ffn_hidden": spec.ffn_hidden, "vocab": spec.vocab}  # fmt: skip
    bad = [f"{k}={row[k]} vs {v}" for k, v in pairs.items() if cell_int(row.get(k, "")) not in (None, v)]
    if bad:
        raise SkipRow(f"row shape disagrees with catalog {spec.name}: {', '.join(bad)}")
