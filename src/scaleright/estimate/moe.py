"""Routing statistics of a mixture-of-experts layer: experts reached, the load of the busiest expert-parallel rank,
and the token-permutation traffic around the experts' grouped GEMMs. ``layer.layer_gemm_times`` times the expert
GEMMs with them, for training and serving alike.

Each token picks ``k`` distinct experts of ``E``; the counts below assume the router spreads tokens uniformly at
random (what an auxiliary load-balancing loss aims for). Real routers are skewed, so the imbalance here is a floor,
with no fitted factor in it.

- **Experts reached.** ``T`` tokens reach ``E·(1 − (1 − k/E)^T)`` experts on average: each expert is missed by one
  token with probability ``1 − k/E``. Only the experts reached have their weights read (small-batch decode).
- **The busiest expert-parallel rank.** With ``ep`` ranks each holding ``E/ep`` experts, the routed copies a rank
  receives from ``T`` tokens add up one hypergeometric draw per token (``k`` of ``E`` experts, ``E/ep`` of them
  local): mean ``μ = T·k/ep`` and variance ``σ² = T·k·(1/ep)·(1 − 1/ep)·(E − k)/(E − 1)``. The ranks' loads sum
  to ``T·k``, so in the normal limit they are ``μ + σ·√(r/(r − 1))·(Y_j − Ȳ)`` for ``r = ep`` independent standard
  normals ``Y_j`` (same variance, correlation ``−1/(r − 1)``), whose maximum has mean
  ``μ + σ·√(r/(r − 1))·e_r``, ``e_r`` the expected maximum of ``r`` standard normals
  (``expected_max_std_normal``). The layer waits for its busiest rank (the combine all-to-all is a barrier), so
  the expert GEMMs are timed at that rank's rows. The rank's experts reached are independent across ranks
  (their count is not constrained), so the busiest rank reads ``μ_t + σ_t·e_r`` experts, ``μ_t`` and ``σ_t²`` the
  mean and binomial variance of ``E/ep`` experts each reached with probability ``1 − (1 − k/E)^T``.
- **Permutation.** Grouping the rows by expert before the grouped GEMMs and restoring token order after them are
  memory-bound copies (Megatron-Core's ``permute`` / ``unpermute``; TensorRT-LLM's expand-input-rows and
  finalize-routing kernels; vLLM / SGLang's ``moe_align`` gather and ``moe_sum``): the dispatch reads each source
  token once and writes its routed copies, the combine reads the copies and writes the weighted sum, so a rank
  that routes ``t_src`` tokens and runs ``R`` routed rows moves at least ``2·h·(t_src + R)`` values
  (``permute_values``), the compulsory traffic of the two copies.
- **What each engine's kernels move** (``dispatch_bytes``, ``MOE_DISPATCH``, chosen by
  ``engines.EngineProfile.moe_dispatch``). Per MoE layer a rank moves ``h·(s·t_src + r·R)`` bytes: ``s`` bytes per
  value of each source token, ``r`` per routed row, for activations of ``a`` bytes (16-bit; 4 for fp32 models) and
  GEMM inputs of ``g`` bytes (the compute format incl. its block scales: fp8 1, NVFP4 0.5625, 16-bit ``a``). The
  GEMMs' own reads of their inputs and writes of their outputs are in ``layer.gemm_time``, not here.

  - ``permute`` (Megatron-Core ``moe_utils.permute`` / ``unpermute``, Transformer Engine ``moe_permute`` /
    ``moe_unpermute``; bf16 tokens, also in FP8 training, where the grouped GEMM quantises its input itself):
    the dispatch reads ``t_src`` rows and writes ``R``, the combine reads ``R`` and writes ``t_src``, all at
    ``a``: ``s = 2a``, ``r = 2a``. The default (training, and an engine profile that names none).
  - ``expand-finalize`` (TensorRT-LLM's CUTLASS fused MoE, ``cpp/tensorrt_llm/kernels/cutlass_kernels/
    moe_gemm/moe_kernels.cu``): ``expandInputRowsKernel`` reads each source row at ``a`` and writes its ``k``
    copies already quantised to the GEMM input (FP8, or NVFP4 values plus their per-16 block scales), at ``g``;
    ``finalizeMoeRoutingKernel`` reads the second GEMM's 16-bit rows and writes the weighted sum: ``s = 2a``,
    ``r = g + a``. (Not checked: TensorRT-LLM's PyTorch backend, the default from 1.0, may quantise the source
    tokens before the op, ``fp4_quantize`` / ``static_quantize_e4m3_per_tensor``, and expand the quantised rows,
    which adds ``2g`` per source value, a few per cent of the traffic at top-8.)
  - ``gather`` (vLLM's and SGLang's Triton ``fused_moe``: ``moe_align_block_size`` sorts only the row indices,
    ``fused_moe_kernel`` loads its A rows through ``sorted_token_ids``, so no permuted copy exists; the second
    GEMM writes ``k`` rows per token into ``intermediate_cache3`` and ``moe_sum`` reads them and writes the sum):
    ``r = a``, ``s = a``, plus, when the GEMM input is narrower than ``a`` (fp8 / int8 W8A8), the quantisation of
    the source tokens before the first GEMM (``scaled_fp8_quant`` / ``moe_kernel_quantize_input``: reads ``a``,
    writes ``g``): ``s = a + (a + g)``.
  - ``copy-rows-f32`` (llama.cpp's CUDA ``ggml_cuda_mul_mat_id`` for batches of more than one token, as written
    from 2024-01; not checked against a given release): ggml activations are f32; ``k_copy_src1_to_contiguous``
    gathers each expert's rows into a contiguous buffer (read and write ``R`` rows), the expert's ``mul_mat``
    writes a contiguous result that ``k_copy_dst_from_contiguous`` scatters back (read and write ``R``), and the
    graph's weighted sum of the ``k`` outputs reads ``R`` and writes ``t_src`` (a floor: ``build_moe_ffn``'s
    separate multiply by the router weights and its chain of adds move more): ``s = 4``, ``r = 5·4``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["MOE_DISPATCH", "touched_experts", "expected_max_std_normal", "busiest_rank_rows", "busiest_rank_experts",
           "dispatch_bytes", "permute_values"]

F32_BYTES = 4.0  # ggml's activations

# (bytes per value of each source token, bytes per value of each routed row) that the dispatch / combine kernels of
# a scheme move, for activations of ``a`` bytes and GEMM inputs of ``g`` bytes (module docstring)
MOE_DISPATCH: dict[str, Callable[[float, float], tuple[float, float]]] = {
    "permute": lambda a, g: (2.0 * a, 2.0 * a),
    "expand-finalize": lambda a, g: (2.0 * a, g + a),
    "gather": lambda a, g: (a + (a + g if g < a else 0.0), a),
    "copy-rows-f32": lambda a, g: (F32_BYTES, 5.0 * F32_BYTES),
}


def touched_experts(num_experts: float, top_k: float, tokens: ArrayLike) -> NDArray[np.float64]:
    """Expected number of the ``num_experts`` experts that ``tokens`` tokens routed to ``top_k`` experts each reach
    (the module docstring); at least ``top_k`` once a token is routed."""
    n_tok = np.asarray(tokens, dtype=float)
    return np.asarray(num_experts * (1.0 - (1.0 - top_k / num_experts) ** n_tok), dtype=float)


@functools.cache
def expected_max_std_normal(r: int) -> float:
    """``E[max(Y_1..Y_r)]`` for ``r`` independent standard normals: ``∫ x · r·φ(x)·Φ(x)^(r−1) dx`` by the
    trapezoidal rule on [−12, 12] (exact values: 0 for r = 1, 1/√π for r = 2, 3/(2√π) for r = 3)."""
    if r < 1:
        raise ValueError(f"r={r} must be a positive integer")
    x = np.linspace(-12.0, 12.0, 24001)
    phi = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    cdf = 0.5 * (1.0 + np.array([math.erf(v / math.sqrt(2.0)) for v in x]))
    f = x * r * phi * cdf ** (r - 1)
    return float(np.sum((f[1:] + f[:-1]) * 0.5 * np.diff(x)))


def busiest_rank_rows(tokens: ArrayLike, *, num_experts: float, top_k: float, ep: ArrayLike) -> NDArray[np.float64]:
    """Expected routed rows of the busiest of ``ep`` expert-parallel ranks for ``tokens`` tokens routed over the
    group (module docstring); ``tokens·top_k`` for ep = 1."""
    t = np.asarray(tokens, dtype=float)
    r = np.asarray(ep, dtype=float)
    mean = t * top_k / r
    hyper = (num_experts - top_k) / (num_experts - 1) if num_experts > 1 else 0.0
    sigma = np.sqrt(t * top_k * (1.0 / r) * (1.0 - 1.0 / r) * hyper)
    e_r = _e_max(r)
    spread = np.where(r > 1, np.sqrt(r / np.maximum(r - 1.0, 1.0)) * e_r, 0.0)
    return np.asarray(np.minimum(mean + sigma * spread, t * top_k), dtype=float)


def busiest_rank_experts(tokens: ArrayLike, *, num_experts: float, top_k: float,
                         ep: ArrayLike) -> NDArray[np.float64]:  # fmt: skip
    """Expected experts reached on the busiest of ``ep`` ranks holding ``num_experts / ep`` experts each, for
    ``tokens`` tokens routed over the group (module docstring); at most ``num_experts / ep``."""
    r = np.asarray(ep, dtype=float)
    local = num_experts / r
    q = touched_experts(num_experts, top_k, tokens) / num_experts  # each expert reached with probability q
    sigma = np.sqrt(local * q * (1.0 - q))
    return np.asarray(np.minimum(local * q + sigma * _e_max(r), local), dtype=float)


def permute_values(h: float, *, source_tokens: ArrayLike, routed_rows: ArrayLike) -> NDArray[np.float64]:
    """Values read plus written by the dispatch and combine copies of a rank that routes ``source_tokens`` tokens
    of width ``h`` and runs ``routed_rows`` routed rows: ``2·h·(source_tokens + routed_rows)``, the ``permute``
    scheme's bytes at one byte per value (``MOE_DISPATCH``, its one home)."""
    return dispatch_bytes(h, source_tokens=source_tokens, routed_rows=routed_rows, kernels="permute", act_bytes=1.0)


def dispatch_bytes(h: float, *, source_tokens: ArrayLike, routed_rows: ArrayLike, kernels: str = "permute",
                   act_bytes: float = 2.0, gemm_in_bytes: float | None = None) -> NDArray[np.float64]:
    """Bytes read plus written by the dispatch and combine kernels ``kernels`` (a key of ``MOE_DISPATCH``) of a rank
    that routes ``source_tokens`` tokens of width ``h`` and runs ``routed_rows`` routed rows, for activations of
    ``act_bytes`` and GEMM inputs of ``gemm_in_bytes`` (default ``act_bytes``) bytes per value (module docstring)."""
    if kernels not in MOE_DISPATCH:
        raise ValueError(f"kernels={kernels!r} not one of {', '.join(MOE_DISPATCH)}")
    per_src, per_row = MOE_DISPATCH[kernels](act_bytes, act_bytes if gemm_in_bytes is None else gemm_in_bytes)
    t = np.asarray(source_tokens, dtype=float)
    return np.asarray(h * (per_src * t + per_row * np.asarray(routed_rows, dtype=float)), dtype=float)


def _e_max(r: NDArray[np.float64]) -> NDArray[np.float64]:
    """``expected_max_std_normal`` over an array of integral rank counts."""
    values, inverse = np.unique(np.maximum(np.rint(np.atleast_1d(r)), 1).astype(int), return_inverse=True)
    table = np.array([expected_max_std_normal(int(v)) for v in values], dtype=float)
    return np.asarray(table[inverse].reshape(np.shape(r)), dtype=float)
