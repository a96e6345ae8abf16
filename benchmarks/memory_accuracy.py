"""Accuracy of scaleright's training-memory model (``estimate.memory.training_memory``) against published figures.

Measured peaks, each compared with what its source's counter measures (``validation.memory_cases``):

- ``memory_measured.csv``: torchtitan and torchao peak memory per GPU, the caching allocator's reserved peak
  (torchtitan logs ``torch.cuda.max_memory_reserved``), reported in GiB and converted to GB = 1e9 B, with the
  layout of the training row of the same run in ``train_measured.csv``;
- the BLOOM-176B sweeps of ``train_measured.csv``: nvidia-smi snapshots ("Mem=NNGB", read as GiB; everything the
  process holds: reserved memory, CUDA context, NCCL buffers) of layouts that ran, and the layouts that went out of
  memory ("Mem=OOM"), whose verdict (``fits``) the model must get right; a layout that ran must fit.

Every case carries the framework its run used (``validation.memory_cases.FRAMEWORKS``: torchtitan rows ``fsdp2``,
BLOOM rows ``megatron-2021`` with DeepSpeed's ZeRO-1 states), whose memory inputs ``estimate.memory.profiles``
supplies, printed per source; nothing is fitted to these rows. Formula rows (ZeRO model states, Korthikanti et al.
activation bytes, BLOOM checkpoint size) are exact checks of the model's own formulas and are printed apart.
Errors are predicted / published − 1.

Every training row that ran (it has a measured throughput, ``train_measured.csv``, every table) must fit: the model's
verdict on each, per table, with the terms of each row it refuses (``validation.memory_cases.load_ran_rows``).

The last line: ``median_pct=<median |error| over every measured row, %> oom_verdicts_right=<K>/<N>
ran_fit=<K>/<N>`` (N: the rows that went out of memory; then the training rows that ran and fit, of all that ran;
the BLOOM snapshots that ran are counted on the line before).

Rows that ran and were refused, and the terms found, each from the framework's source. 340 of 481 fit under the
plain training-row mapping, 360 once the torchtitan H100 rows are read on their 96 GB parts and every BLOOM row with
its sweep's optimizer states (``load_ran_rows``); then:

- Transformer Engine's linear layers save one quantised copy of their input under FP8 / NVFP4 (``activations
  .GEMM_INPUT_BYTES``, the ``megatron-core`` profile), not the 16-bit input: QKV, MLP and fc2 inputs at 1 B (0.5625
  B), the output projection's copy beside the attention kernel's own 16-bit output. 405B at TP4 PP16 on GB200:
  activations 136.5 -> 118.2 GB. torchao's Float8Linear (torchtitan) saves the high-precision input: no change
  there. Megatron-Bridge pretrain 29 -> 41 of 89, SFT/LoRA 6 -> 8 of 10, NeMo 24.07 10 -> 11 of 13.
- llm-foundry's flash-attn cross entropy keeps no fp32 logits (4 B per logit, ``activations.CROSS_ENTROPY``): its
  four tables 162 -> 200 of 216.
- Checked and not a change: Megatron-Core's interleaved warm-up (``schedules.py``: (pp - 1)·2 + (v - 1)·pp
  micro-batch chunks of L/(pp·v) layers, plus the one in flight) is Korthikanti's pp·(1 + (pp - 1)/(pp·v)) stage
  micro-batches exactly when pp·v divides L; Megatron-Core's SwiGLU saves its 16-bit input (gate and up, 4f B) and
  fc2 its input: the 6f of the gated-MLP term; Megatron-Bridge's recipes reduce gradients in fp32
  (``grad_reduce_in_fp32 = True``), so the 4 B main gradient stays.
- Not modelled, the rows do not say which applies: the FP8 presets of Megatron-Bridge (``mixed_precision.py``)
  set ``fp8_param_gather`` (FP8 weights, less), its NVFP4 preset does not (TE's cached quantised weights, more).
- Modelled since: Megatron-Bridge's 405B recipe counts the embedding and the loss as pipeline layers
  (``Layout.pipeline_split_embedding_loss``, set by ``validation.train_cases`` where L + 2 slots split into pp·v
  chunks and L layers do not): VP=8 on PP=16 holds 7 transformer layers on stage 0 in 8 chunks, 112
  layer-micro-batches in flight. NeMo Automodel rows that state no checkpointing get the least that fits
  (``train_cases._checkpointing_that_fits``): their verdict here follows from that choice and checks nothing.

The 48 still refused (``ran_fit=433/481``): 25 Megatron-Bridge / NeMo layouts whose states and activations alone
exceed the device as stated (no recompute), so the run did something the row does not state (recompute, offload,
FP8 weights); 7 Megatron ones and 16 llm-foundry boundary micro-batches that the allocator's reserve tips over by
under 10 % and 5 %
(``tests/test_memory_ran_fit.py`` marks each with its reason).

    python benchmarks/memory_accuracy.py

The one verdict missed: BLOOM-candidate 206B (train_measured.csv line 497; 82 layers, hidden 14336, 128 heads, tp4
pp12 dp8 mb2, BF16_Optimizer, full recompute) went out of memory on 80 GiB (85.9 GB); the model gives 71.2 GB, and
71.9 GB measured / 70.5 GB predicted for 203B (line 491; 94 layers, hidden 13312, same layout), which ran. Calling
it would take 14.7 GB more on the 206B stage while the 203B stays under 85.9 GB; no physical term found differs
by more than about 1 GB between the two, so the model is left as it is. Ruled out, with the model's own terms:

- Pipeline partitioning (DeepSpeed 0.6.5 ``PipelineModule._partition_layers`` and ``runtime/utils.py``, whose
  ``partition_uniform`` / ``partition_balanced`` were replayed on GPTModelPipe's layer list: one embedding, the
  blocks, the final norm and the tied embedding; ``parameters`` is PipelineModule's default, Megatron-DeepSpeed's
  GPTModelPipe passes ``type:transformer`` as we recall its source (not re-checked here); the "Rebalancing layers"
  sweeps all have L + 2 divisible by pp, 82, 94 and 106 over 12, 100 over 6, as ``type:transformer|embedding``
  balances). Fullest stage, 206B / 203B: ``type:transformer`` 7 layers + embedding / 8 +
  embedding, 71.2 / 70.5 GB (the model's assumption, ceil(L/pp) layers plus the embedding); ``parameters`` and
  ``type:transformer|embedding`` 6 + E / 7 + E, 63.5 / 63.7 GB; ``uniform`` 7 / 8 layers on stage 1, 61.2 / 61.1
  GB. No method gives the 206B a heavier stage than the 203B; per GPU its states are 5.22e9 parameters against
  5.09e9 (+1.2 GB at 9.5 B each) and its kept activations 7 × 14336 against 8 × 13312 layer-widths (-0.4 GB).
  (Under the balanced methods the 203B would be predicted 11 % under its measurement: the rows look like
  ``type:transformer``.)
- The last stage: the tied output embedding and the fp32 logits (250,880 / 4 vocabulary × 4096 tokens × 6 B =
  1.5 GB, the same for both models) sit beside one micro-batch of activations, not twelve: lower than stage 0
  under every method.
- First iteration against the 2nd-iteration snapshot: DeepSpeed 0.6.5's PipelineEngine and BF16_Optimizer never
  call ``torch.cuda.empty_cache``, so the reserved memory nvidia-smi shows at iteration 2 contains iteration 1's
  peak; BF16_Optimizer allocates Adam's states at construction (``initialize_optimizer_states``), so the first step
  adds nothing later steps do not hold.
- BF16_Optimizer's buffers (``bf16_optimizer.py``): flat 16-bit weights (2 B), 16-bit ``param.grad`` cleared before
  each backward (2 B), the full flat fp32 gradient buffer (4 B), fp32 master and moments over dp (12/8 B): the
  model's 9.5 B per parameter; the gradient all-reduce (``_bf16_reduce_grads``) works on that flat buffer in
  place. Per parameter, so it separates the two layouts by the same 2.5 %.
- The allocator: at GMLake's worst reported fragmentation (33 %, against the 15 % average used) the 206B's reserve
  grows from 4.5 to 12.4 GB: 79.2 GB, still under 85.9 GB, and it would grow the 203B's alike.
- Its siblings agree with the model: 178B (the same 82 layers at hidden 13312, same layout) read 60-63 GiB, 176B
  (hidden 14336, 70 layers) 59-60 GiB, 195B 65-67 GiB; interpolated, the 206B stage would sit near 67 GiB.

What went out of memory there is not a steady-state term of this model (the chronicles record no cause).

The torchtitan Llama 3.1 70B rows on 256 H100 (lines 12 and 13: FSDP32 × TP8 with sequence parallelism, full AC,
Float8, torch.compile per block, s 8192, local batch 16) were 22 % and 17 % under (60.1 GB against 77.2 and 72.6):
the loss's moment, the step's peak, lacked two terms of DTensor's TP plan, now modelled (``profiles.MemoryProfile
.dtensor_tp``). The loss runs in PyTorch's ``loss_parallel()`` on vocab-sharded fp32 logits, whose backward
(``_nll_loss_and_log_softmax_backward``: saved log-softmax, ``zeros_like`` gradient, ``exp`` and their sum) holds
16 B per local logit, not the 12 of plain ``F.cross_entropy`` (+8.4 GB here: 131,072 tokens × 16,032 vocabulary
per rank; measured on PyTorch 2.13 on CPU with a one-rank mesh, by sampling the resident set: 14.0 B at the
forward, 16.0 at the backward); the output head ``ColwiseParallel(input_layouts=Shard(1))`` saves its all-gathered
input whole (s·b·h·2 B = 2.1 GB), and the final norm its sequence-parallel input (0.27 GB). Now -5.6 % and +0.4 %
(72.8 GB). Considered and ruled out, with this layout's numbers (b·s·h = 1.07e9 values):

- The kept block inputs are the sequence-parallel shards (b·s·h·2/8 = 0.27 GB a layer, 21.5 GB for 80): unsplit
  they would be 172 GB, which does not fit in 96 GB, so the runs themselves confirm the split.
- A block's recompute and backward under TP: the all-gathered Float8 inputs of wq/wk/wv and w1/w3 (1.07 GB each),
  w1/w3/SiLU/product outputs (0.94 GB each), a row-parallel partial sum (2.15 GB) and under vanilla TP its
  chunk-and-cat copy before the reduce-scatter (``_functional_collectives.reduce_scatter_single``:
  ``_chunk_or_narrow_cat`` when ``scatter_dim != 0``, +2.15 GB) come to at most about 13 GB: 21.5 + 13 GB is under
  the loss's moment (57.5 GB of activations), so they are not at the peak in either row.
- FSDP2's prefetch of the next layer's unsharded bf16 weights: 70.6e9 / 80 / 8 × 2 B = 0.22 GB a layer.
- Async TP's symmetric-memory workspace (``_symmetric_memory.get_symm_mem_workspace``,
  ``empty_strided_p2p``) is not the caching allocator's and so not in ``max_memory_reserved``.

The pair difference (the same layout, 2D 77.2 GB against 2D + AsyncTP 72.6 GB) stays unexplained by the model,
which predicts both alike. Async TP changes only the compiled blocks (Inductor's micro-pipeline pass), whose
tensors are not at the loss's peak, so the 4.6 GB are reserved-but-unallocated memory, not live tensors. A
candidate is the allocator's cache: vanilla TP's 2.15 GB chunk-and-cat copies leave cached 2.15 GB segments that the
loss's 4.2-8.4 GB tensors cannot reuse, and two of them are 4.3 GB; async TP's fused matmul-reduce-scatter writes
one stacked partial without that copy. It is history-dependent fragmentation, with no published figure to put in
the model beyond the GMLake average it uses, so it is left out.

The torchao B200 rows (lines 22-25, Llama 3 8B, FSDP2 over 8, op SAC, torch.compile, mb 1) were 30 % high. Their
counter is the reserved peak (torchtitan 0.1.0 ``components/metrics.py`` logs ``reserved_bytes.all.peak`` as
"memory: ... GiB"), so reading them as ``max_memory_allocated`` is not the explanation; three terms were over-counted
and are now modelled: a compiled block keeps only what backward reads (``activations``, ``compile_blocks``: no w2
output, -2.1 GB), FSDP2's sharded gradients do not exist at the forward's end (``states``, ``grads_in_forward``:
-4.0 GB) and the loss never meets a block's recompute (-0.6 GB), each with its share of the allocator's reserve.
They stay 8 % high. Float8 / MX training shows no extra persistent state to remove (the four rows, bf16 among
them, read 33.4-33.9 GiB). torchtitan's launch script (``run_train.sh``, not in its wheel, so not re-checked here)
sets ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``, which would lower the reserve, but no published
fragmentation figure exists to put in the model, and a zero reserve would put the H100 rows 15 % under.
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

# The repository root on sys.path, so that `python3 benchmarks/<this>.py` imports the validation/ package (the
# reference data and its mapping to model inputs; not part of the installed wheel).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import validation as ref
from validation.memory_cases import MemoryCase, load_bloom_cases, load_ran_rows
from validation.predict import memory_breakdown

PARTS = ("weights", "gradients", "optimizer", "gathered", "activations", "overhead")


def _stats(errs: list[float]) -> str:
    a = np.abs(errs)
    return (f"median |error| {100 * np.median(a):.1f}%  (p90 {100 * np.percentile(a, 90):.1f}%, bias "
            f"{100 * np.median(errs):+.1f}%, {len(errs)} rows)")  # fmt: skip


def _row(c: MemoryCase) -> tuple[float, str]:
    m = memory_breakdown(c)
    pred = m.reserved_gb if c.counter == "reserved" else m.total_gb
    split = "/".join(f"{m.as_dict()[k]:.1f}" for k in PARTS)
    return pred, split


def measured_rows() -> dict[str, list[float]]:
    cases, _, skipped = ref.load_memory_cases()
    print("Measured peak memory per GPU (memory_measured.csv; the allocator's reserved peak)")
    print(f"  {'line':>4s} {'measured':>9s} {'predicted':>9s} {'error':>7s}  run  [{'/'.join(PARTS)} GB]")
    sources: dict[str, list[float]] = defaultdict(list)
    for c in cases:
        pred, split = _row(c)
        e = pred / c.measured_gb - 1
        sources[_source(c)].append(e)
        print(f"  {c.line:4d} {c.measured_gb:8.1f}G {pred:8.1f}G {100 * e:+6.1f}%  {c.label[:90]}  [{split}]")
    for s in skipped:
        if s.reason.startswith("no training row"):
            print(f"  {s.line:4d}  skipped: {s.reason}")
    print("  units: " + "; ".join(sorted({c.unit_note for c in cases})))
    print("  frameworks: " + _frameworks(cases))
    return dict(sources)


def _frameworks(cases: list[MemoryCase]) -> str:
    """The framework profiles and row-level overrides the cases ran with, counted."""
    counts: dict[str, int] = defaultdict(int)
    for c in cases:
        extra = [f"{k} {v}" for k, v in (("states", c.states), ("cross-entropy", c.cross_entropy)) if v]
        counts[c.framework + (f" ({', '.join(extra)})" if extra else "")] += 1
    return "; ".join(f"{k}: {n} rows" for k, n in sorted(counts.items()))


def _source(c: MemoryCase) -> str:
    """The publication a memory_measured.csv row comes from, for per-source figures."""
    if "B200" in c.group:
        return "torchao B200 (MX formats README, 2025)"
    if c.group == "Results":
        return "torchtitan H200 (Trainy / WhiteFiber, 2025)"
    return "torchtitan H100 (benchmarks, Dec 2024)"


def bloom_rows() -> tuple[list[float], list[MemoryCase], list[bool], list[bool]]:
    cases = load_bloom_cases()
    print("\nBLOOM-176B sweeps (train_measured.csv; nvidia-smi snapshots, Mem=NNGB read as GiB; Mem=OOM: went out "
          "of memory)")  # fmt: skip
    print(f"  {'line':>4s} {'measured':>9s} {'predicted':>9s} {'error':>7s} verdict  run  [{'/'.join(PARTS)} GB]")
    errs, oom_right, ran_fit = [], [], []
    for c in cases:
        m = memory_breakdown(c)
        pred, split = _row(c)
        if c.outcome == "oom":
            right = m.fits is False
            oom_right.append(right)
            verdict = "OOM ok " if right else "OOM MISSED"
            print(f"  {c.line:4d} {'OOM':>9s} {pred:8.1f}G {'':>7s} {verdict}  {c.label[:90]}  [{split}]")
            continue
        e = pred / c.measured_gb - 1
        errs.append(e)
        ran_fit.append(bool(m.fits))
        verdict = "fits   " if m.fits else "REFUSED"
        print(f"  {c.line:4d} {c.measured_gb:8.1f}G {pred:8.1f}G {100 * e:+6.1f}% {verdict}  {c.label[:90]}  "
              f"[{split}]")  # fmt: skip
    print("  frameworks: " + _frameworks(cases))
    return errs, cases, oom_right, ran_fit


def formula_rows() -> None:
    _, formulas, skipped = ref.load_memory_cases()
    print("\nFormula rows (exact checks of the model's own formulas)")
    for f in formulas:
        e = f.predicted / f.published - 1
        print(f"  {f.line:4d} {f.published:12.6g} {f.predicted:12.6g} {f.unit:13s} {100 * e:+7.3f}%  {f.label}  "
              f"({f.how})")
    for s in skipped:
        if not s.reason.startswith("no training row"):
            print(f"  {s.line:4d}  skipped: {s.reason}")


def ran_rows() -> tuple[int, int]:
    """Every training row that ran (``validation.memory_cases.load_ran_rows``): a layout that ran must fit. Prints
    the count per table and each row the model refuses, with its terms."""
    rows = load_ran_rows()
    print("\nTraining rows that ran (train_measured.csv, every table): the model's verdict on the row's GPU")
    groups: dict[str, list] = defaultdict(list)
    for r in rows:
        groups[r.group].append(r)
    for g, rs in groups.items():
        print(f"  {g:40s} fit {sum(bool(r.memory.fits) for r in rs):3d}/{len(rs)}")
        for r in rs:
            if not r.memory.fits:
                split = "/".join(f"{r.memory.as_dict()[k]:.1f}" for k in PARTS)
                print(f"    {r.line:4d} REFUSED {r.memory.total_gb:6.1f}G > {r.gpu_memory_gb:5.1f}G  {r.label[:90]}  "
                      f"[{split}]")  # fmt: skip
    fit = sum(bool(r.memory.fits) for r in rows)
    return fit, len(rows)


def main() -> int:
    t0 = time.time()
    sources = measured_rows()
    bloom_errs, _, oom_right, ran_fit = bloom_rows()
    sources["BLOOM-176B nvidia-smi (bigscience chronicles)"] = bloom_errs
    formula_rows()
    all_fit, all_n = ran_rows()
    print("\nPer source (out of sample: no parameter is fitted to any of these rows)")
    for k, v in sources.items():
        print(f"  {k:48s} {_stats(v)}")
    every = [e for v in sources.values() for e in v]
    print(f"  {'all measured rows':48s} {_stats(every)}")
    print(f"\nran_rows_fit={sum(ran_fit)}/{len(ran_fit)}  ({time.time() - t0:.1f} s)")
    print(f"median_pct={100 * np.median(np.abs(every)):.1f} oom_verdicts_right={sum(oom_right)}/{len(oom_right)} "
          f"ran_fit={all_fit}/{all_n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
