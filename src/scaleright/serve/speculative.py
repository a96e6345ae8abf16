"""Speculative decoding as an acceptance rate and a draft cost (Leviathan, Kalman & Matias 2023; Chen et al. 2023).

Each decode step, a draft proposes ``k`` tokens per sequence (``k`` draft forward passes, each costing
``draft_cost`` times the target's decode iteration of the same batch: Leviathan's ``c``), and the target verifies
them in one forward pass of ``k + 1`` rows per sequence. With every proposed token accepted independently with
probability ``α`` (the paper's i.i.d. assumption) a step yields on average

    E = (1 − α^(k+1)) / (1 − α)       tokens per sequence (k + 1 when α = 1).

The simulator stays token-exact in KV and counts: ``SpeculativeModel`` wraps an ``IterationModel`` so that each
of the replica's iterations still advances every decoding sequence by one token, and costs one verification step
over ``E`` (the mean field: token timing is the step's average, not its burst of 1..k+1 tokens). The verification
step reads the weights once for ``B·(k+1)`` rows and the KV cache once per sequence; its attention FLOPs are
``k + 1`` queries per sequence. An iteration fused with chunked prefill costs the prefill's marginal time on the
target (``t(P, B) − t(0, B)``) plus the speculative decode part.
"""

from __future__ import annotations

import math

from scaleright.errors import InputError
from scaleright.estimate.iteration import DecodeRun, IterationModel

__all__ = ["SpeculativeModel", "expected_tokens_per_step"]


def expected_tokens_per_step(acceptance: float, k: int) -> float:
    """Mean tokens one verification step yields per sequence: (1 − α^(k+1)) / (1 − α)."""
    if acceptance >= 1.0:
        return float(k + 1)
    return (1.0 - acceptance ** (k + 1)) / (1.0 - acceptance)


class SpeculativeModel:
    """An ``IterationModel`` seen through speculative decoding (module docstring). Built on a base model whose
    ``max_rows`` holds the verification rows (``max_num_batched_tokens + max_num_seqs · k``)."""

    def __init__(self, base: IterationModel, *, acceptance: float, k: int = 4, draft_cost: float = 0.05):
        if not (isinstance(acceptance, (int, float)) and math.isfinite(acceptance) and 0 <= acceptance <= 1):
            raise InputError(f"speculative acceptance rate={acceptance!r} must lie in [0, 1]")
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 16:
            raise InputError(f"speculative tokens k={k!r} must be an integer in 1..16")
        if not (isinstance(draft_cost, (int, float)) and math.isfinite(draft_cost) and 0 <= draft_cost <= 1):
            raise InputError(f"speculative draft cost={draft_cost!r} must lie in [0, 1] (draft step / target step)")
        self.base, self.acceptance, self.k, self.draft_cost = base, float(acceptance), k, float(draft_cost)
        self.tokens_per_step = expected_tokens_per_step(self.acceptance, k)
        # pass-throughs the simulator reads
        self.kv_bytes_per_token = base.kv_bytes_per_token
        self.kv_precision = base.kv_precision
        self.swap_s_per_token = base.swap_s_per_token
        self.max_rows = base.max_rows
        self.micro_batches = base.micro_batches

    def _decode(self, batch: int) -> tuple[float, float]:
        """(intercept, slope per context token) of one decode iteration's share of a speculative step."""
        b, k = self.base, self.k
        rows = batch * (k + 1)
        b.rows_ok(rows)
        verify = b._fixed[rows] + b._head[rows]
        draft = k * self.draft_cost * (b._fixed[batch] + b._head[batch])
        slope = max((k + 1) * b._attn_flop_s, b._kv_s) + k * self.draft_cost * b.decode_slope_s
        e = self.tokens_per_step
        return (verify + draft) / e, slope / e

    def decode_run(self, batch: int, context0: float) -> DecodeRun:
        a, s = self._decode(batch)
        return DecodeRun(a, s, batch, context0)

    def time_s(self, *, prefill_tokens: int = 0, decode_batch: int = 0, decode_context_tokens: float = 0.0,
               prefill_pairs: float = 0.0, prefill_kv_tokens: float = 0.0, prefill_seqs: int = 0) -> float:  # fmt: skip
        b = self.base
        t = 0.0
        if prefill_tokens:  # the prefill's marginal time on the target
            t = b.time_s(prefill_tokens=prefill_tokens, prefill_pairs=prefill_pairs,
                         prefill_kv_tokens=prefill_kv_tokens, prefill_seqs=prefill_seqs, decode_batch=decode_batch,
                         decode_context_tokens=decode_context_tokens)  # fmt: skip
            if decode_batch:
                t -= b.time_s(decode_batch=decode_batch, decode_context_tokens=decode_context_tokens)
        if decode_batch:
            a, s = self._decode(decode_batch)
            t += a + s * decode_context_tokens
        return t
