"""A Llama-family decoder in PyTorch with random weights, for ``bench train --model <catalog model>`` (imports torch).

After Hugging Face ``transformers`` ``modeling_llama.py`` (and torchtitan's ``llama3`` model): token embedding,
pre-RMSNorm blocks of grouped-query attention with rotary position embeddings (RoPE, Su et al. 2021; ``rope_theta``
from the config; a config's ``rope_scaling`` changes the frequencies only, not the work, and is not applied) and a
SwiGLU MLP ``down(silu(gate(x)) * up(x))``, a final RMSNorm and an LM head (tied to the embedding where the config
ties it). Qwen2 adds q/k/v biases, Qwen3 a per-head RMSNorm on q and k. Attention is causal over the whole sequence
(``F.scaled_dot_product_attention``); shapes: B batch, T tokens, nh query heads, nkv key/value heads, hd head width.

The model holds no buffers (RoPE's angles are computed in ``forward``), so it can be built on the ``meta`` device
and materialised with ``to_empty`` + ``init_weights`` (``bench/parallelize.py``). ``init_weights`` follows HF's
``_init_weights``: every matrix and the embedding normal(0, ``initializer_range``), biases zero, norms one.
Parameter count: ``DecoderSpec.params`` (``workload.count_params``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from scaleright.bench.spec import DecoderSpec

__all__ = ["Decoder", "DecoderBlock"]


def _rope(x: torch.Tensor, theta: float) -> torch.Tensor:
    """Rotate pairs (first half, second half) of the last dim of x (B, nh, T, hd) by position-dependent angles."""
    T, hd = x.shape[-2], x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, hd, 2, device=x.device, dtype=torch.float32) / hd)  # (hd/2,)
    ang = torch.outer(torch.arange(T, device=x.device, dtype=torch.float32), inv)  # (T, hd/2)
    cos, sin = torch.cat((ang, ang), -1).cos().to(x.dtype), torch.cat((ang, ang), -1).sin().to(x.dtype)
    x1, x2 = x[..., : hd // 2], x[..., hd // 2 :]
    return x * cos + torch.cat((-x2, x1), -1) * sin


class Attention(nn.Module):
    """Grouped-query causal attention: q (nh x hd), k and v (nkv x hd) projections, output projection."""

    def __init__(self, spec: DecoderSpec):
        super().__init__()
        h, hd = spec.hidden_size, spec.head_dim
        self.nh, self.nkv, self.hd, self.theta = spec.num_attention_heads, spec.num_key_value_heads, hd, spec.rope_theta
        self.q_proj = nn.Linear(h, self.nh * hd, bias=spec.qkv_bias)
        self.k_proj = nn.Linear(h, self.nkv * hd, bias=spec.qkv_bias)
        self.v_proj = nn.Linear(h, self.nkv * hd, bias=spec.qkv_bias)
        self.o_proj = nn.Linear(self.nh * hd, h, bias=spec.out_bias)
        self.q_norm = nn.RMSNorm(hd, eps=spec.rms_norm_eps) if spec.qk_norm else None
        self.k_norm = nn.RMSNorm(hd, eps=spec.rms_norm_eps) if spec.qk_norm else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.nh, self.hd)
        k = self.k_proj(x).view(B, T, self.nkv, self.hd)
        v = self.v_proj(x).view(B, T, self.nkv, self.hd).transpose(1, 2)
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = _rope(q.transpose(1, 2), self.theta), _rope(k.transpose(1, 2), self.theta)  # (B, heads, T, hd)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.nkv != self.nh)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, self.nh * self.hd))


class MLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x)), inner width ``intermediate_size``."""

    def __init__(self, spec: DecoderSpec):
        super().__init__()
        h, inner, bias = spec.hidden_size, spec.intermediate_size, spec.mlp_bias
        self.gate_proj, self.up_proj = nn.Linear(h, inner, bias=bias), nn.Linear(h, inner, bias=bias)
        self.down_proj = nn.Linear(inner, h, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderBlock(nn.Module):
    """x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, spec: DecoderSpec):
        super().__init__()
        self.input_layernorm, self.self_attn = nn.RMSNorm(spec.hidden_size, eps=spec.rms_norm_eps), Attention(spec)
        self.post_attention_layernorm, self.mlp = nn.RMSNorm(spec.hidden_size, eps=spec.rms_norm_eps), MLP(spec)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class Decoder(nn.Module):
    """Token ids (B, T) -> logits (B, T, V). ``blocks`` is the list parallelism wraps (as ``GPT.blocks``)."""

    def __init__(self, spec: DecoderSpec):
        super().__init__()
        self.spec = spec
        self.embed_tokens = nn.Embedding(spec.vocab_size, spec.hidden_size)
        self.blocks = nn.ModuleList(DecoderBlock(spec) for _ in range(spec.num_hidden_layers))
        self.norm = nn.RMSNorm(spec.hidden_size, eps=spec.rms_norm_eps)
        self.lm_head = nn.Linear(spec.hidden_size, spec.vocab_size, bias=False)
        if spec.tie_word_embeddings:
            self.lm_head.weight = self.embed_tokens.weight

    @torch.no_grad()
    def init_weights(self) -> None:
        """HF's init: matrices and embedding normal(0, initializer_range), biases 0, norm weights 1. Works on
        sharded (DTensor) parameters, each rank filling its own shard."""
        std = self.spec.initializer_range
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=std)
                bias = getattr(m, "bias", None)
                if isinstance(bias, torch.Tensor):
                    nn.init.zeros_(bias)
            elif isinstance(m, nn.RMSNorm) and m.weight is not None:
                nn.init.ones_(m.weight)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.embed_tokens(idx)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.norm(x))
