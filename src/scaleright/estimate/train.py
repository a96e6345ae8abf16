"""Training step time, throughput, MFU and scaling efficiency on N GPUs with a parallel layout.

Per micro-batch and pipeline stage, each GPU runs (Narayanan et al. 2021, "Efficient Large-Scale Language Model
Training on GPU Clusters Using Megatron-LM"; Korthikanti et al. 2022):
- GEMMs of its tensor-parallel shard, each timed by a roofline: max(2mkn / (peak · efficiency), bytes / HBM),
  with an efficiency (``layer.roofline``: the architecture's measured GEMM ceiling times the calibration's share)
  that falls for thin GEMMs (``Calibration.gemm_half_dim``); the backward pass runs two GEMMs of the same size per
  forward GEMM (data and weight gradients), LoRA/QLoRA only the first;
- the attention core as the framework runs it (``estimate.framework``): flash attention at ``attention_efficiency``
  of the 16-bit ceiling forward and ``attention_bwd_efficiency`` of that backward, the backward doing 2.5x the
  forward's FLOPs (FlashAttention-2, Dao 2023: five matmuls backward against two forward; FlashAttention-2 kernels
  on Hopper at FlashAttention-3's published fraction, ``FA2_ON_HOPPER``); or materialised s×s scores, two batched
  GEMMs plus the softmax / dropout bytes through HBM (Korthikanti et al. 2022);
- memory-bound elementwise work (norms, residuals, rotary, activation functions, fp8 casts) at HBM bandwidth;
- tensor-parallel all-reduces (two per layer forward, two backward; sequence parallelism replaces each with an
  all-gather and a reduce-scatter of the same volume) on the critical path, hidden in part only where the
  framework overlaps them (``tp_comm_overlap``; in backward behind the weight-gradient GEMMs, ``tp_bwd_overlap``)
  and never over PCIe without P2P; context parallelism as the framework's variant (ring exchanges of K/V overlapped
  with attention, an exposed all-gather, or Ulysses all-to-alls); per MoE layer, Megatron-Core's all-to-all
  dispatcher: the expert-parallel all-to-all (dispatch and combine) and, with expert tensor parallelism, the
  all-gather and reduce-scatter of the dispatched tokens over the ``etp`` group (the MoE layer's MLP has no ``tp``
  all-gather/reduce-scatter: under MoE parallel folding, Liu et al. 2025 arXiv:2504.14960, its GPUs are regrouped
  as ``etp · ep · edp``), overlapped with compute only where the framework does it (``ep_comm_overlap``);
- recomputation: selective adds the attention core's forward, full adds the whole forward of the layer.
A step is ``m + (p − 1)/v`` micro-batch slots of the slowest stage (1F1B / interleaved bubble; with ``m < p``
1F1B still runs ``m + p − 1`` slots; interleaving sends ``v`` times the activations; ZB-H1 fills the bubble with
weight-gradient work, Qi et al. 2023), plus the exposed
part of data-parallel synchronisation, the optimizer step (memory-bound), and a fixed overhead. Data parallelism:
ZeRO-0 all-reduces gradient buckets during the last backward (the last bucket is exposed); ZeRO-1/2 reduce-scatter
them during the last micro-batch's backward and all-gather the updated weights during the next forward, in the
order Megatron-Core's schedules allow on pipeline rank 0 (``zero1_exposed_s``: buckets queued on one stream as
backward fills them; with interleaving each chunk's whole reduce-scatter after its last backward); ZeRO-3/FSDP,
per micro-batch and layer, gathers a layer's weights (forward and backward) and reduce-scatters its gradients while the
neighbouring layer computes: exposed = first gather + last reduce-scatter + Σ_layers max(0, comm − compute).
Gradients are reduced (all-reduce, reduce-scatter) in fp32, 4 B per gradient, where the framework does so
(``Framework.grad_reduce_fp32``: torchtitan, Composer's DEFAULT mixed precision),
in the 16-bit compute dtype otherwise; weights are gathered in the 16-bit dtype (NF4 for QLoRA), the GEMM weights
in fp8 where an fp8 run casts them before the FSDP all-gather (``Framework.fp8_all_gather``).

Offload (``estimate.memory.offload``; Ren et al. 2021, ZeRO-Offload): with ``offload_optimizer`` each GPU sends
its 16-bit gradient partition to the host every micro-batch over its host link (PCIe at the catalog's generation
and the measured copy efficiency), overlapped with backward (the excess is exposed), the CPU runs the optimizer
step at the host's memory bandwidth shared by the host's GPUs, and the updated 16-bit partition comes back before
the next forward (no delayed update): the GPU's own optimizer step is gone. With ``offload_activations`` each
layer's saved activations go down during forward and come back during backward, behind that layer's compute; what
the copy exceeds the compute is on the critical path of every micro-batch. Both are the ``offload`` time.

Every collective is timed by ``scaleright.estimate.collectives`` (measured nccl-tests bus bandwidth and latency
per fabric, on the tiers of the ``catalog.systems.System`` its group spans, with the host's NICs shared by its GPUs
that communicate at once): TP all-reduce over ``tp`` adjacent ranks, DP/ZeRO over ``dp·cp`` ranks ``tp`` apart,
PP send/recv over ``pp`` ranks ``tp·cp·dp`` apart, CP ring hops over ``cp`` ranks ``tp`` apart; for the experts
(Megatron-Core's expert rank order, etp innermost, then ep, then edp): ETP over ``etp`` adjacent ranks, the EP
all-to-all over ``ep`` ranks ``etp`` apart, expert gradients over ``edp = tp·cp·dp/(ep·etp)`` ranks ``etp·ep``
apart.

Every function accepts numpy arrays for the layout axes and broadcasts (the planner evaluates millions at once).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scaleright.errors import InputError
from scaleright.estimate.calibration import DEFAULT_CALIBRATION, Calibration, arch_factors
from scaleright.estimate.collectives import CollectiveFits, collective_time_s
from scaleright.estimate.comm import Cluster, scaled_fits, system_of
from scaleright.estimate.framework import FA2_ON_HOPPER, Framework, framework_of
from scaleright.estimate.layer import (
    attn_out_width,
    elementwise_values,
    ffn_width,
    gemm_time,
    layer_gemm_times,
    peak_flops,
    roofline,
)
from scaleright.estimate.layout import Layout, divisors, stage_layers
from scaleright.estimate.memory import (
    GB,
    LoraConfig,
    MemoryProfile,
    Overheads,
    _recompute_code,
    activation_bytes_per_layer,
    lora_param_count,
    op_selective_recompute_fraction,
    optimizer_bytes_per_param,
    resolve_profile,
    training_memory_arrays,
)
from scaleright.estimate.memory.offload import host_link_bytes_per_s, host_memory_bytes_per_s_per_gpu
from scaleright.workload.flops import attention_flops_per_token, train_flops_per_token
from scaleright.workload.params import count_params
from scaleright.workload.precision import bytes_per_element
from scaleright.workload.spec import TransformerSpec

if TYPE_CHECKING:
    from scaleright.catalog.gpus import Accelerator
    from scaleright.catalog.systems import System

__all__ = ["TrainEstimate", "train_step_arrays", "estimate_train", "peak_flops", "TIME_KEYS"]

TIME_KEYS = ("compute", "recompute", "tp_comm", "cp_comm", "ep_comm", "pp_comm", "bubble", "dp_comm", "optimizer",
             "offload", "overhead")  # fmt: skip


def optimizer_step_bytes(optimizer: str, precision: str) -> float:
    """HBM bytes the optimizer step moves per parameter of the local shard: it reads and writes its states (fp32
    master and moments, ``OPTIMIZERS``), reads the gradient and writes the working weight. Mixed-precision
    AdamW: 2·12 + 2 + 2 = 28 B; fp32 AdamW (weights updated in place): 2·(4 + 8) + 4 = 28 B."""
    states = optimizer_bytes_per_param(optimizer)  # includes the 4 B fp32 master (in fp32 training: the weight)
    if precision == "fp32":
        return 2 * states + 4.0  # + read the fp32 gradient
    return 2 * states + 2 * 2.0  # + read the 16-bit gradient, write the 16-bit weight


class _Batch:
    """The collectives of one step model, requested by name and evaluated together: ``collectives.collective_time_s``
    once per kind over the distinct (bytes, size, stride) of all requests of that kind, only where the group has
    more than one rank and ``where`` holds (0 elsewhere). The planner's grids are mostly groups of one, each layout
    needs only its ZeRO stage's collectives, many layouts share one collective, and each call has a fixed cost."""

    def __init__(self, system: System, fits: CollectiveFits | None) -> None:
        self.system, self.fits = system, fits
        # name -> (kind, shape, selected flat positions, run of each, run inputs (bytes, size, stride))
        self.req: dict[str, tuple[str, tuple[int, ...], np.ndarray, np.ndarray, tuple[np.ndarray, ...]]] = {}

    def add(self, name: str, kind: str, nbytes: ArrayLike, *, size: ArrayLike, stride: ArrayLike,
            where: ArrayLike = True) -> None:  # fmt: skip
        b, n, st, w = np.broadcast_arrays(np.asarray(nbytes, dtype=float), np.asarray(size, dtype=float),
                                          np.asarray(stride, dtype=float), np.asarray(where, dtype=bool))  # fmt: skip
        pos = np.flatnonzero((n > 1) & w)
        bs, ns, ss = b.ravel()[pos], n.ravel()[pos], st.ravel()[pos]
        # runs of equal inputs (the planner's grid varies recompute, SP and virtual stages fastest) once each
        new = np.ones(pos.shape, dtype=bool)
        new[1:] = (bs[1:] != bs[:-1]) | (ns[1:] != ns[:-1]) | (ss[1:] != ss[:-1])
        self.req[name] = (kind, b.shape, pos, np.cumsum(new) - 1, (bs[new], ns[new], ss[new]))

    def run(self) -> dict[str, NDArray[np.float64]]:
        out: dict[str, NDArray[np.float64]] = {}
        for kind in dict.fromkeys(r[0] for r in self.req.values()):
            names = [k for k, r in self.req.items() if r[0] == kind]
            bs, ns, ss = (np.concatenate([self.req[k][4][i] for k in names]) for i in range(3))
            t = np.zeros(bs.shape)
            if bs.size:
                order = np.arange(bs.size)
                if bs.size > _SORT_FROM:
                    # equal inputs made adjacent: sorted by a 64-bit mix of the three (a collision only leaves two
                    # equal inputs apart, evaluated twice; the equality below compares the inputs themselves)
                    order = np.argsort(bs.view(np.uint64) ^ (ns.view(np.uint64) * _MIX) ^ (ss.view(np.uint64) * _MIX2))
                b_, n_, s_ = bs[order], ns[order], ss[order]
                new = np.ones(b_.shape, dtype=bool)
                new[1:] = (b_[1:] != b_[:-1]) | (n_[1:] != n_[:-1]) | (s_[1:] != s_[:-1])
                once = collective_time_s(kind, b_[new], system=self.system, size=n_[new], stride=s_[new],
                                         fits=self.fits)  # fmt: skip
                t[order] = once[np.cumsum(new) - 1]
            at = 0
            for k in names:
                _, shape, pos, run, inputs = self.req[k]
                flat = np.zeros(int(np.prod(shape)))
                flat[pos] = t[at:at + inputs[0].size][run]
                out[k] = flat.reshape(shape)
                at += inputs[0].size
        return out


_MIX, _MIX2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F)  # odd 64-bit mixing constants
_SORT_FROM = 2048  # distinct runs from which ``_Batch`` sorts them to evaluate each distinct input once


def streamed_exposed_s(comm_s: ArrayLike, bucket_s: ArrayLike, window_s: ArrayLike,
                       n_buckets: ArrayLike) -> NDArray[np.float64]:
    """Exposed time of ``n_buckets`` equal buckets (``comm_s`` in all, ``bucket_s`` each) that one communication
    stream runs one after another while ``window_s`` of compute produces them, bucket k ready after k/n of it
    (gradient buckets in backward), or consumes them, bucket k needed after (k − 1)/n of it (a weight gather
    before forward; the same queue run backwards in time). The stream ends max over k of ready_k + what is
    queued from k on after the compute: max(bucket, comm − window · (n − 1)/n), between 0 and ``comm_s``."""
    comm, n = np.asarray(comm_s, dtype=float), np.maximum(np.asarray(n_buckets, dtype=float), 1.0)
    exposed = np.maximum(bucket_s, comm - np.asarray(window_s, dtype=float) * (n - 1.0) / n)
    return np.asarray(np.clip(exposed, 0.0, comm), dtype=float)


def zero1_exposed_s(rs_s: ArrayLike, ag_s: ArrayLike, rs_bucket_s: ArrayLike, ag_bucket_s: ArrayLike, *,
                    n_buckets: ArrayLike, chunks: ArrayLike, rounds: ArrayLike, bwd_s: ArrayLike,
                    fwd_s: ArrayLike) -> NDArray[np.float64]:
    """Exposed data-parallel time of Megatron-Core's distributed optimizer (ZeRO-1) with ``overlap_grad_reduce``
    and ``overlap_param_gather``, on pipeline rank 0 (its last backward ends the step, its first forward starts it;
    the other ranks reduce in the pipeline bubble).

    ``rs_s``/``ag_s``: the rank's whole gradient reduce-scatter / weight all-gather; ``rs_bucket_s``/``ag_bucket_s``
    one bucket's; ``n_buckets`` per model chunk; ``chunks`` the rank's model chunks (v with interleaving, else 1);
    ``rounds`` the micro-batches each chunk runs before the next (pp with interleaving); ``bwd_s``/``fwd_s`` one
    micro-batch's backward (with recomputation) / forward of all the rank's layers.

    Gradient sync runs only in the last micro-batch (``no_sync`` before: ``forward_backward_no_pipelining``; in
    1F1B, rank 0 enables it for its last backward, ``forward_backward_pipelining_without_interleaving``). One
    chunk: buckets are launched as backward fills them (``_ParamAndGradBuffer`` bucket hooks), so
    ``streamed_exposed_s`` over one micro-batch's backward. Interleaved (``align_grad_reduce``, Megatron-LM's
    default: ``config.grad_sync_func = start_grad_sync`` per chunk): chunk j's whole reduce-scatter starts after
    its last micro-batch's backward, which j·rounds chunk-backwards of the lower chunks still follow; one stream
    runs them in turn, so the stream ends R_c + (v − 1) · max(0, R_c − rounds · b_c) after the backward (R_c =
    rs/v, b_c = bwd/v; the lowest chunk's reduce-scatter overlaps nothing). Weights: the first chunk's buckets
    are gathered before its layers need them (the forward pre-hooks wait on each bucket; with ``align_param_gather``,
    assumed here for interleaving, ``param_sync_func`` starts chunks 0 and 1 before the schedule) and each later
    chunk's during the ``rounds`` forwards of the chunk before it (``forward_step_helper``):
    ``streamed_exposed_s`` over the first chunk's forward plus (v − 1) · max(0, A_c − rounds · f_c)."""
    v = np.maximum(np.asarray(chunks, dtype=float), 1.0)
    rs, ag = np.asarray(rs_s, dtype=float), np.asarray(ag_s, dtype=float)
    b_c, f_c = np.asarray(bwd_s, dtype=float) / v, np.asarray(fwd_s, dtype=float) / v
    rs_c, ag_c = rs / v, ag / v
    rs_rounds = rs_c + (v - 1.0) * np.maximum(rs_c - rounds * b_c, 0.0)
    rs_exposed = np.where(v > 1, rs_rounds, streamed_exposed_s(rs, rs_bucket_s, b_c, n_buckets))
    ag_exposed = (streamed_exposed_s(ag_c, np.minimum(ag_bucket_s, ag_c), f_c, n_buckets)
                  + (v - 1.0) * np.maximum(ag_c - rounds * f_c, 0.0))  # fmt: skip
    return np.asarray(rs_exposed + ag_exposed, dtype=float)


def train_step_arrays(
    spec: TransformerSpec,
    *,
    gpu: Accelerator,
    system: System | None = None,
    cluster: Cluster | None = None,
    seq_len: float | NDArray[np.float64],
    global_batch: ArrayLike,
    tp: ArrayLike = 1,
    pp: ArrayLike = 1,
    dp: ArrayLike = 1,
    cp: ArrayLike = 1,
    ep: ArrayLike = 1,
    etp: ArrayLike | None = None,
    zero: ArrayLike = 0,
    dp_shard: ArrayLike | None = None,
    micro_batch: ArrayLike = 1,
    recompute: str | ArrayLike = "none",
    sequence_parallel: ArrayLike = False,
    virtual_stages: ArrayLike = 1,
    precision: str = "bf16",
    task: str = "pretrain",
    lora: LoraConfig | None = None,
    optimizer: str = "adamw",
    cal: Calibration = DEFAULT_CALIBRATION,
    causal: bool = True,
    framework: Framework | str | None = None,
    tp_comm_overlap: bool | None = None,
    ep_comm_overlap: bool = False,
    offload_optimizer: ArrayLike = False,
    offload_activations: ArrayLike = False,
    pipeline_split_embedding_loss: ArrayLike = False,
) -> dict[str, np.ndarray]:
    """Time breakdown (s per optimizer step), throughput and FLOP rates, broadcast over the layout arrays.

    ``system`` is the network (``catalog.systems.System``; default: ``system_of(gpu, cluster=cluster)``).
    ``causal`` is the FLOP convention of the reported TFLOP/s (flash kernels run causal attention; materialised
    attention computes the whole s×s square). ``framework`` (a ``Framework`` or preset name; default ``fsdp2``)
    says what the framework overlaps and how it runs attention, context parallelism and the pipeline
    (``scaleright.estimate.framework``); ``tp_comm_overlap`` overrides its field. With TP-comm overlap,
    ``cal.tp_overlap`` of the TP time is hidden, otherwise none; the overlap needs peer-to-peer copies
    (userbuffers / symmetric memory), so a TP group on PCIe without P2P (``pcie-host``) never hides any. ``etp`` is
    the expert-tensor-parallel size (None: ``tp``); ``ep_comm_overlap`` whether the framework overlaps the expert
    all-to-all with another micro-batch's compute (Megatron-Core ``--overlap-moe-expert-parallel-comm``,
    DeepSeek-V3's DualPipe; off by default): then a layer exposes only what its all-to-all exceeds its compute.
    ``dp_shard`` is ZeRO-3's shard group (None: ``dp·cp``; smaller: HSDP, each layer's gather and reduce-scatter
    over ``dp_shard`` ranks ``tp`` apart and an all-reduce of the reduced shard across the ``dp·cp/dp_shard``
    replicas, ``tp·dp_shard`` apart, FSDP2's hybrid sharding, every micro-batch). ``offload_optimizer`` /
    ``offload_activations``: ZeRO-Offload and activation offload (module docstring); ``InputError`` when the GPU has
    no host link in the catalog. ``pipeline_split_embedding_loss`` (Megatron-Core's account_for_embedding/loss in
    pipeline split, ``Layout``): ``ceil((L + 2) / pp)`` layer slots a stage, the first and last stage one
    transformer layer fewer; the busiest stage is then a middle one (pp > 2) or the last (its head in place of a
    layer); the embedding lookup is not costed (a gather, no GEMM)."""
    fw = framework_of(framework).with_overrides(tp_comm_overlap=tp_comm_overlap)
    system = system_of(gpu, system=system, cluster=cluster)
    fits = scaled_fits(cal)
    c = count_params(spec)
    tp, pp, dp, cp, ep, b, v = (np.asarray(x, dtype=float) for x in (tp, pp, dp, cp, ep, micro_batch, virtual_stages))
    etp = tp if etp is None else np.asarray(etp, dtype=float)
    edp = tp * cp * dp / (ep * etp)  # expert data parallel (MoE parallel folding)
    zero = np.asarray(zero)
    sp = np.asarray(sequence_parallel, dtype=bool)
    rc = _recompute_code(recompute)
    s = float(seq_len) if np.ndim(seq_len) == 0 else np.asarray(seq_len, dtype=float)
    gb = np.asarray(global_batch, dtype=float)
    n_micro = np.maximum(np.floor(gb / (dp * b)), 1.0)
    lowp = precision in ("fp8", "fp4")
    rl = roofline(gpu, precision, cal)  # peaks and efficiencies (the attention core runs 16-bit in fp8/fp4)
    peak = rl.peak
    hbm = rl.hbm
    bpv = 4.0 if precision == "fp32" else 2.0  # activation / weight bytes of 16-bit (or fp32) training
    g_bytes = {"fp8": 1.0, "fp4": 0.5}.get(precision, bpv)
    gemm = rl.gemm(g_bytes)
    gemm16 = roofline(gpu, "bf16" if gpu.dense_tflops.get("bf16") else "fp16", cal).gemm(bpv) if lowp else gemm
    frozen = task in ("lora", "qlora")
    bwd_gemm = 1.0 if frozen else 2.0  # frozen weights: data gradients only

    t = s * b / cp  # tokens per micro-batch on this GPU
    h = spec.hidden
    # transformer layers on the busiest stage, and on the last stage (which also runs the head and loss)
    layers_stage, layers_last = stage_layers(spec.layers, pp, pipeline_split_embedding_loss)
    # ---- every collective of the step, evaluated together (one ``collective_time_s`` call per kind) ----------
    # dense gradients over the dp·cp group (ranks tp apart); expert gradients over the expert-data-parallel group
    # (edp ranks, etp·ep apart); every GPU of a host communicates at once, so they share the host's NICs
    dp_group = dp * cp
    dense_local = (c.total - c.routed_experts_total) / (tp * pp)
    expert_local = c.routed_experts_total / (etp * pp * ep)
    # bytes of the local weights that ZeRO-3/FSDP gathers (for LoRA/QLoRA: the frozen base, NF4 for QLoRA)
    w_bytes = bytes_per_element("nf4") if task == "qlora" else bpv
    gather_dense, gather_expert = dense_local * w_bytes, expert_local * w_bytes
    if fw.fp8_all_gather and precision == "fp8" and task != "qlora":
        # the blocks' GEMM weights gathered as fp8 (1 B), the embeddings, norms and head in 16 bits
        fp8_dense = (c.blocks - c.layers * c.norms_per_layer - c.routed_experts_total) / (tp * pp)
        gather_dense = gather_dense - fp8_dense * (w_bytes - 1.0)
        gather_expert = expert_local * 1.0
    if frozen:
        trainable = lora_param_count(spec, lora or LoraConfig()) / (tp * pp)
        dense_local, expert_local = trainable, 0.0 * expert_local
    # gradients are reduced in fp32 where the framework says so (``Framework.grad_reduce_fp32``), in the 16-bit
    # compute dtype otherwise; ZeRO-1/2 gathers the updated weights in the 16-bit dtype either way
    rb = 4.0 if fw.grad_reduce_fp32 else bpv
    grad_bytes, weight_bytes = rb * dense_local, bpv * dense_local
    grad_bytes_e, weight_bytes_e = rb * expert_local, bpv * expert_local
    shard = dp_group if dp_shard is None else np.asarray(dp_shard, dtype=float)  # ZeRO-3 shard group (HSDP)
    z0, z12, z3 = zero == 0, (zero == 1) | (zero == 2), zero >= 3
    bucket = 25 * 2**20  # PyTorch DDP's default bucket_cap_mb=25 (MiB): the last bucket cannot overlap
    last = np.minimum(bucket, grad_bytes)
    # Megatron-Core's distributed optimizer: buckets of max(40 M, 1 M · dp) parameters (DistributedDataParallel,
    # bucket_size with overlap_grad_reduce); a pipeline rank's v model chunks each have their own buffer
    chunks = np.where((pp > 1) & (fw.pipeline_schedule != "1f1b"), np.maximum(v, 1.0), 1.0)
    chunk_params = dense_local / chunks
    z12_bucket = np.minimum(np.maximum(40e6, 1e6 * dp * cp), chunk_params)
    n_buckets = np.maximum(np.ceil(chunk_params / np.maximum(z12_bucket, 1.0)), 1.0)
    kv_width = spec.kv_dim if not spec.mla else spec.heads * spec.head_dim  # K (or V) values per token
    kv_chunk = 2 * t * kv_width / tp * bpv
    routed = t / tp * spec.moe.top_k * h * bpv if spec.moe else 0.0
    col = _Batch(system, fits)
    if spec.moe:
        # each GPU dispatches its sequence-parallel share of the tokens (Megatron requires sequence parallelism
        # for MoE with tp > 1), top_k copies of each, and receives as many back in the combine; the all-to-all
        # buffer S of nccl-tests is n times what one GPU sends to each peer (S/n each), i.e. what it sends in all.
        # The EP group is ep ranks etp apart (Megatron-Core's expert order: etp, ep, edp), on the tiers it spans.
        col.add("a2a", "all_to_all", routed, size=ep, stride=etp)
        # expert tensor parallelism: the ETP group all-gathers the dispatched tokens before the experts and
        # reduce-scatters their outputs (the gathered buffer: etp times what one GPU received)
        col.add("etp_ag", "all_gather", routed * etp, size=etp, stride=1)
        col.add("etp_rs", "reduce_scatter", routed * etp, size=etp, stride=1)
    col.add("tp_ar", "all_reduce", t * h * bpv, size=tp, stride=1)
    if fw.cp_variant == "ring":
        col.add("cp_ring", "p2p", kv_chunk, size=cp, stride=tp)
    elif fw.cp_variant == "allgather":
        col.add("cp_ag", "all_gather", kv_chunk * cp, size=cp, stride=tp)
        col.add("cp_rs", "reduce_scatter", kv_chunk * cp, size=cp, stride=tp)
    else:
        qkv = t * (spec.q_dim + 2 * kv_width) / tp * bpv
        col.add("cp_qkv", "all_to_all", qkv, size=cp, stride=tp)
        col.add("cp_out", "all_to_all", t * attn_out_width(spec) / tp * bpv, size=cp, stride=tp)
    col.add("pp_p2p", "p2p", t * h * bpv, size=pp, stride=tp * cp * dp)

    def dp_add(name: str, kind: str, dense: ArrayLike, expert: ArrayLike, where: ArrayLike,
               size: ArrayLike = dp_group) -> None:  # fmt: skip
        """One ``kind`` collective of the dense bytes over the dp·cp group (or ``size`` ranks of it) plus one of the
        expert bytes over the expert-data-parallel group, for the layouts ``where`` says."""
        col.add(name, kind, dense, size=size, stride=tp, where=where)
        if spec.moe:
            sel = np.asarray(where, dtype=bool) & (np.asarray(expert) > 0)  # LoRA: no expert gradients
            col.add(name + "_e", kind, expert, size=edp, stride=etp * ep, where=sel)

    dp_add("ar_dp", "all_reduce", grad_bytes, grad_bytes_e, z0)
    col.add("last_bucket", "all_reduce", last, size=dp_group, stride=tp, where=z0)
    dp_add("rs_dp", "reduce_scatter", grad_bytes, grad_bytes_e, z12)
    dp_add("ag_dp", "all_gather", weight_bytes, weight_bytes_e, z12)
    col.add("rs_last", "reduce_scatter", rb * z12_bucket, size=dp_group, stride=tp, where=z12)
    col.add("ag_first", "all_gather", bpv * z12_bucket, size=dp_group, stride=tp, where=z12)
    dp_add("ag_layer", "all_gather", gather_dense / layers_stage, gather_expert / layers_stage, z3, size=shard)
    dp_add("rs_layer", "reduce_scatter", grad_bytes / layers_stage, grad_bytes_e / layers_stage, z3, size=shard)
    col.add("hsdp_ar", "all_reduce", grad_bytes / layers_stage / shard, size=dp_group / shard, stride=tp * shard,
            where=z3 & (shard < dp_group))
    ct = col.run()

    def dp_time(name: str) -> NDArray[np.float64]:
        return ct[name] + ct[name + "_e"] if spec.moe else ct[name]

    # ---- GEMMs of one layer (forward), MoE expert all-to-all -----------------------------------------------------
    attn_fwd, ffn_fwd = layer_gemm_times(spec, c, tokens=t, tp=tp, ep=ep, etp=etp, gemm=gemm)
    o_in = attn_out_width(spec)
    f_eff = ffn_width(spec, c)
    ep_comm_fwd: float | NDArray[np.float64] = 0.0
    a2a_fwd: float | NDArray[np.float64] = 0.0
    moe_frac = c.moe_layers / c.layers if spec.moe else 0.0
    if spec.moe:  # the expert all-to-all and the ETP gather / reduce-scatter (above)
        a2a_fwd = moe_frac * 2 * ct["a2a"]  # dispatch + combine, per average layer
        ep_comm_fwd = a2a_fwd + moe_frac * (ct["etp_ag"] + ct["etp_rs"])
    gemm_fwd = attn_fwd + ffn_fwd
    if frozen and lora is not None:
        r = lora.rank
        n_targets = len(lora.targets)
        gemm_fwd = gemm_fwd + 2 * gemm_time(t, h, r, count=n_targets, **gemm)
    # ---- attention core ----------------------------------------------------------------------------------------
    if fw.attention == "flash":
        # flash kernels run causal attention whatever FLOP convention the caller reports in (``causal`` below)
        attn_flops_tok_layer = attention_flops_per_token(spec, s, causal=True) / spec.layers
        fa_fwd, fa_bwd = FA2_ON_HOPPER if fw.flash_version == 2 and rl.arch.architecture == "hopper" else (1.0, 1.0)
        core_fwd = t * attn_flops_tok_layer / tp / (rl.attention * fa_fwd)
        core_bwd = 2.5 * t * attn_flops_tok_layer / tp / (rl.attention_bwd * fa_bwd)
    else:
        # materialised (Korthikanti et al. 2022, 4.1): per head, QK^T (t x d)·(d x s) and P·V (t x s)·(s x d) as
        # batched 16-bit GEMMs over the full s×s square (the causal mask is applied, not skipped); between them the
        # fused scale-mask-softmax reads the scores and writes the probabilities (2 + 2 B per score) and dropout
        # reads them and writes its 1 B mask and 2 B output (5 B). Backward: four GEMMs of the same shapes (dP, dV,
        # dQ, dK), dropout backward (read dP and the mask, write: 5 B) and softmax backward (read the gradient and
        # the probabilities, write: 6 B). The GEMMs' own operand traffic is in their roofline.
        heads = spec.heads / tp
        dq = spec.mla.qk_nope_head_dim + spec.mla.qk_rope_head_dim if spec.mla else spec.head_dim
        dv = spec.mla.v_head_dim if spec.mla else spec.head_dim
        gemms = gemm_time(t, dq, s, count=heads, **gemm16) + gemm_time(t, s, dv, count=heads, **gemm16)
        scores = t * s * heads  # score elements per layer and micro-batch on this GPU
        core_fwd = gemms + scores * 9.0 / hbm
        core_bwd = 2 * gemms + scores * 11.0 / hbm
    # ---- memory-bound elementwise work -------------------------------------------------------------------------
    repl_vals, split_vals = elementwise_values(spec, c)  # norms/residuals replicated over tp unless SP
    elem_vals = np.where(sp, (repl_vals + split_vals) / tp, repl_vals + split_vals / tp)
    elem_fwd = cal.elementwise_factor * t * elem_vals * bpv / hbm
    if lowp:  # casts of GEMM inputs to fp8/fp4 (read 2 B, write 1 B) and amax reductions
        cast_vals = (h + o_in / tp + h + f_eff / tp) * 3.0
        elem_fwd = elem_fwd + t * cast_vals / hbm
    if task == "qlora":  # dequantise NF4 block weights to bf16 in forward and backward: read NF4, write 2 B
        layer_w = (c.blocks / c.layers) / tp
        elem_fwd = elem_fwd + layer_w * (bytes_per_element("nf4") + 2.0) / hbm
    # ---- tensor-parallel communication ------------------------------------------------------------------------
    ar = ct["tp_ar"]
    host_staged = system.tiers[0].kind == "pcie-host"  # no P2P: nothing for the framework to overlap with
    hidden = cal.tp_overlap if fw.tp_comm_overlap and not host_staged else 0.0
    tp_fwd = (2 - moe_frac) * ar * (1 - hidden)  # attention and dense MLP; a MoE layer's MLP is in ep_comm
    tp_bwd = tp_fwd
    if fw.tp_bwd_overlap and not host_staged and not frozen:
        # each backward collective (input gradient of QKV and of FC1) behind that linear's weight-gradient GEMM
        kv_w = np.maximum(spec.kv_dim / tp, spec.head_dim)
        wgrad_qkv = gemm_time(t, h, spec.q_dim / tp + 2 * kv_w, **gemm)
        wgrad_fc1 = gemm_time(t, h, (2 if spec.gated_mlp else 1) * ffn_width(spec, c) / tp, **gemm)
        exposed = np.maximum(ar - wgrad_qkv, 0.0) + np.maximum(ar - wgrad_fc1, 0.0)
        tp_bwd = np.minimum(tp_bwd, exposed)
    # ---- context parallelism (``Framework.cp_variant``) ----------------------------------------------------------
    if fw.cp_variant == "ring":  # K/V chunks pass cp-1 times, overlapped with the attention of the previous chunk
        ring = (cp - 1) * ct["cp_ring"]
        cp_fwd = np.maximum(ring - core_fwd, 0.0)
        cp_bwd = np.maximum(2 * ring - core_bwd, 0.0)
    elif fw.cp_variant == "allgather":  # all-gather K/V before attention, reduce-scatter dK/dV after: exposed
        cp_fwd, cp_bwd = ct["cp_ag"], ct["cp_rs"]
    else:  # ulysses: all-to-all q/k/v to head-sharded full sequences and the output back; backward the same
        cp_fwd = ct["cp_qkv"] + ct["cp_out"]
        cp_bwd = cp_fwd
    # ---- one layer, one micro-batch ----------------------------------------------------------------------------
    layer_fwd = gemm_fwd + core_fwd + elem_fwd
    layer_bwd = bwd_gemm * gemm_fwd + core_bwd + 2 * elem_fwd
    recomp = np.where(rc == 2, layer_fwd + tp_fwd + cp_fwd + ep_comm_fwd, np.where(rc == 1, core_fwd, 0.0))
    # op-selective (torchtitan per-op SAC): the matmuls whose outputs it does not save, and the elementwise work
    recomp = np.where(rc == 3, op_selective_recompute_fraction(spec) * gemm_fwd + elem_fwd, recomp)
    # output head (last stage) and its loss: a (t x h)·(h x V/tp) GEMM plus the fp32 softmax traffic
    head = gemm_time(t, h, spec.vocab / tp, **gemm) * (1 + bwd_gemm) + 3 * t * spec.vocab / tp * 4.0 / hbm
    # the last stage: its layers and the head; a stage with more layers (the split counting the loss as a slot)
    # is busiest unless the head outlasts the layer(s) it replaces
    head = np.maximum(head - (layers_stage - layers_last) * (layer_fwd + layer_bwd + recomp), 0.0)
    compute_mb = layers_stage * (layer_fwd + layer_bwd) + head
    recompute_mb = layers_stage * recomp
    tp_mb = layers_stage * (tp_fwd + tp_bwd)
    cp_mb = layers_stage * (cp_fwd + cp_bwd)
    if ep_comm_overlap:  # the all-to-all of one micro-batch runs under another's compute of the same layer
        ep_exposed_fwd = ep_comm_fwd - a2a_fwd + np.maximum(a2a_fwd - layer_fwd, 0.0)
        ep_exposed_bwd = ep_comm_fwd - a2a_fwd + np.maximum(a2a_fwd - layer_bwd, 0.0)
        ep_mb = layers_stage * (ep_exposed_fwd + ep_exposed_bwd)
    else:
        ep_mb = layers_stage * 2 * ep_comm_fwd
    # ---- activation offload: each layer's saved activations down in forward, back in backward, behind its compute --
    off_a = np.asarray(offload_activations, dtype=bool)
    off_o = np.asarray(offload_optimizer, dtype=bool)
    link = 0.0
    if off_a.any() or off_o.any():
        link_or_none = host_link_bytes_per_s(gpu)
        if link_or_none is None:
            raise InputError(f"offload on {gpu.id}: the catalog gives it no host link (pcie_gen), so the host "
                             "traffic cannot be costed; allowed: offload_optimizer/offload_activations false")
        link = link_or_none
    act_mb: float | NDArray[np.float64] = 0.0
    if off_a.any():  # evaluated on the offloading layouts only
        shape = np.broadcast(off_a, layers_stage, layer_fwd, layer_bwd, recomp, b, tp, cp, sp, rc).shape
        on = np.flatnonzero(np.broadcast_to(off_a, shape))

        def at(x: ArrayLike) -> NDArray[np.float64]:
            return np.broadcast_to(np.asarray(x, dtype=float), shape).ravel()[on]

        saved = activation_bytes_per_layer(spec, seq_len=at(s), micro_batch=at(b), tp=at(tp), cp=at(cp),
                                           sequence_parallel=at(sp) > 0, recompute=at(rc).astype(int),
                                           flash_attention=fw.attention == "flash",
                                           bytes_per_value=bpv) / link  # fmt: skip
        act = np.zeros(int(np.prod(shape)))
        act[on] = at(layers_stage) * (np.maximum(saved - at(layer_fwd), 0.0)
                                      + np.maximum(saved - at(layer_bwd + recomp), 0.0))  # fmt: skip
        act_mb = act.reshape(shape)
    # ---- pipeline ------------------------------------------------------------------------------------------------
    p2p = ct["pp_p2p"]
    if fw.pipeline_schedule == "1f1b":  # one chunk per rank (estimate_train refuses virtual_stages > 1)
        v = np.ones_like(v)
    # interleaving sends each micro-batch's activations across v chunk boundaries per stage, not one (Narayanan et
    # al. 2021, sec. 2.2.2: "the amount of communication also increases by v")
    pp_mb = np.where(pp > 1, 2 * v * p2p, 0.0)
    if fw.pp_p2p_overlap:  # the transfers run under the neighbouring chunks' compute: only their excess shows
        pp_mb = np.maximum(pp_mb - (compute_mb + recompute_mb), 0.0)
    slot = compute_mb + recompute_mb + tp_mb + cp_mb + ep_mb + pp_mb + act_mb
    if fw.pipeline_schedule == "zero-bubble":
        # ZB-H1 (Qi et al. 2023): weight-gradient GEMMs (T_W) fill the bubble, (p-1)(T_F + T_B - T_W) per chunk
        w_mb = 0.0 if frozen else layers_stage * gemm_fwd
        bubble = np.where(pp > 1, (pp - 1) / v * np.maximum(slot - 2 * w_mb, 0.0), 0.0)
    else:  # 1F1B / interleaved 1F1B (Narayanan et al. 2021): (p-1)/v slots
        bubble = np.where(pp > 1, (pp - 1) / v * slot, 0.0)
    # ---- data-parallel synchronisation -------------------------------------------------------------------------
    # dense gradients over the dp·cp group (ranks tp apart); expert gradients over the expert-data-parallel group
    # (edp ranks, etp·ep apart); every GPU of a host communicates at once, so they share the host's NICs
    bwd_window = layers_stage * layer_bwd
    fwd_window = layers_stage * layer_fwd
    # ZeRO-0 (DDP): gradient buckets all-reduced as backward produces them, overlapped with the rest of backward
    ar_dp, last_bucket = dp_time("ar_dp"), ct["last_bucket"]
    exposed_z012 = np.maximum(ar_dp - bwd_window, 0.0) + last_bucket if fw.dp_bucket_overlap else ar_dp
    # ZeRO-1/2 (Megatron distributed optimizer, --overlap-grad-reduce --overlap-param-gather): the dependencies of
    # pipeline rank 0, whose last backward ends the step and whose first forward starts it (``zero1_exposed_s``)
    rs_dp, ag_dp, rs_last, ag_first = dp_time("rs_dp"), dp_time("ag_dp"), ct["rs_last"], ct["ag_first"]
    exposed_z12 = zero1_exposed_s(rs_dp, ag_dp, rs_last, ag_first, n_buckets=n_buckets, chunks=chunks,
                                  rounds=np.minimum(pp, n_micro),
                                  bwd_s=layers_stage * (layer_bwd + recomp), fwd_s=fwd_window)  # fmt: skip
    if not fw.dp_bucket_overlap:
        exposed_z12 = rs_dp + ag_dp
    # ZeRO-3 / FSDP, per micro-batch and layer: a layer's weights are all-gathered (forward, and again in
    # backward) while the neighbouring layer computes (prefetch), and its gradients reduce-scattered while the
    # next layer back computes. Each layer exposes what its communication exceeds its neighbour's compute; the
    # first gather and the last reduce-scatter overlap nothing (PyTorch FSDP forward/backward prefetch).
    # FSDP2 reduce-scatters every micro-batch's gradients (no no_sync without unsharded gradient memory); HSDP then
    # all-reduces the reduced shard across the replicas (dense models only)
    ag_layer, rs_layer = dp_time("ag_layer"), dp_time("rs_layer") + ct["hsdp_ar"]
    bwd_layer = layer_bwd + recomp
    exposed_z3 = n_micro * (
        ag_layer + rs_layer
        + (layers_stage - 1)
        * (np.maximum(ag_layer - layer_fwd, 0.0) + np.maximum(ag_layer + rs_layer - bwd_layer, 0.0))
    )  # fmt: skip
    if not fw.fsdp_prefetch:  # every gather and reduce-scatter on the critical path
        exposed_z3 = n_micro * layers_stage * (2 * ag_layer + rs_layer)
    dp_comm = np.where(zero >= 3, exposed_z3, np.where(zero >= 1, exposed_z12, exposed_z012))
    dp_comm = np.where((dp_group > 1) | (edp > 1), dp_comm, 0.0)
    # ---- optimizer -----------------------------------------------------------------------------------------------
    opt_params = np.where(zero >= 1, dense_local / shard + expert_local / edp, dense_local + expert_local)
    step_bytes = opt_params * optimizer_step_bytes(optimizer, precision)
    optimizer_s = step_bytes / hbm
    offload_s = n_micro * act_mb
    if off_o.any():  # ZeRO-Offload: gradients down every micro-batch (behind backward), CPU step, parameters up
        grad_down = np.maximum(bpv * opt_params / link - bwd_window, 0.0)
        cpu_step = step_bytes / host_memory_bytes_per_s_per_gpu(system)
        offload_s = offload_s + np.where(off_o, n_micro * grad_down + cpu_step + bpv * opt_params / link, 0.0)
        optimizer_s = np.where(off_o, 0.0, optimizer_s)
    # ---- total -----------------------------------------------------------------------------------------------
    out = {
        "compute": n_micro * compute_mb,
        "recompute": n_micro * recompute_mb,
        "tp_comm": n_micro * tp_mb,
        "cp_comm": n_micro * cp_mb,
        "ep_comm": n_micro * ep_mb,
        "pp_comm": n_micro * pp_mb,
        "bubble": bubble,
        "dp_comm": dp_comm,
        "optimizer": optimizer_s,
        "offload": offload_s,
        "overhead": np.full_like(optimizer_s, cal.step_overhead_s, dtype=float),
    }
    shape = np.broadcast(*out.values()).shape
    out = {k: np.broadcast_to(np.asarray(x, dtype=float), shape) for k, x in out.items()}
    step = sum(out.values())
    gpus = tp * pp * dp * cp
    tokens_step = n_micro * dp * b * s
    model_fpt, hw_fpt = train_flops_per_token(spec, s, recompute="none", causal=causal)
    _, hw_sel = train_flops_per_token(spec, s, recompute="selective", causal=causal)
    _, hw_full = train_flops_per_token(spec, s, recompute="full", causal=causal)
    extra = np.where(rc == 2, hw_full - hw_fpt, np.where(rc == 1, hw_sel - hw_fpt, 0.0))  # the recompute pass
    # op-selective: its share of the forward matmuls (hw_full - hw_sel; the head's counted at the same share)
    extra = np.where(rc == 3, op_selective_recompute_fraction(spec) * (hw_full - hw_sel), extra)
    if frozen:  # no weight gradients: forward + data-gradient backward = 2x forward for the matmuls
        model_fpt = model_fpt * 2 / 3
    hw_fpt = model_fpt + extra
    tok_s = tokens_step / step
    res = {f"t_{k}": v for k, v in out.items()}
    res.update(
        step_time_s=step,
        tokens_per_step=tokens_step + 0 * step,
        tokens_per_s=tok_s,
        tokens_per_s_per_gpu=tok_s / gpus,
        model_tflops_per_gpu=model_fpt * tok_s / gpus / 1e12,
        hardware_tflops_per_gpu=hw_fpt * tok_s / gpus / 1e12,
        n_micro=n_micro + 0 * step,
    )
    res["mfu"] = res["model_tflops_per_gpu"] * 1e12 / peak
    res["hfu"] = res["hardware_tflops_per_gpu"] * 1e12 / peak
    return res


@dataclass(frozen=True)
class TrainEstimate:
    """One layout's prediction. ``as_dict`` keys are a stable contract (see the CLI's ``estimate train``)."""

    fits: bool
    reason: str | None
    memory_gb_per_gpu: float
    memory_breakdown_gb: dict[str, float]
    step_time_s: float
    time_breakdown_s: dict[str, float]
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    model_tflops_per_gpu: float
    hardware_tflops_per_gpu: float
    mfu: float
    hfu: float
    scaling_efficiency: float | None
    train_time_h: float | None
    gpu_hours: float | None
    layout: Layout
    gpus: int
    gpu: str
    base_gpus: int | None = None
    # why scaling_efficiency exceeds 1 where it does: the parts of the step that shrink more than N-fold per GPU
    scaling_note: str | None = None
    extra: dict[str, float] = field(default_factory=dict)
    framework: Framework = field(default_factory=lambda: framework_of(None))
    calibrated: bool = True  # False: the GPU's architecture has no GEMM/HBM measurement (``arch_factors``)
    calibration_note: str = ""
    # the framework inputs the memory figures assumed (``estimate.memory.profiles``; None: the default framework's)
    memory_accounting: MemoryProfile | None = None

    def as_dict(self) -> dict[str, Any]:
        d = {
            k: getattr(self, k)
            for k in ("fits", "reason", "memory_gb_per_gpu", "memory_breakdown_gb", "step_time_s",
                      "time_breakdown_s", "tokens_per_s", "tokens_per_s_per_gpu", "model_tflops_per_gpu",
                      "hardware_tflops_per_gpu", "mfu", "hfu", "scaling_efficiency", "train_time_h", "gpu_hours",
                      "gpus", "gpu", "base_gpus", "scaling_note", "calibrated", "calibration_note")
        }  # fmt: skip
        d["framework"] = self.framework.as_dict()
        acc = self.memory_accounting or resolve_profile(self.framework, zero=self.layout.zero)
        d["memory_accounting"] = acc.as_dict()
        lay = self.layout
        d["layout"] = lay.kwargs() | {"global_batch": lay.global_batch}
        return d


def _predict(
    spec: TransformerSpec, *, gpu: Accelerator, system: System, layout: Layout, seq_len: int, precision: str,
    task: str, lora: LoraConfig | None, cal: Calibration, optimizer: str, overheads: Overheads | None,
    framework: Framework, ep_comm_overlap: bool = False,
) -> tuple[dict[str, float], dict[str, float]]:
    gb = layout.global_batch or layout.micro_batch * layout.dp
    lay = layout.kwargs()  # one set of layout keywords for both models
    perf = train_step_arrays(
        spec, gpu=gpu, system=system, seq_len=seq_len, global_batch=gb, precision=precision, task=task, lora=lora,
        optimizer=optimizer, cal=cal, framework=framework, ep_comm_overlap=ep_comm_overlap, **lay,
    )  # fmt: skip
    mem = training_memory_arrays(
        spec, seq_len=seq_len, n_micro=layout.grad_accum, precision=precision, optimizer=optimizer, task=task,
        lora=lora, overheads=overheads, framework=framework, **lay,
    )  # fmt: skip
    return {k: float(v) for k, v in perf.items()}, {k: float(v) / GB for k, v in mem.items()}


_SUPERLINEAR_WHY = {
    "offload": "offload: each rank moves only its shard of the gradients, over its own PCIe link, for its share of "
               "the micro-batches (ZeRO-Offload)",
    "optimizer": "the optimizer step: each rank updates only its shard",
    "dp_comm": "data-parallel communication",
    "bubble": "the pipeline bubble: more micro-batches per stage at the baseline",
}


def _superlinear_note(perf: dict[str, Any], base: dict[str, Any], ratio: float, base_gpus: int) -> str:
    """Why a speedup beats the GPU ratio: the step's parts whose per-GPU time shrinks more than ``ratio``-fold from
    the ``base_gpus`` baseline (sharded work that per-GPU compute does not have, e.g. offload traffic that falls as
    the shard and the micro-batches both shrink)."""
    parts = [k for k in TIME_KEYS if base[f"t_{k}"] > ratio * perf[f"t_{k}"] * (1 + 1e-6) + 1e-12]
    why = "; ".join(_SUPERLINEAR_WHY.get(k, k) for k in parts) or "the step's fixed parts"
    return (f"above 1 because, per GPU, these parts shrink more than {ratio:g}-fold from {base_gpus} GPU(s): "
            f"{why}")


def estimate_train(
    spec: TransformerSpec,
    *,
    gpu: Accelerator,
    layout: Layout,
    seq_len: int,
    system: System | str | None = None,
    cluster: Cluster | None = None,
    precision: str = "bf16",
    task: str = "pretrain",
    lora: LoraConfig | None = None,
    optimizer: str = "adamw",
    tokens: float | None = None,
    cal: Calibration = DEFAULT_CALIBRATION,
    overheads: Overheads | None = None,
    framework: Framework | str | None = None,
    tp_comm_overlap: bool | None = None,
    ep_comm_overlap: bool = False,
) -> TrainEstimate:
    """Predict one training layout on ``layout.gpus`` GPUs of type ``gpu`` (a catalog ``Accelerator``).

    ``tokens`` (optional) is the training budget for ``train_time_h`` and ``gpu_hours``. Scaling efficiency is
    speedup / (N / N_base) against the smallest GPU count that fits with the same model-parallel group
    (tp · pp · cp) and global batch, as the seed articles define it. ``system`` is the network (a ``System`` or a
    built-in system id; default: the accelerator's, with ``cluster``'s overrides, ``system_of``);
    ``framework`` the framework behaviour assumed (``scaleright.estimate.framework``; default ``fsdp2``), with
    ``tp_comm_overlap`` overriding its field (``train_step_arrays``). The result records both, and whether the
    GPU's architecture has measured GEMM/HBM ceilings (``calibrated``). ``ep_comm_overlap`` whether the
    framework overlaps the expert all-to-all (``train_step_arrays``).

    Memory follows the same framework (``estimate.memory.profiles.memory_profile``: its state format at the
    layout's ZeRO stage, its cross-entropy, its attention, its CUDA context, whether its pipeline keeps stage
    outputs), so the default is FSDP2's accounting, not the ZeRO paper's that ``training_memory`` uses without a
    framework; ``memory_accounting`` records it. ``overheads`` (None: the framework's CUDA context with the
    default allocator and NCCL terms) replaces the overhead terms when given.
    """
    layout.validate(spec)
    fw = framework_of(framework).with_overrides(tp_comm_overlap=tp_comm_overlap)
    if fw.pipeline_schedule == "1f1b" and layout.virtual_stages > 1:
        raise InputError(f"virtual_stages={layout.virtual_stages} needs an interleaved pipeline schedule; framework "
                         f"{fw.name} runs 1f1b (pass --pipeline-schedule interleaved or --virtual-stages 1)")
    if seq_len < 1:
        raise InputError(f"seq_len={seq_len} must be a positive integer")
    kw: dict[str, Any] = dict(
        gpu=gpu, system=system_of(gpu, system=system, cluster=cluster), seq_len=seq_len, precision=precision,
        task=task, lora=lora, cal=cal, optimizer=optimizer, overheads=overheads, framework=fw,
        ep_comm_overlap=ep_comm_overlap,
    )  # fmt: skip
    perf, mem = _predict(spec, layout=layout, **kw)
    accounting = resolve_profile(fw, zero=layout.zero, precision=precision)
    if overheads is not None:  # the CUDA context the memory figures used
        accounting = dataclasses.replace(accounting, runtime_gb=overheads.runtime_gb)
    total = sum(mem.values())
    fits = total <= gpu.memory_gb
    reason = None if fits else f"needs {total:.1f} GB per GPU, {gpu.id} has {gpu.memory_gb:.1f} GB"
    gb = layout.global_batch or layout.micro_batch * layout.dp
    base_gpus = scaling = note = None
    for d in divisors(layout.dp):
        if gb % (d * layout.micro_batch) or (layout.tp * d * layout.cp) % (layout.ep * layout.expert_tp):
            continue
        # HSDP keeps its shard group where the smaller data-parallel group still holds it
        shard = None if layout.dp_shard is None else math.gcd(layout.dp_shard, d * layout.cp)
        base = layout.replace(dp=d, global_batch=gb, dp_shard=None if shard == d * layout.cp else shard)
        bperf, bmem = _predict(spec, layout=base, **kw)
        if sum(bmem.values()) <= gpu.memory_gb:
            base_gpus = base.gpus
            speedup = bperf["step_time_s"] / perf["step_time_s"]
            scaling = speedup / (layout.gpus / base_gpus)
            if scaling > 1 + 1e-9:
                note = _superlinear_note(perf, bperf, layout.gpus / base_gpus, base_gpus)
            break
    arch = arch_factors(gpu)
    train_time_h = gpu_hours = None
    if tokens:
        train_time_h = tokens / perf["tokens_per_s"] / 3600
        gpu_hours = train_time_h * layout.gpus
    return TrainEstimate(
        fits=fits, reason=reason, memory_gb_per_gpu=total, memory_breakdown_gb=mem,
        step_time_s=perf["step_time_s"], time_breakdown_s={k: perf[f"t_{k}"] for k in TIME_KEYS},
        tokens_per_s=perf["tokens_per_s"], tokens_per_s_per_gpu=perf["tokens_per_s_per_gpu"],
        model_tflops_per_gpu=perf["model_tflops_per_gpu"], hardware_tflops_per_gpu=perf["hardware_tflops_per_gpu"],
        mfu=perf["mfu"], hfu=perf["hfu"], scaling_efficiency=scaling, train_time_h=train_time_h,
        gpu_hours=gpu_hours, layout=layout, gpus=layout.gpus, gpu=gpu.id, base_gpus=base_gpus, scaling_note=note,
        extra={"micro_batches_per_step": perf["n_micro"]}, framework=fw, calibrated=arch.calibrated,
        calibration_note=arch.note, memory_accounting=accounting,
    )  # fmt: skip
