"""A nanoGPT-style decoder in PyTorch, with an optional KV cache for decoding (imports torch).

After karpathy/nanoGPT ``model.py``: learned positions, pre-LayerNorm blocks, causal self-attention through
``F.scaled_dot_product_attention``, a 4h GELU MLP, LM head tied to the token embedding. Shapes: B batch, T tokens,
h hidden, nh heads, hd = h / nh. Parallelism (DDP, FSDP) and recompute are applied from outside
(``bench/parallelize.py``), as in torchtitan. Parameter count: see ``bench/spec.py``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from scaleright.bench.spec import GPTSpec

__all__ = ["GPT", "KVCache"]


class KVCache:
    """Preallocated keys and values per layer: ``k[layer]`` is (B, nh, T_max, hd)."""

    def __init__(self, spec: GPTSpec, batch: int, *, device: torch.device, dtype: torch.dtype):
        shape = (batch, spec.heads, spec.seq_len, spec.head_dim)
        self.k = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(spec.layers)]
        self.v = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(spec.layers)]


class CausalSelfAttention(nn.Module):
    """Multi-head causal attention; with a cache, writes this call's k, v at ``pos`` and attends to [0, pos+T)."""

    def __init__(self, spec: GPTSpec):
        super().__init__()
        self.heads = spec.heads
        self.qkv = nn.Linear(spec.hidden, 3 * spec.hidden)  # 3h^2 + 3h
        self.proj = nn.Linear(spec.hidden, spec.hidden)  # h^2 + h

    def forward(self, x: torch.Tensor, cache: KVCache | None = None, layer: int = 0, pos: int = 0) -> torch.Tensor:
        B, T, h = x.shape
        q, k, v = self.qkv(x).split(h, dim=2)
        q, k, v = (t.view(B, T, self.heads, h // self.heads).transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hd)
        if cache is not None:
            assert pos == 0 or T == 1, "prefill starts at pos 0; decode feeds one token"
            cache.k[layer][:, :, pos : pos + T] = k
            cache.v[layer][:, :, pos : pos + T] = v
            k, v = cache.k[layer][:, :, : pos + T], cache.v[layer][:, :, : pos + T]
        y = F.scaled_dot_product_attention(q, k, v, is_causal=T > 1)
        return self.proj(y.transpose(1, 2).reshape(B, T, h))


class MLP(nn.Module):
    """h -> 4h -> GELU -> h."""

    def __init__(self, spec: GPTSpec):
        super().__init__()
        self.fc = nn.Linear(spec.hidden, 4 * spec.hidden)  # 4h^2 + 4h
        self.proj = nn.Linear(4 * spec.hidden, spec.hidden)  # 4h^2 + h

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.gelu(self.fc(x)))


class Block(nn.Module):
    """Pre-LN transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, spec: GPTSpec):
        super().__init__()
        self.ln1, self.attn = nn.LayerNorm(spec.hidden), CausalSelfAttention(spec)
        self.ln2, self.mlp = nn.LayerNorm(spec.hidden), MLP(spec)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None, layer: int = 0, pos: int = 0) -> torch.Tensor:
        x = x + self.attn(self.ln1(x), cache, layer, pos)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """Token ids (B, T) -> logits (B, T, V)."""

    def __init__(self, spec: GPTSpec):
        super().__init__()
        self.spec = spec
        self.tok = nn.Embedding(spec.vocab, spec.hidden)  # V*h, tied with the head
        self.pos = nn.Embedding(spec.seq_len, spec.hidden)  # T*h
        self.blocks = nn.ModuleList(Block(spec) for _ in range(spec.layers))
        self.ln_f = nn.LayerNorm(spec.hidden)  # 2h
        self.head = nn.Linear(spec.hidden, spec.vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, idx: torch.Tensor, cache: KVCache | None = None, pos: int = 0) -> torch.Tensor:
        T = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(pos, pos + T, device=idx.device))
        for i, block in enumerate(self.blocks):
            x = block(x, cache, i, pos) if cache is not None else block(x)
        return self.head(self.ln_f(x))
