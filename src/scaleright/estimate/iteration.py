"""The time of one serving-engine iteration: a fused batch of decode tokens and chunked-prefill tokens.

An engine iteration (Orca, Yu et al. 2022; vLLM V1 / SGLang / TensorRT-LLM in-flight batching) runs one forward
pass over ``m = B + P`` rows: one new token for each of the ``B`` decoding sequences and ``P`` prompt tokens of
chunked prefills. On one replica of ``tp · pp`` GPUs it costs

    t = overhead + Σ_GEMMs max(FLOPs / (peak · eff(m)), bytes / HBM)          (weights read once per iteration)
          + elementwise(m) + max(decode attention FLOPs / peak_attn, KV bytes / HBM)         (KV read per sequence)
          + max(prefill attention FLOPs / peak_attn, prefix KV bytes / HBM)
          + 2 · layers · all_reduce(m · h · 2 B, tp) + (pp − 1) · p2p(m)
          + sequence_overhead · (sequences sampling a token)                (host work of a serial engine loop)

- Collectives (the TP all-reduce, the pipeline send/recv) are timed by
  ``estimate.collectives`` on the tiers of the ``catalog.systems.System`` the group spans, from measured
  nccl-tests bus bandwidth and latency (its LL and NVLS small-message fits cover the activation sizes of decode):
  the TP group is ``tp`` adjacent ranks (the EP group, ``ep`` of them, needs no collective of its own), the
  pipeline ``pp`` ranks ``tp`` apart. Engines with a custom all-reduce (``EngineProfile.custom_all_reduce``) take
  the faster of NCCL and their one-shot kernel inside a peer-to-peer domain (``one_shot_all_reduce_s``, costed
  from the same fabric fits): at decode sizes the ring's 2(tp − 1) latency steps would dominate.
- GEMMs are the rooflines of ``estimate.layer`` (``layer_gemm_times``, ``gemm_time``), with the row count
  floored at ``gemm_half_dim`` in the efficiency only (``rows_floor``): a batch-1 decode is bandwidth-bound GEMV,
  its time the weight bytes over the achievable HBM bandwidth (Pope et al. 2022, section 2), inversely
  proportional to the HBM bandwidth; a long prefill chunk is compute-bound. Peak and GEMM efficiency follow the
  compute precision (``compute_precision``; fp32 weights run GEMMs and attention at the fp32 / TF32 rate), set
  up once by ``layer.roofline``. GEMMs on fp16 operands (fp16 weights, or the fp16 copy of an engine that
  dequantises) of an engine whose accumulator is fp16 (``EngineProfile.gemm_accumulate``: llama.cpp's
  ``CUBLAS_COMPUTE_16F``) run at the datasheet's FP16-accumulate rate where the part has a faster one
  (``Accelerator.fp16_accumulate_tflops``: GeForce RTX 30 / 40 / 50, twice their FP32-accumulate rate), with the
  same architecture ceiling and calibration share as the fp32-accumulate rate (``accumulate_factor``): never above
  that datasheet rate. Data-center parts run both accumulators at one rate; bf16 has an fp32 accumulator only.
- Weights are read at their stored bytes (``workload.precision``): a GGUF file type (``q8_0``, ``q6_k``,
  ``q5_k_m``, ``q4_k_m``, ``q4_0``) at its own tensors' bytes (``workload.params.gguf_weight_bytes``: the attention
  and FFN matrices each at their mix of ggml types, the head at its output tensor's type). GGUF is weight-only
  and runs as the int8 path (``compute_precision``); an engine with ``dequantize_above_rows`` (llama.cpp)
  dequantises it to fp16 for GEMMs of more rows, as it does int8 / int4. TensorRT-LLM loads no GGUF file: the
  ``trtllm`` profile refuses one (``workload.precision.check_gguf_engine``).
- Decode attention reads every sequence's KV cache once: its time is affine in the batch's total context, so a run
  of identical iterations whose contexts only grow can be summed in closed form (``DecodeRun``).
- KV reads: the attention kernels stream each sequence's KV blocks (paged blocks of 32-64 tokens, tens of KB or more
  contiguous per layer) of the whole batch in one kernel per layer, a long streaming read; they run at the
  STREAM-like rate of the other streaming kernels (``Roofline.hbm``: the measured STREAM ceiling of
  ``components/hbm_bandwidth.csv`` × ``memory_efficiency``). The weight reads of decode GEMMs run at
  ``decode_memory_efficiency`` of that ceiling (``Roofline.decode_hbm``): at small batch they are hundreds of
  small GEMV kernels per iteration, each a few MB, whose launch and tail gaps the share absorbs. One share for
  both made the TensorRT-LLM throughput tables (large batches, steps 35-70 % KV reads for 7-8B models) pull it to
  its upper bound 1 when the TPOT table (steps ~98 % weight reads) was held out: 7-8B KV-bound throughput rows
  under-predicted by ~20 %. With KV at the streaming rate, the fit on the dense rows of the throughput tables
  alone puts the weight share at 0.74 (in-sample 0.68; it was 1, on the bound) and predicts the held-out TPOT
  table to 10.7 % median (17.2 % before): a diagnostic fold, the MoE rows left out of the fit. With them in it
  (the leave-one-source-out fold itself, ``benchmarks/loso_one_table.py``), their missing cost (predicted too
  fast) drags ``decode_overhead_s`` to ~10 ms and the held-out TPOT table is 29.5 % median (p90 121 %).
  An engine profile that names ``hbm_fraction`` (a grid fit of one fraction) reads both at that fraction.
- MoE layers read only the experts the batch touches, E·(1 − (1 − k/E)^m) of E, and pay the dispatch / combine
  copies that group rows by expert around the grouped GEMMs, the bytes the engine's MoE kernels move
  (``EngineProfile.moe_dispatch``, ``estimate.moe.dispatch_bytes``); with expert parallelism (``ep``
  divides ``tp``: experts are split over the ep ranks of the tensor-parallel group instead of sliced) each GPU
  holds E/ep experts, the layer waits for the busiest rank (its expected routed rows and experts reached under
  uniform routing, ``estimate.moe``), and no all-to-all is needed: every rank holds all the tokens, and the
  combine is the layer's second all-reduce.
- Pipeline parallelism: one micro-batch's iteration passes the ``pp`` stages one after another (each holds ``L / pp``
  layers; the last also the output head), with (pp − 1) activation transfers, so its latency is the serial sum of the
  stages, ``T``. An engine that overlaps the stages (``EngineProfile.overlaps_pipeline_stages``: TensorRT-LLM, vLLM,
  SGLang) keeps ``k = pp`` micro-batches in flight (``micro_batches``), each on another stage in steady state; the
  stages are shared, so each micro-batch's iteration also lasts at least ``k`` times the slowest stage's GPU time (the
  last: its share of the layers plus the head), ``max(T, k · stage)``, and the replica's throughput is ``k``
  micro-batches per such iteration, stage-limited. The engine's per-iteration and per-sequence host overheads are not
  stage time. With equal stages that is ``T`` plus ``(k − 1) · head − overhead`` where positive, the same for every
  context length (``pipelined_head_s``, the tables' head entries: the simulator's schedulers take the other
  micro-batches as busy, so a lone micro-batch's iteration comes out up to that much long); ``k = 1`` (llama.cpp,
  whose layer split runs the GPUs in turn, or pp = 1) is ``T`` exactly. The simulator runs the ``k`` micro-batches as
  ``k`` schedulers per replica (vLLM's virtual engines), the steady state of ``estimate.infer`` as ``k`` micro-batches
  of a ``k``-th of the concurrency.
- The engine profile (``estimate.engines``) sets the per-iteration overhead (scheduling, sampling, launch gaps), the
  host time per sampled sequence of an engine whose loop runs between GPU steps (vLLM V0; 0 for the others),
  the achievable HBM fraction of decode kernels, a factor on the GEMM efficiency and whether its elementwise
  kernels are fused (``fused_elementwise_values``) or counted as training frameworks run them; ``engine=None`` is
  ``engines.calibrated_engine(cal)``, the calibration's fitted decode factors (what ``estimate infer`` uses).

``IterationModel`` precomputes the parts that depend on ``m`` only as arrays (one vectorised call of the shared
building blocks, ``fixed_s`` and ``head_s``), so the serving simulator evaluates an iteration with a few float
operations; ``times_s`` evaluates the same cost for arrays of iterations of any size (the steady state of
``estimate.infer``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scaleright.catalog.gpus import PCIE_X16_GB_PER_S
from scaleright.errors import InputError, LayoutError
from scaleright.estimate.calibration import DEFAULT_CALIBRATION, Calibration
from scaleright.estimate.collectives import CollectiveFits, collective_time_s
from scaleright.estimate.comm import Cluster, scaled_fits, system_of
from scaleright.estimate.engines import EngineProfile, calibrated_engine, get_engine
from scaleright.estimate.layer import elementwise_values, ffn_width, gemm_time, layer_gemm_times, roofline
from scaleright.estimate.layout import Layout
from scaleright.estimate.memory import kv_cache_bytes
from scaleright.workload.params import ParamCounts, count_params, gguf_weight_bytes
from scaleright.workload.precision import bytes_per_element, check_gguf_engine, is_gguf
from scaleright.workload.spec import TransformerSpec

if TYPE_CHECKING:
    from scaleright.catalog.gpus import Accelerator
    from scaleright.catalog.systems import System

__all__ = ["DecodeRun", "IterationModel", "accumulate_factor", "compute_precision", "fused_elementwise_values",
           "iteration_time_s", "one_shot_all_reduce_s", "serving_layout"]


def compute_precision(gpu: Accelerator, precision: str) -> str:
    """The tensor-core format the GEMMs run in: weight-only int4 runs in 16-bit; fp8/fp4/int8 natively if the
    GPU has a rate for it, else in 16-bit after dequantisation. GGUF types run int8 where the GPU has an int8
    rate: ggml's quantised kernels (llama.cpp's MMQ / MMVQ, vLLM's ``ggml_mul_mat_a8`` ports) quantise the
    activations to q8_1 and take integer dot products on the unpacked blocks, for every block format."""
    if precision in ("fp32",):
        return "fp32"
    if is_gguf(precision):
        precision = "int8"
    if precision in ("fp8", "fp4", "int8") and gpu.dense_tflops.get(precision):
        return precision
    return "fp16" if not gpu.dense_tflops.get("bf16") else "bf16"


def accumulate_factor(gpu: Accelerator, operands: str, accumulate: str, peak_flops: float) -> float:
    """The factor on ``peak_flops`` (the 16-bit roofline's datasheet rate) of GEMMs on ``operands`` ("fp16", "bf16",
    ...) whose accumulator is ``accumulate``: for fp16 operands with an fp16 accumulator on a part that states a
    faster FP16-accumulate rate (GeForce: twice its fp32-accumulate one), that rate over ``peak_flops``, so the
    GEMMs' datasheet rate is exactly it; else 1."""
    fast = gpu.fp16_accumulate_tflops
    if operands != "fp16" or accumulate != "fp16" or not fast:
        return 1.0
    return max(1.0, fast * 1e12 / peak_flops)


DEFAULT_PCIE_GEN = "4.0"  # when the catalog gives no host link (e.g. SXM modules listed without one)


def one_shot_all_reduce_s(nbytes: ArrayLike, *, system: System, size: int,
                          fits: CollectiveFits) -> NDArray[np.float64]:  # fmt: skip
    """A serving engine's one-shot all-reduce of ``nbytes`` over ``size`` adjacent ranks (vLLM / TensorRT-LLM
    custom all-reduce): every rank reads its ``size − 1`` peers' buffers over the innermost tier in one step and
    adds them, ``α + (size − 1)·S / (b·η)`` with that fabric's measured step latency (the LL protocol's where
    fitted) and achieved link fraction ``η``; a full mesh (xGMI) reads each peer on its own link. Infinite when
    the group leaves the innermost domain or the tier has no peer-to-peer path (the engines fall back to NCCL)."""
    s_bytes = np.asarray(nbytes, dtype=float)
    t0 = system.tiers[0]
    if (t0.scale_out or t0.kind == "pcie-host" or t0.torus_dims is not None
            or (t0.domain_gpus is not None and size > t0.domain_gpus)):  # fmt: skip
        return np.full_like(s_bytes, np.inf)
    fit = fits.fabric(t0.fabric)
    alpha_s = (fit.ll_alpha_us if fit.ll_alpha_us is not None else fit.alpha_us) * 1e-6
    link = t0.bandwidth_gb_per_s * 1e9
    if t0.peer_link_gb_per_s is not None:
        link = min(link, (size - 1) * t0.peer_link_gb_per_s * 1e9)
    return np.asarray(alpha_s + (size - 1) * s_bytes / (link * fit.eta), dtype=float)


def fused_elementwise_values(spec: TransformerSpec, c: ParamCounts) -> tuple[float, float]:
    """(replicated, tp-split) values per token and layer an engine with fused inference kernels reads plus
    writes outside its GEMMs and attention (TensorRT-LLM: ``residual_rms_norm`` fuses each residual add with the
    next RMSNorm, RoPE and the KV-cache write run inside the attention kernel, the gated activation is one kernel):
    two fused residual-add + norms, each reading the input and the residual and writing both (8h), and the
    activation reading gate and up and writing their product (3f; 2f without a gate). Against the unfused count of
    ``layer.elementwise_values`` (10h + 2(q + kv) + 2kv + 3f + 2o), which training frameworks pay: no
    calibration factor, the count is the kernels' traffic."""
    return 8.0 * spec.hidden, (3.0 if spec.gated_mlp else 2.0) * ffn_width(spec, c)


def serving_layout(spec: TransformerSpec, *, tp: int = 1, pp: int = 1, ep: int = 1) -> Layout:
    """A validated serving replica layout: ``tp · pp`` GPUs, ``ep`` dividing ``tp`` (experts split over the
    tensor-parallel group)."""
    lay = Layout(tp=tp, pp=pp, dp=ep, ep=ep).validate(spec)  # dp=ep only to pass Layout's ep | dp·cp rule
    if tp % ep:
        raise LayoutError(f"ep({ep}) does not divide tp({tp}): serving splits experts over the tensor-parallel group")
    return lay


class DecodeRun:
    """``n`` consecutive iterations with the same rows whose total context grows by ``batch`` per iteration:
    iteration j takes ``intercept_s + slope_s · (context0 + j · batch)``. (A plain slotted class: the simulator
    builds one per decode run, and a frozen dataclass costs several times more to construct.)"""

    __slots__ = ("batch", "context0", "intercept_s", "slope_s")

    def __init__(self, intercept_s: float, slope_s: float, batch: int, context0: float):
        self.intercept_s = intercept_s
        self.slope_s = slope_s  # seconds per context token in the batch
        self.batch = batch
        self.context0 = context0

    def total_s(self, n: int) -> float:
        """Sum of the first ``n`` iterations' times (exact: the cost is affine in the total context)."""
        return n * self.intercept_s + self.slope_s * (n * self.context0 + self.batch * n * (n - 1) / 2.0)

    def iterations_until(self, dt: float, n_max: int) -> int:
        """Smallest n in 1..n_max with total_s(n) >= dt (n_max if none)."""
        if dt <= 0:
            return 1
        a = self.slope_s * self.batch / 2.0
        b = self.intercept_s + self.slope_s * self.context0 - a
        if a > 0:  # noqa: SIM108 (the quadratic's root; below, the linear case)
            n = (-b + math.sqrt(b * b + 4 * a * dt)) / (2 * a)
        else:
            n = dt / b if b > 0 else float(n_max)
        n = max(1, min(n_max, math.ceil(n - 1e-9)))
        while n > 1 and self.total_s(n - 1) >= dt:
            n -= 1
        while n < n_max and self.total_s(n) < dt:
            n += 1
        return n


class IterationModel:
    """Iteration cost of one replica, precomputed for rows ``m`` in 0..``max_rows``. Knows no scheduler."""

    def __init__(self, spec: TransformerSpec, *, gpu: Accelerator, system: System | None = None,
                 cluster: Cluster | None = None, tp: int = 1, pp: int = 1, ep: int = 1, precision: str = "bf16",
                 kv_precision: str | None = None, engine: str | EngineProfile | None = "vllm",
                 cal: Calibration = DEFAULT_CALIBRATION, max_rows: int = 8192,
                 micro_batches: int | None = None):  # fmt: skip
        serving_layout(spec, tp=tp, pp=pp, ep=ep)
        self.engine = calibrated_engine(cal) if engine is None else get_engine(engine)
        # micro-batches in flight over the pp stages (module docstring): the engine's, or 1 (serial) or pp
        k = self.engine.micro_batches_in_flight(pp) if micro_batches is None else micro_batches
        if isinstance(k, bool) or not isinstance(k, int) or k not in (1, pp):
            raise InputError(f"micro_batches={micro_batches!r} not allowed at pp={pp}; allowed: 1 (stages in turn) "
                             f"or {pp} (one micro-batch per stage)")  # fmt: skip
        self.micro_batches = k
        check_gguf_engine(precision, self.engine.name)
        self.kv_precision = kv_precision or self.engine.kv_precision_for(precision)
        bytes_per_element(self.kv_precision, field="kv_precision")
        if max_rows < 0:
            raise InputError(f"max_rows={max_rows} must be a non-negative integer (0: the array path only)")
        self.spec, self.gpu, self.tp, self.pp, self.ep = spec, gpu, tp, pp, ep
        self.precision, self.max_rows = precision, int(max_rows)
        self.system = system_of(gpu, system=system, cluster=cluster)
        self._fits = scaled_fits(cal)
        self._cal = cal
        prof = self.engine
        self._c = c = count_params(spec)
        # every peak and efficiency from the one roofline set-up (``layer.roofline``): the calibration's shares of
        # the architecture's measured GEMM and STREAM ceilings; fp32 weights run GEMMs and attention at fp32 / TF32
        rl = roofline(gpu, compute_precision(gpu, precision), cal)
        # decode kernels stream weights and KV at the engine's fraction of the datasheet bandwidth, or at the
        # calibration's share of the measured STREAM ceiling (``rl.decode_hbm``)
        self.hbm_bytes_per_s = (gpu.hbm_bandwidth_tb_per_s * 1e12 * prof.hbm_fraction
                                if prof.hbm_fraction is not None else rl.decode_hbm)  # fmt: skip
        # the attention kernels' KV-cache reads (module docstring, "KV reads"): the engine's fraction where it names
        # one, else the STREAM-like rate of streaming kernels (``rl.hbm``), not the weight GEMVs' ``decode_hbm``
        self.kv_hbm_bytes_per_s = self.hbm_bytes_per_s if prof.hbm_fraction is not None else rl.hbm
        self._stream_hbm = rl.hbm  # norms, activations, residuals: STREAM-like kernels
        bpe = bytes_per_element(precision)
        # GGUF: the file's own bytes per weight of the attention and FFN matrices and of the head's tensor
        # (``workload.params.gguf_weight_bytes``); other formats: one figure, the head at 16 bits at least
        self._ffn_bpe: float | None = None
        self._head_bpe = max(bpe, 2.0)
        if is_gguf(precision):
            w = gguf_weight_bytes(spec, precision)
            bpe, self._ffn_bpe = w.attention / w.attention_params, w.ffn / w.ffn_params
            self._head_bpe = w.head_bytes_per_weight
        self._act = 4.0 if precision == "fp32" else 2.0  # activation bytes: fp32 models keep fp32 activations
        # bytes per value of the GEMMs' input rows: quantised (fp8 / int8 1 B, NVFP4 values and block scales
        # 0.5625 B) where the GEMMs run in that format, else the activations'
        cp = compute_precision(gpu, precision)
        self._gemm_in = bytes_per_element(cp) if cp in ("fp8", "int8", "fp4") else self._act
        share = rl.tensor / (rl.peak * rl.arch.gemm_efficiency)  # the calibration's share of the GEMM ceiling
        # the accumulator of the engine's fp16-operand GEMMs: the FP16-accumulate datasheet rate where faster
        acc = accumulate_factor(gpu, precision, prof.gemm_accumulate, rl.peak)
        self.gemm_peak_flops = rl.peak * acc  # the datasheet rate of the accumulator in use (the GEMMs' roofline)
        # the engine's factor on that share, the product at most 1 (the measured ceiling)
        self._gemm = dict(peak=rl.tensor * acc, eff_max=min(prof.gemm_efficiency_factor, 1.0 / share),
                          half_dim=cal.gemm_half_dim, hbm=self.hbm_bytes_per_s, bytes_per_el=bpe,
                          rows_floor=cal.gemm_half_dim)  # fmt: skip
        # an engine that dequantises int8 / int4 weights for GEMMs of many rows (``dequantize_above_rows``): those
        # GEMMs run in 16-bit on the fp16 copy, after a pass that reads the packed weights and writes the copy
        self._dequant_rows: int | None = None
        self.dequant_gemm_peak_flops: float | None = None  # the datasheet rate of the fp16 copy's GEMMs
        self._dequant_s = 0.0
        if prof.dequantize_above_rows is not None and (precision in ("int8", "int4") or is_gguf(precision)):
            rl16 = roofline(gpu, compute_precision(gpu, "fp16"), cal)
            share16 = rl16.tensor / (rl16.peak * rl16.arch.gemm_efficiency)
            acc16 = accumulate_factor(gpu, "fp16", prof.gemm_accumulate, rl16.peak)  # the fp16 copy
            self.dequant_gemm_peak_flops = rl16.peak * acc16
            self._gemm16 = dict(self._gemm, peak=rl16.tensor * acc16,
                                eff_max=min(prof.gemm_efficiency_factor, 1.0 / share16), bytes_per_el=2.0)  # fmt: skip
            attn_el = c.layers * c.attn_per_layer / tp
            ffn_el = (c.dense_layers * c.dense_ffn_per_layer + c.moe_layers * c.moe_ffn_per_layer) / tp
            packed = attn_el * bpe + ffn_el * (self._ffn_bpe if self._ffn_bpe is not None else bpe)
            self._dequant_rows = prof.dequantize_above_rows
            # a STREAM-like read of the packed weights and write of the fp16 copy
            self._dequant_s = (packed + 2.0 * (attn_el + ffn_el)) / rl.hbm
        # elementwise values per row and layer (replicated over tp, split over tp)
        if prof.fused_elementwise:
            self._elementwise = fused_elementwise_values(spec, c)
        else:  # the training frameworks' unfused count, scaled by the calibration's factor
            repl, split = elementwise_values(spec, c)
            self._elementwise = (cal.elementwise_factor * repl, cal.elementwise_factor * split)
        # the tables the simulator reads (rows 0 never run: no work); max_rows 0: ``times_s`` only
        m = np.arange(1, self.max_rows + 1, dtype=float)
        self._fixed: list[float] = [0.0, *(self.fixed_s(m).tolist() if self.max_rows else [])]
        # the head rows' share of one micro-batch's iteration with ``micro_batches`` in flight (``pipelined_head_s``)
        self._head: list[float] = [0.0, *(self.pipelined_head_s(m).tolist() if self.max_rows else [])]
        # attention: FLOPs and KV bytes per context token attended (affine in the batch's total context)
        if spec.mla:
            per_ctx = 2 * spec.heads * (spec.mla.qk_nope_head_dim + spec.mla.qk_rope_head_dim + spec.mla.v_head_dim)
        else:
            per_ctx = 4 * spec.heads * spec.head_dim
        self._attn_flop_s = per_ctx * spec.layers / tp / rl.attention  # seconds per (query, context token) pair
        self.kv_bytes_per_token = float(kv_cache_bytes(spec, batch=1, context=1, tp=tp, pp=pp,
                                                       kv_precision=self.kv_precision))  # fmt: skip
        self._kv_s = self.kv_bytes_per_token * pp / self.kv_hbm_bytes_per_s  # every stage reads its share in turn
        self.decode_slope_s = max(self._attn_flop_s, self._kv_s)
        # KV swap to host memory: each GPU moves its share over its own PCIe link, in parallel
        pcie = PCIE_X16_GB_PER_S.get(gpu.pcie_gen or DEFAULT_PCIE_GEN, PCIE_X16_GB_PER_S[DEFAULT_PCIE_GEN])
        self.swap_s_per_token = self.kv_bytes_per_token / (pcie * 1e9)

    # -- the parts that depend on the rows only (array-friendly; the tables above are these at 0..max_rows) ----
    def fixed_s(self, rows: ArrayLike) -> NDArray[np.float64]:
        """Time of an iteration of ``rows`` rows without its output head and attention core: the layers' GEMMs,
        elementwise traffic, collectives and the engine's per-iteration overhead (0 for 0 rows)."""
        spec, c, tp, pp, ep, system, fits = self.spec, self._c, self.tp, self.pp, self.ep, self.system, self._fits
        m = np.asarray(rows, dtype=float)
        mm = np.maximum(m, 1.0)  # rows 0 never runs (no work); keep the arrays finite
        h, L, act = spec.hidden, spec.layers, self._act
        # serving splits experts over the ep ranks of the tensor-parallel group: each expert sliced tp / ep ways
        # (MoE: the busiest expert-parallel rank's experts and its dispatch / combine copies, ``estimate.moe``)
        # the dispatch / combine bytes the engine's MoE kernels move (``EngineProfile.moe_dispatch``), the rows
        # quantised to the GEMMs' input format where its kernels do (``_gemm_in``)
        moe_kw = dict(tokens=mm, tp=tp, ep=ep, expert_tokens=mm, expert_tp=tp // ep, act_bytes=act,
                      stream_hbm=self._stream_hbm, moe_dispatch=self.engine.moe_dispatch)  # fmt: skip
        attn, layer_ffn = layer_gemm_times(spec, c, gemm=self._gemm, gemm_in_bytes=self._gemm_in, **moe_kw)
        if self._ffn_bpe is not None:  # GGUF: the FFN matrices at their own bytes per weight
            layer_ffn = layer_gemm_times(spec, c, gemm={**self._gemm, "bytes_per_el": self._ffn_bpe},
                                         gemm_in_bytes=self._gemm_in, **moe_kw)[1]  # fmt: skip
        deq = 0.0 * mm
        if self._dequant_rows is not None:  # many rows: dequantise once per iteration, then 16-bit GEMMs
            a16, f16 = layer_gemm_times(spec, c, gemm=self._gemm16, gemm_in_bytes=act, **moe_kw)  # 16-bit GEMMs
            big = mm > self._dequant_rows
            attn, layer_ffn = np.where(big, a16, attn), np.where(big, f16, layer_ffn)
            deq = np.where(big, self._dequant_s, 0.0)
        # MoE with ep | tp: every rank of the tensor-parallel group already holds all the tokens (the attention
        # output is all-reduced), so the dispatch is a local gather and the combine is the layer's second TP
        # all-reduce (``ar`` below): no all-to-all (vLLM / SGLang expert parallelism inside TP, TensorRT-LLM's
        # MoE EP inside TP). An all-to-all belongs to attention-data-parallel + EP layouts, not modelled here.
        repl, split = self._elementwise
        elem = mm * (repl + split / tp) * act / self._stream_hbm
        # two all-reduces per layer on the tiers the tp group spans (NCCL / the engines' custom all-reduce pick the
        # fastest algorithm and protocol; the measured fits hold LL / NVLS small-message latencies)
        ar = 0.0 * mm
        if tp > 1:
            one = collective_time_s("all_reduce", mm * h * act, system=system, size=tp, stride=1, fits=fits)
            if self.engine.custom_all_reduce:
                one = np.minimum(one, one_shot_all_reduce_s(mm * h * act, system=system, size=tp, fits=fits))
            ar = L * 2 * one
        p2p = 0.0 * mm
        if pp > 1:
            p2p = (pp - 1) * collective_time_s("p2p", mm * h * act, system=system, size=pp, stride=tp, fits=fits)
        body = (L * (attn + layer_ffn + elem) + ar + deq) / pp + p2p / pp  # per stage, pp stages in a row
        return np.asarray(np.where(m > 0, pp * body + self.engine.iteration_overhead_s, 0.0), dtype=float)

    def head_s(self, rows: ArrayLike) -> NDArray[np.float64]:
        """The output head on ``rows`` rows: one per sequence that samples a token (not every prompt token), and
        the engine's host work for each of those sequences (``EngineProfile.sequence_overhead_s``)."""
        m = np.asarray(rows, dtype=float)
        t = self.head_gemm_s(m) + self.engine.sequence_overhead_s * m  # the engine's host work per sampled sequence
        return np.asarray(t, dtype=float)

    def head_gemm_s(self, rows: ArrayLike) -> NDArray[np.float64]:
        """The output head's GEMM on ``rows`` sampled rows (GPU time on the last pipeline stage; 0 for 0 rows)."""
        spec, c = self.spec, self._c
        m = np.asarray(rows, dtype=float)
        head_params = c.embedding if spec.tied_embeddings else c.lm_head
        gemm = {**self._gemm, "bytes_per_el": self._head_bpe}
        t = np.asarray(gemm_time(np.maximum(m, 1.0), spec.hidden, head_params / spec.hidden / self.tp, **gemm))
        return np.asarray(np.where(m > 0, t, 0.0), dtype=float)

    def pipelined_head_s(self, rows: ArrayLike) -> NDArray[np.float64]:
        """``head_s`` plus the wait of a micro-batch for the shared stages with ``micro_batches = pp`` in flight:
        ``max(T, pp · stage) − T = max(0, (pp − 1) · head − sequence overhead − iteration overhead)`` (module
        docstring; equal stages, the last with the head), which depends on the sampled rows only. ``head_s`` itself
        for one micro-batch in flight."""
        m = np.asarray(rows, dtype=float)
        t = self.head_s(m)
        k = self.micro_batches
        if k == 1:
            return t
        host = self.engine.sequence_overhead_s * m + self.engine.iteration_overhead_s
        wait = np.maximum(0.0, (k - 1) * self.head_gemm_s(m) - host)
        return np.asarray(np.where(m > 0, t + wait, t), dtype=float)

    def times_s(self, *, prefill_tokens: ArrayLike = 0, decode_batch: ArrayLike = 0,
                decode_context_tokens: ArrayLike = 0.0, prefill_pairs: ArrayLike = 0.0,
                prefill_kv_tokens: ArrayLike = 0.0, prefill_seqs: ArrayLike = 0,
                in_flight: ArrayLike | None = None) -> NDArray[np.float64]:  # fmt: skip
        """``time_s`` for arrays of iterations (any row count: no table, no ``max_rows``): what steady-state
        estimates (``estimate.infer``) evaluate. ``in_flight``: micro-batches like this one in flight over the
        stages, 1 to ``pp`` (default ``micro_batches``): the iteration lasts ``max(T, in_flight · stage)``, the
        serial sum of the stages ``T`` or the shared slowest stage's GPU time for all of them (module docstring)."""
        p = np.asarray(prefill_tokens, dtype=float)
        b = np.asarray(decode_batch, dtype=float)
        rows_h = b + np.asarray(prefill_seqs, dtype=float)
        gemm_h = self.head_gemm_s(rows_h)
        host = self.engine.sequence_overhead_s * rows_h
        t = self.fixed_s(p + b) + gemm_h + host
        t = t + self.decode_slope_s * np.asarray(decode_context_tokens, dtype=float)
        attn = np.maximum(self._attn_flop_s * np.asarray(prefill_pairs, dtype=float),
                          self._kv_s * np.asarray(prefill_kv_tokens, dtype=float))  # fmt: skip
        t = np.asarray(t + np.where(p > 0, attn, 0.0), dtype=float)
        k = np.asarray(self.micro_batches if in_flight is None else in_flight, dtype=float)
        if np.any(k < 1) or np.any(k > self.pp):
            raise InputError(f"in_flight must lie in [1, pp({self.pp})]: micro-batches over the pipeline stages")
        if self.pp == 1 or not np.any(k > 1):
            return t
        # the last stage's GPU time: its share of the layers, attention and transfers, and the head
        ovh = np.where(p + b > 0, self.engine.iteration_overhead_s, 0.0)
        stage = (t - ovh - host - gemm_h) / self.pp + gemm_h
        return np.asarray(np.maximum(t, k * stage), dtype=float)

    # -- evaluation -------------------------------------------------------------------------------------------
    def rows_ok(self, rows: int) -> None:
        if rows > self.max_rows:
            raise InputError(f"rows {rows} in one iteration exceed max_rows={self.max_rows} "
                             "(raise max_num_batched_tokens' bound)")  # fmt: skip

    def time_s(self, *, prefill_tokens: int = 0, decode_batch: int = 0, decode_context_tokens: float = 0.0,
               prefill_pairs: float = 0.0, prefill_kv_tokens: float = 0.0, prefill_seqs: int = 0) -> float:
        """One iteration: ``prefill_tokens`` prompt tokens of ``prefill_seqs`` sequences (``prefill_pairs`` causal
        (query, key) pairs, ``prefill_kv_tokens`` KV tokens touched) fused with ``decode_batch`` decode tokens over
        ``decode_context_tokens`` tokens of KV cache in total."""
        m = prefill_tokens + decode_batch
        if m == 0:
            return 0.0
        self.rows_ok(m)
        t = self._fixed[m] + self._head[min(decode_batch + prefill_seqs, self.max_rows)]
        t += self.decode_slope_s * decode_context_tokens
        if prefill_tokens:
            t += max(self._attn_flop_s * prefill_pairs, self._kv_s * prefill_kv_tokens)
        return t

    def decode_run(self, batch: int, context0: float) -> DecodeRun:
        """The affine cost of decode-only iterations of ``batch`` sequences starting at ``context0`` tokens."""
        self.rows_ok(batch)
        return DecodeRun(self._fixed[batch] + self._head[batch], self.decode_slope_s, batch, context0)


def chunk_attention(prefill_tokens: ArrayLike, prefix_tokens: ArrayLike) -> tuple[float, float]:
    """(causal query-key pairs, KV tokens touched) of chunks of ``prefill_tokens`` after ``prefix_tokens`` each."""
    p = np.asarray(prefill_tokens, dtype=float)
    c0 = np.asarray(prefix_tokens, dtype=float)
    return float(np.sum(p * (c0 + (p + 1) / 2))), float(np.sum(c0 + p))


def iteration_time_s(spec: TransformerSpec, *, gpu: Accelerator, system: System | None = None,
                     cluster: Cluster | None = None, tp: int = 1,
                     pp: int = 1, ep: int = 1, prefill_tokens: ArrayLike = 0, prefill_prefix_tokens: ArrayLike = 0,
                     decode_batch: int = 0, decode_context_tokens: ArrayLike = 0, precision: str = "bf16",
                     kv_precision: str | None = None, engine: str | EngineProfile | None = "vllm",
                     cal: Calibration = DEFAULT_CALIBRATION) -> float:  # fmt: skip
    """Seconds of one engine iteration on one replica of ``tp · pp`` GPUs.

    ``prefill_tokens``: prompt tokens scheduled in this iteration, an int or one chunk size per sequence;
    ``prefill_prefix_tokens``: tokens already in each of those sequences' KV cache (same shape, default 0);
    ``decode_batch``: sequences decoding one token each; ``decode_context_tokens``: their KV-cache lengths, the
    sum or an array of ``decode_batch`` lengths. ``system``: the network (default: ``system_of(gpu, cluster=...)``).
    The engine profile names the per-iteration overhead, HBM fraction
    and GEMM factor (``estimate.engines``; None: the calibration's, ``engines.calibrated_engine``);
    ``kv_precision`` defaults to the engine's choice for ``precision``.
    """
    chunks = np.atleast_1d(np.asarray(prefill_tokens, dtype=float))
    prefix = np.broadcast_to(np.asarray(prefill_prefix_tokens, dtype=float), chunks.shape)
    if np.any(chunks < 0) or np.any(prefix < 0) or decode_batch < 0:
        raise InputError(f"prefill_tokens={prefill_tokens!r}, prefill_prefix_tokens={prefill_prefix_tokens!r} and "
                         f"decode_batch={decode_batch} must be non-negative")  # fmt: skip
    ctx = np.asarray(decode_context_tokens, dtype=float)
    if ctx.ndim and ctx.size != decode_batch:
        raise InputError(f"decode_context_tokens has {ctx.size} lengths for decode_batch={decode_batch}")
    p_total = int(chunks.sum())
    model = IterationModel(spec, gpu=gpu, system=system, cluster=cluster, tp=tp, pp=pp, ep=ep,
                           precision=precision, kv_precision=kv_precision, engine=engine, cal=cal,
                           max_rows=max(p_total + decode_batch, 1))  # fmt: skip
    pairs, kv_tok = chunk_attention(chunks, prefix)
    return model.time_s(prefill_tokens=p_total, decode_batch=int(decode_batch), decode_context_tokens=float(ctx.sum()),
                        prefill_pairs=pairs, prefill_kv_tokens=kv_tok,
                        prefill_seqs=int(np.count_nonzero(chunks)))  # fmt: skip
