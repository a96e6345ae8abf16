"""Serving-engine profiles: the few numbers by which vLLM, SGLang, TensorRT-LLM and llama.cpp differ per iteration.

A profile is a small named data entry (a registry, as Vidur's ``utils/base_registry.py``), chosen by name:
- ``iteration_overhead_s``: fixed time per engine iteration outside the forward pass (scheduler, sampling,
  detokenisation hand-off, launch gaps left by CUDA graphs);
- ``hbm_fraction``: fraction of the datasheet HBM bandwidth the engine's decode kernels reach (GEMV weight
  streaming, paged attention); None keeps the calibration's ``decode_memory_efficiency``;
- ``gemm_efficiency_factor``: multiplier on the calibration's GEMM efficiency (prefill-heavy iterations);
- ``quantised_kv_precision``: the KV-cache format the engine picks by default for an fp8/fp4 checkpoint;
- ``custom_all_reduce``: the engine all-reduces small activations with its own one-shot kernel inside a
  peer-to-peer domain (vLLM ``custom_all_reduce.cuh``, TensorRT-LLM ``customAllReduceKernels``, SGLang's copy of
  vLLM's): every rank reads its peers' buffers in one step instead of NCCL's 2(n − 1) ring steps;
- ``fused_elementwise``: the engine's inference kernels fuse the elementwise work (``iteration.
  fused_elementwise_values``: residual add with RMSNorm, RoPE and the KV write inside attention); False: the
  unfused count of training frameworks times the calibration's ``elementwise_factor``;
- ``frontend_latency_s``: time a request spends outside the engine loop (HTTP server, tokenisation and
  detokenisation, Triton ensemble steps), added to its TTFT and end-to-end latency; it does not use the GPU;
- ``max_num_seqs``: the engine's default cap on sequences in flight per replica, what ``serve.simulate`` runs when
  the caller states none (vLLM ``--max-num-seqs`` 256; TensorRT-LLM's ``max_batch_size``, 2048 as
  ``trtllm-build`` builds an engine by default). Under a backlog it sets the batch, and so the iteration time, the
  inter-token latency and how long a request queues before its prefill;
- ``sequence_overhead_s``: host time per sampled sequence per iteration on the engine loop's critical path
  (building the inputs, processing each sequence's output, incremental detokenisation in Python). vLLM's V0 engine
  runs that work between GPU steps, so it grows with the batch (the vLLM v0.6.0 blog, 2024-09-05, measured the GPU
  idle for much of each step from it); vLLM V1 (default from 0.8) moves output processing and detokenisation to
  another process and overlaps scheduling with the GPU step, and TensorRT-LLM's C++ batch manager and llama.cpp
  add no per-sequence Python work: 0 for every shipped profile. ``benchmarks/serve_accuracy.py`` fits it to, and applies
  it on, rows of a V0 engine (the 405B blog) only;
- ``dequantize_above_rows``: for int8 / int4 and GGUF (``q8_0`` .. ``q4_0``) weights, a GEMM of more rows than this
  runs as the engine's dequantise-then-16-bit-GEMM path: each quantised weight matrix is read, written out as fp16,
  and the fp16 copy multiplied (llama.cpp's CUDA backend: products of more than ``MMQ_MAX_BATCH_SIZE`` = 32 tokens go to
  cuBLAS on a dequantised fp16 buffer when tensor cores are used, fewer run its quantised mat-vec / MMQ kernels on
  the packed blocks). None: the engine's quantised kernels read the packed weights at every size (vLLM, SGLang,
  TensorRT-LLM).
- ``gemm_accumulate``: the accumulator of the engine's GEMMs on fp16 operands, ``"fp32"`` or ``"fp16"``. llama.cpp's
  CUDA backend runs its fp16 and dequantised GEMMs through cuBLAS with ``CUBLAS_COMPUTE_16F`` (``ggml-cuda.cu``,
  ``ggml_cuda_op_mul_mat_cublas``: src0 and src1 converted to fp16, ``cublasGemmEx(..., CUBLAS_COMPUTE_16F,
  CUBLAS_GEMM_DEFAULT_TENSOR_OP)`` on compute capability >= 7.0 unless a graph node asks for ``GGML_PREC_F32``,
  which llama.cpp does only for Phi-2's KQ; as vendored in llama-cpp-python 0.2.29, 2024-01-15): ``"fp16"``.
  vLLM, SGLang and TensorRT-LLM (cuBLAS / CUTLASS with fp32 accumulators, as PyTorch's ``torch.mm`` and every
  training framework): ``"fp32"``. It matters on GeForce parts only, which run an fp32 accumulator at half the
  fp16-accumulate rate (``catalog.gpus.Accelerator.fp16_accumulate_tflops``); bf16 MMA has only an fp32
  accumulator, so bf16 weights run the fp32-accumulate rate whatever the engine.
- ``overlaps_pipeline_stages``: with pipeline parallelism (pp > 1) the engine keeps ``pp`` micro-batches in flight,
  each on a different stage in steady state, so a replica's throughput is limited by its slowest stage while one
  micro-batch's iteration still passes all ``pp`` stages (``micro_batches_in_flight``; ``estimate.iteration`` times
  it, ``estimate.infer``, ``serve.simulate`` and ``serve.fleet`` run ``pp`` micro-batches, each with 1/pp of the KV
  cache and its own ``max_num_seqs`` / token budget). TensorRT-LLM: its PyTorch backend's
  ``PyExecutor._executor_loop_pp`` runs ``num_micro_batches = pp_size`` batches in flight, and
  ``PyTorchModelEngine.get_max_num_sequences`` is ``pp_size · max_batch_size`` (the C++
  ``TrtGptModelInflightBatching``: ``mNumMicroBatches`` = pp, the same product); vLLM: V0 builds
  ``pipeline_parallel_size`` schedulers ("virtual engines", ``LLMEngine.__init__``), each with ``num_gpu_blocks //
  pipeline_parallel_size`` KV blocks (``Scheduler.__init__``), and V1 keeps ``max_concurrent_batches =
  pipeline_parallel_size`` batches queued; SGLang: ``Scheduler.event_loop_pp`` cycles ``pp_size`` micro-batches. All
  True. llama.cpp (``--split-mode layer``): one batch passes the GPUs in turn; it pipelines only the micro-batches
  (``n_ubatch``) of one large prompt batch (PR #6017, ``GGML_SCHED_MAX_COPIES``), and a decode batch is one
  micro-batch: False (the stages run one after another).
- ``moe_dispatch``: the kernels that group an MoE layer's rows by expert and restore token order around its
  grouped GEMMs, a key of ``estimate.moe.MOE_DISPATCH`` whose docstring gives each one's bytes and source:
  TensorRT-LLM's CUTLASS fused MoE ``"expand-finalize"`` (the expand quantises the copies to the GEMM input's
  format), vLLM's and SGLang's Triton ``fused_moe`` ``"gather"`` (rows gathered inside the GEMM, a ``moe_sum``
  combine), llama.cpp's ``mul_mat_id`` ``"copy-rows-f32"``; default ``"permute"`` (Megatron-Core's bf16 permute /
  unpermute, what training runs). vLLM's FP4 MoE on Blackwell (FlashInfer's port of TensorRT-LLM's kernels) and
  SGLang's DeepEP path are other kernels, not modelled.

Each entry names the rows of ``validation/reference`` it is grounded in (``serving_engine.csv`` in
``components/``, ``infer_measured.csv``) and how its values were chosen; ``benchmarks/serve_accuracy.py`` scores them.
Entries without measured rows are ``uncalibrated``: their values are an assumption, stated in ``note``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from scaleright.errors import InputError, UnknownNameError

if TYPE_CHECKING:
    from scaleright.estimate.calibration import Calibration

__all__ = ["ENGINES", "EngineProfile", "GEMM_ACCUMULATES", "SEQUENCE_OVERHEAD_BOUNDS_S", "calibrated_engine",
           "engine_names", "get_engine"]

# the physical range of ``sequence_overhead_s`` (seconds per sampled sequence per iteration): none (an engine loop
# that overlaps its host work with the GPU step) to 1 ms (a Python loop's per-sequence work); the one home of the
# range that ``bench.calibrate_serving`` fits within, ``benchmarks/serve_accuracy.py`` too, and that a stored
# profile (``estimate.engine_store``) must lie in
SEQUENCE_OVERHEAD_BOUNDS_S = (0.0, 1e-3)
GEMM_ACCUMULATES = ("fp32", "fp16")  # the accumulators an engine's fp16-operand GEMMs may use


@dataclass(frozen=True)
class EngineProfile:
    """One serving engine's per-iteration factors."""

    name: str  # registry key, e.g. "vllm"
    iteration_overhead_s: float  # fixed seconds per iteration outside the forward pass
    hbm_fraction: float | None  # achievable fraction of datasheet HBM bandwidth in decode; None: calibration's
    gemm_efficiency_factor: float  # multiplier on the calibration's GEMM efficiency (1.0 = as calibrated)
    quantised_kv_precision: str  # default KV-cache format for fp8 / fp4 checkpoints
    frontend_latency_s: float  # seconds per request outside the engine loop (added to TTFT and end-to-end)
    custom_all_reduce: bool  # one-shot all-reduce of small activations inside a peer-to-peer domain
    fused_elementwise: bool  # fused norm / RoPE / activation kernels (see the module docstring)
    status: str  # "fitted" (values chosen against the rows in grounded_in) or "uncalibrated" (assumed)
    grounded_in: tuple[str, ...]  # reference rows the values rest on (file: selection)
    note: str  # how the values were chosen, and caveats
    max_num_seqs: int = 256  # default cap on sequences in flight per replica (see the module docstring)
    sequence_overhead_s: float = 0.0  # CPU seconds per sampled sequence per iteration (see the module docstring)
    dequantize_above_rows: int | None = None  # quantised GEMMs of more rows dequantise to fp16 first (docstring)
    gemm_accumulate: str = "fp32"  # accumulator of its fp16-operand GEMMs: "fp32" or "fp16" (see the docstring)
    overlaps_pipeline_stages: bool = True  # pp micro-batches in flight over the pp stages (see the docstring)
    moe_dispatch: str = "permute"  # MoE dispatch / combine kernels: a key of estimate.moe.MOE_DISPATCH (docstring)

    def __post_init__(self) -> None:
        if self.gemm_accumulate not in GEMM_ACCUMULATES:
            raise InputError(f"engine {self.name!r}: gemm_accumulate={self.gemm_accumulate!r} not allowed; "
                             f"allowed: {', '.join(GEMM_ACCUMULATES)}")  # fmt: skip
        from scaleright.estimate.moe import MOE_DISPATCH

        if self.moe_dispatch not in MOE_DISPATCH:
            raise InputError(f"engine {self.name!r}: moe_dispatch={self.moe_dispatch!r} not allowed; "
                             f"allowed: {', '.join(MOE_DISPATCH)}")  # fmt: skip

    def micro_batches_in_flight(self, pp: int) -> int:
        """Micro-batches the engine keeps in flight over ``pp`` pipeline stages: ``pp`` when it overlaps them, else 1
        (1 at pp = 1 either way)."""
        return pp if self.overlaps_pipeline_stages else 1

    def kv_precision_for(self, precision: str) -> str:
        """The KV-cache format this engine uses by default for weights in ``precision``."""
        if precision == "fp32":
            return "fp32"
        if precision in ("fp8", "fp4"):
            return self.quantised_kv_precision
        return "fp16" if precision == "fp16" else "bf16"


ENGINES: dict[str, EngineProfile] = {
    p.name: p
    for p in (
        EngineProfile(
            name="vllm", iteration_overhead_s=4.5e-3, hbm_fraction=0.425, gemm_efficiency_factor=1.0,
            quantised_kv_precision="bf16", frontend_latency_s=0.0,
            custom_all_reduce=True, fused_elementwise=False, moe_dispatch="gather", status="fitted",
            grounded_in=(
                ("components/serving_engine.csv: vLLM (ROCm) benchmark_latency, Llama 3.1 405B FP8, 8x MI300X, "
                "batch 1-256 (derived ms per output token)"),
                "components/serving_engine.csv: vLLM (ROCm), Llama 3.1 70B FP8, 8x MI300X, batch 1-4 end-to-end",
            ),
            note="Grid fit (hbm_fraction 0.30-0.70, overhead 0.5-6 ms) of the 12 end-to-end rows, with the TP "
                 "all-reduce costed from the measured xGMI fits (one-shot custom all-reduce or RCCL, the faster): "
                 "median |error| 3.2 %, max 33 % (in-sample). "
                 "Those rows are vLLM on ROCm (MI300X), the only vLLM latency data in the reference set: the low "
                 "bandwidth fraction and the 4.5 ms per iteration are ROCm-era figures, likely pessimistic for vLLM on "
                 "CUDA with CUDA graphs. vLLM's default kv_cache_dtype 'auto' keeps bf16 for fp8 checkpoints.",
        ),
        EngineProfile(
            name="sglang", iteration_overhead_s=1.0e-3, hbm_fraction=0.60, gemm_efficiency_factor=1.0,
            quantised_kv_precision="bf16", frontend_latency_s=0.0, custom_all_reduce=True, fused_elementwise=False,
            moe_dispatch="gather", status="uncalibrated",
            grounded_in=(),
            note="No SGLang rows in the reference set. Assumed: the CUDA decode-bandwidth fraction fitted for "
                 "TensorRT-LLM (0.60) and 1 ms per iteration (SGLang's overlap scheduler hides most CPU scheduling "
                 "behind the GPU step). Treat its numbers as a scenario, not a prediction.",
        ),
        EngineProfile(
            name="trtllm", iteration_overhead_s=0.5e-3, hbm_fraction=0.575, gemm_efficiency_factor=1.0,
            quantised_kv_precision="fp8", frontend_latency_s=4e-3, custom_all_reduce=True, fused_elementwise=True,
            max_num_seqs=2048, moe_dispatch="expand-finalize", status="fitted",
            grounded_in=(
                ("infer_measured.csv: 'Online Serving Measurements' (TensorRT-LLM 0.14 + Triton), lowest-QPS rows "
                "(mean TTFT and ITL), Llama 3.1 8B / 70B on H100 and H200"),
                "components/serving_engine.csv: TensorRT-LLM Azure ND A100/H100/H200 end-to-end tables",
            ),
            note="Grid fit (hbm_fraction 0.55-0.65 x overhead 0.25-1.5 ms) of mean ITL, TTFT (finite QPS) and "
                 "output throughput of the 72 online rows, the TP all-reduce on the measured fabric fits: 0.575 / "
                 "0.5 ms, inside the grid (in-sample median 7.3 %; TTFT 7.5 %, ITL 10.9 %, throughput 6.8 %). "
                 "Elementwise traffic is the fused count (fused_elementwise): TensorRT-LLM fuses the residual add "
                 "into RMSNorm (its residual_rms_norm plugin / fused kernels), applies RoPE and writes the KV cache "
                 "inside its attention kernel (gptAttentionPlugin's fused QKV bias + RoPE) and runs the gated "
                 "activation as one kernel. At most 2048 requests in flight (max_num_seqs): trtllm-build's default "
                 "max_batch_size, the Triton rows state none other. With the fused count and a 256 cap the fit "
                 "traded ITL and TTFT for the median: the rows at QPS >= 16 (a backlog) ran a batch of at most 256 "
                 "where TensorRT-LLM runs every waiting request, so their iterations came out too short (ITL -23 to "
                 "-46 %) and their queues too long (TTFT); the unfused elementwise term, proportional to the rows, "
                 "had stood in for the longer iterations of the larger batch. Mean TTFT at QPS=2 exceeds the "
                 "prefill time by ~4 ms (Triton HTTP and the tokeniser / detokeniser ensemble steps): the frontend "
                 "latency, set by hand. ModelOpt fp8 recipes quantise the KV cache to fp8.",
        ),
        EngineProfile(
            name="llama.cpp", iteration_overhead_s=0.3e-3, hbm_fraction=0.80, gemm_efficiency_factor=1.0,
            quantised_kv_precision="fp16", frontend_latency_s=0.0, custom_all_reduce=False, fused_elementwise=False,
            dequantize_above_rows=32, gemm_accumulate="fp16", overlaps_pipeline_stages=False,
            moe_dispatch="copy-rows-f32", status="fitted",
            grounded_in=(
                ("components/serving_engine.csv: llama.cpp (CUDA backend) tg128 rows, codellama-7b F16 / Q8_0 on "
                "RTX 4090, llama 7B Q4_0 on RTX 3090 Ti (ms per token = 1000 / tokens per second)"),
                "components/serving_engine.csv: llama.cpp pp512 rows (prefill tokens per second)",
            ),
            note="Single-stream decode streams weights at ~80 % of HBM bandwidth (tg128 rows within ~15 %; Q8_0 / "
                 "Q4_0 read at their GGUF bytes, 1.0625 / 0.5625 B per weight, the head Q8_0 / Q6_K). Prefill "
                 "(pp512) is not fitted: its fp16 and dequantised GEMMs accumulate in fp16 (gemm_accumulate: cuBLAS "
                 "CUBLAS_COMPUTE_16F), which a GeForce part runs at twice its FP32-accumulate rate (RTX 4090: 330.3 "
                 "vs 165.2 dense TFLOP/s, Ada whitepaper App. A), with the ada-ad102 GEMM ceiling measured on the "
                 "L40S (0.744, at FP32 accumulate; no FP16-accumulate GEMM measurement). The three RTX 4090 pp512 "
                 "rows come out 8.6 % (F16), 12.3 % (Q8_0) and 10.9 % (Q4_0) under; at the FP32-accumulate rate "
                 "they were 44-50 % under, the F16 row needing ~145 TFLOP/s end to end, 88 % of that rate. Q8_0 / "
                 "Q4_0 prompts run the dequantise-then-fp16 path (dequantize_above_rows), which puts them 20.5 / "
                 "17.9 ms above F16 as measured (modelled 25 / 21 ms). Default KV cache f16.",
        ),
    )
}


def calibrated_engine(cal: Calibration) -> EngineProfile:
    """The engine of ``estimate infer`` and of the reference rows ``benchmarks/accuracy.py`` fits: TensorRT-LLM's
    in-flight batching (``trtllm-bench`` and Triton rows of ``infer_measured.csv``), with the calibration's fitted
    per-iteration overhead (``decode_overhead_s``) and decode HBM share (``decode_memory_efficiency``, of the
    measured STREAM ceiling) instead of a registry entry's, TensorRT-LLM's custom all-reduce, fused kernels and
    ``pp`` micro-batches in flight under pipeline parallelism (``overlaps_pipeline_stages``), and fused-MoE dispatch
    (``moe_dispatch="expand-finalize"``).
    Not in ``ENGINES``: its values follow the calibration in use (a user's ``scaleright calibrate`` profile too)."""
    return EngineProfile(
        name="calibrated", iteration_overhead_s=cal.decode_overhead_s, hbm_fraction=None, gemm_efficiency_factor=1.0,
        quantised_kv_precision="bf16", frontend_latency_s=0.0, custom_all_reduce=True, fused_elementwise=True,
        moe_dispatch="expand-finalize", status="fitted",
        grounded_in=("infer_measured.csv: TensorRT-LLM throughput and online-serving rows (benchmarks/accuracy.py)",),
        note="The calibration's decode factors, fitted jointly with the training rows; KV-cache format as the caller "
             "states (estimate infer: 16-bit unless --kv-precision).",
    )  # fmt: skip


def engine_names() -> tuple[str, ...]:
    return tuple(ENGINES)


def get_engine(name: str | EngineProfile) -> EngineProfile:
    """The profile registered as ``name``, else the one stored under ``name`` by ``calibrate --serving --name``
    (``estimate.engine_store``); a profile itself is returned as it is (callers take a name or a fitted profile).
    An unknown name lists the closest, the built-in and the stored names."""
    if isinstance(name, EngineProfile):
        return name
    if name in ENGINES:
        return ENGINES[name]
    from scaleright.estimate.engine_store import engine_choice_text, load_engine_profile, stored_engine_names

    stored = load_engine_profile(name)
    if stored is not None:
        return stored
    err = UnknownNameError("engine", name, [*ENGINES, *stored_engine_names()])
    err.args = (f"{err.args[0]}; {engine_choice_text()}",)
    raise err
