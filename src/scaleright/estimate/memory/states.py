"""Model states (Rajbhandari et al. 2020, ZeRO, section 3.1): weights, gradients and optimizer states per GPU.

With mixed-precision Adam each parameter costs 2 B (16-bit weight) + 2 B (16-bit gradient) + K = 12 B (fp32 master
weight, momentum, variance): 16 B per parameter, the seed articles' "16 GB per billion parameters" for a full
fine-tune. ZeRO stage 1/2/3 (and FSDP, the same as stage 3) shard optimizer states / + gradients / + weights over
the data-parallel group. Tensor and pipeline parallelism divide the weights of each GPU's share of layers; expert
parallelism divides the routed experts.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scaleright.errors import InputError
from scaleright.workload.params import ParamCounts, count_params
from scaleright.workload.spec import TransformerSpec

__all__ = ["OPTIMIZERS", "optimizer_bytes_per_param", "model_state_bytes"]

# Optimizer state bytes per trainable parameter, beyond the 16-bit weight and gradient.
OPTIMIZERS = {
    # fp32 master + m + v (ZeRO paper's K = 12)
    "adamw": 12.0,
    "adam": 12.0,
    # fp32 master + 8-bit m and v with one fp32 absmax per 2048-element block (Dettmers et al. 2022, 8-bit
    # optimizers via block-wise quantization): 4 + 2 · (1 + 4/2048)
    "adam8bit": 4.0 + 2 * (1 + 4 / 2048),
    # fp32 master + fp32 momentum
    "sgd": 8.0,
}


def optimizer_bytes_per_param(optimizer: str) -> float:
    try:
        return OPTIMIZERS[optimizer.lower()]
    except KeyError:
        raise InputError(f"optimizer={optimizer!r} not allowed; allowed: {', '.join(OPTIMIZERS)}") from None



def _end_params(c: ParamCounts, pp: ArrayLike, *, tied: bool) -> NDArray[np.float64]:
    """Embedding / position / head / final-norm parameters on the fullest pipeline stage, before tp.

    pp = 1: all of them (a tied head shares the embedding). pp > 1: the larger of the first stage's (embedding,
    positions) and the last stage's (head, or a copy of the tied embedding, and the final norm).
    """
    head = c.embedding if tied else c.lm_head
    first = c.embedding + c.positions
    last = head + c.final_norm
    single = first + (0 if tied else c.lm_head) + c.final_norm
    return np.where(np.asarray(pp) > 1, np.maximum(first, last), single)


def _stage_params(
    c: ParamCounts, tp: ArrayLike, pp: ArrayLike, ep: ArrayLike, *, tied: bool
) -> tuple[float | NDArray[np.float64], float | NDArray[np.float64]]:
    """(dense, expert) parameters held by the fullest pipeline stage of one GPU, before ZeRO sharding.

    Layers are split as evenly as possible (ceil(L / pp) on the fullest stage). The first stage also holds the
    embedding (and learned positions), the last the output head and final norm (a tied head keeps a copy of the
    embedding there, as Megatron does). Matmul weights and the vocabulary are split over tp (vocab-parallel
    embedding); the few norm weights are counted as split too (a < 0.01 % error).
    """
    tp, pp, ep = (np.asarray(x, dtype=float) for x in (tp, pp, ep))
    layers_stage = np.ceil(c.layers / pp)
    moe_frac = c.moe_layers / c.layers if c.layers else 0.0
    dense_per_layer = c.attn_per_layer + c.norms_per_layer
    dense_layers_stage = layers_stage  # every layer has attention; FFN split by kind below
    dense_ffn = (1 - moe_frac) * c.dense_ffn_per_layer + moe_frac * (c.shared_ffn_per_layer + c.router_per_layer)
    blocks_dense = dense_layers_stage * (dense_per_layer + dense_ffn)
    blocks_expert = layers_stage * moe_frac * c.num_experts * c.expert_ffn
    ends = _end_params(c, pp, tied=tied)
    dense = (blocks_dense + ends) / tp
    expert = blocks_expert / (tp * ep)
    return dense, expert


def model_state_bytes(
    spec: TransformerSpec,
    *,
    tp: ArrayLike = 1,
    pp: ArrayLike = 1,
    dp: ArrayLike = 1,
    cp: ArrayLike = 1,
    ep: ArrayLike = 1,
    zero: ArrayLike = 0,
    precision: str = "bf16",
    optimizer: str = "adamw",
    counts: ParamCounts | None = None,
) -> tuple[float | NDArray[np.float64], float | NDArray[np.float64], float | NDArray[np.float64]]:
    """(weights, gradients, optimizer) bytes per GPU for full training with ZeRO sharding over dp · cp.

    16-bit training keeps 16-bit weights and gradients plus ``optimizer`` state with fp32 master weights; fp32
    training keeps fp32 weights and gradients and the optimizer's moments only (no master copy).
    """
    c = counts or count_params(spec)
    dense, expert = _stage_params(c, tp, pp, ep, tied=spec.tied_embeddings)
    zero = np.asarray(zero)
    shard_dense = np.asarray(dp, dtype=float) * np.asarray(cp, dtype=float)
    shard_expert = shard_dense / np.asarray(ep, dtype=float)
    w_b = 4.0 if precision == "fp32" else 2.0
    opt_b = optimizer_bytes_per_param(optimizer) - (4.0 if precision == "fp32" else 0.0)

    def sharded(per_param: float, stage: int) -> float | NDArray[np.float64]:
        return (
            dense * per_param / np.where(zero >= stage, shard_dense, 1.0)
            + expert * per_param / np.where(zero >= stage, shard_expert, 1.0)
        )

    return sharded(w_b, 3), sharded(w_b, 2), sharded(opt_b, 1)

