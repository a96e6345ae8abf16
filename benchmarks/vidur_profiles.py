"""Vidur profiling data sets made from scaleright's own per-operation cost model (used by ``serve_speed.py``).

Vidur (microsoft/vidur 0.0.26) times an iteration from tables of per-operation GPU times it fetches from the
Hugging Face Hub (``SklearnExecutionTimePredictor._get_input_files``: ``mlp.csv.xz`` and ``attention.csv.xz`` with
a ``config.json`` naming ``model`` and ``device_sku``; ``all_reduce.csv.xz`` and ``send_recv.csv.xz`` with one
naming ``sku``), fits a regressor per operation and looks its predictions up while it simulates. This module
writes those files locally, in the layout and columns Vidur's loaders read (``_load_compute_df``,
``_load_attention_df``, ``_load_all_reduce_df``, ``_load_send_recv_df``; times in ms, column
``time_stats.<op>.median``), from **scaleright's** model: the tables are synthetic, so Vidur run on them predicts
scaleright's latencies, not independent ones. ``serve_speed.py`` compares only simulator speed.

Each operation is the term of ``estimate.iteration.IterationModel`` (vLLM profile, bf16, ``DEFAULT_CALIBRATION``)
for one layer, on ``m`` rows and tensor-parallel size ``tp``:

- ``attn_pre_proj`` / ``attn_post_proj``: the q/k/v and output-projection GEMMs; ``mlp_up_proj`` /
  ``mlp_down_proj``: gate+up and down GEMMs (``layer.gemm_time`` with the model's own GEMM arguments);
- ``input_layernorm``, ``post_attention_layernorm`` (2h values each), ``add`` (both residual adds, 6h: Vidur's
  ``ExecutionTime`` adds ``add`` once per layer), ``mlp_act`` (3f/tp), ``attn_rope`` (rotary 2(q + kv), the K/V
  copy 2kv and the attention-output re-layout 2o, over tp): ``layer.elementwise_values`` split into Vidur's
  columns, times the calibration's ``elementwise_factor``, at the streaming-kernel bandwidth. Vidur 0.0.26's
  ``ExecutionTime.total_time`` does not add ``attn_kv_cache_save``, so that column is left out (its loader
  fills 0) and the K/V copy sits in ``attn_rope``;
- ``attn_prefill`` (kv_cache_size, prefill_chunk_size) and ``attn_decode`` (batch_size, kv_cache_size): the
  model's attention core (``IterationModel.times_s`` with and without the chunk's attention; ``decode_slope_s``
  per context token), divided by the layer count;
- ``all_reduce`` (num_workers 2, 4, 8 in one node): the faster of NCCL and vLLM's one-shot all-reduce, as
  ``IterationModel`` takes it; ``send_recv`` (2 GPUs in one node): a p2p transfer; both on the GPU's default
  system from the measured collective fits. (Cross-node rows, ``devices_per_node`` 1, are not written.)

Not in Vidur 0.0.26's tables, so absent from its iterations: the engine's per-iteration overhead and the output
head. ``check_split`` (run by ``write_profiles`` at tp 1) asserts that the per-layer columns times the layers plus
that overhead add back up to ``IterationModel.fixed_s``, so the split stays the model's own. Needs no pandas
(csv + lzma).
"""

from __future__ import annotations

import csv
import json
import lzma
from pathlib import Path

import numpy as np

from scaleright.catalog.gpus import Accelerator
from scaleright.estimate.calibration import DEFAULT_CALIBRATION
from scaleright.estimate.collectives import collective_time_s
from scaleright.estimate.comm import scaled_fits
from scaleright.estimate.iteration import IterationModel, chunk_attention, one_shot_all_reduce_s
from scaleright.estimate.layer import gemm_time
from scaleright.workload.spec import TransformerSpec

# vidur/config/model_config.py, Llama38BModelConfig (0.0.26): the fields _load_compute_df / _load_attention_df
# filter the rows on; scaleright's llama-3.1-8b has the same shapes (3.1 changed rope scaling and context only)
VIDUR_MODEL = "meta-llama/Llama-3-8B"
VIDUR_LLAMA3_8B = {"n_head": 32, "n_kv_head": 8, "n_embd": 4096, "n_expanded_embd": 14336, "vocab_size": 128256,
                   "use_gated_mlp": True, "num_layers": 32}  # fmt: skip
VIDUR_DEVICE, VIDUR_NETWORK_DEVICE = "h100", "h100_dgx"  # ReplicaConfig.device / network_device defaults
BLOCK_SIZE = 16  # CacheConfig.block_size default: _load_attention_df keeps rows of this block size
KV_GRANULARITY = 256  # kv_cache_prediction_granularity default: the kv sizes Vidur predicts on
CHUNK_STEP = 32  # Vidur predicts prefill attention on chunks 32, 64, ... (rounded up to 32)
COMPUTE_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj", "mlp_act", "input_layernorm",
               "post_attention_layernorm", "attn_rope", "add")  # _train_general_models' model_names
MLP_KEYS = ("n_head", "n_kv_head", "n_embd", "n_expanded_embd", "vocab_size", "use_gated_mlp", "num_tokens",
            "num_tensor_parallel_workers")  # fmt: skip
ATTN_KEYS = ("n_embd", "n_q_head", "n_kv_head", "block_size", "num_tensor_parallel_workers", "max_model_len",
             "batch_size", "prefill_chunk_size", "kv_cache_size", "is_prefill", "attention_backend")  # fmt: skip
NET_KEYS = ("rank", "num_workers", "size", "collective", "devices_per_node", "max_devices_per_node")


def _model(spec: TransformerSpec, gpu: Accelerator, tp: int) -> IterationModel:
    return IterationModel(spec, gpu=gpu, tp=tp, engine="vllm", precision="bf16", cal=DEFAULT_CALIBRATION, max_rows=0)


def compute_op_times_s(spec: TransformerSpec, gpu: Accelerator, rows: np.ndarray, *, tp: int = 1
                       ) -> dict[str, np.ndarray]:  # fmt: skip
    """Seconds per layer of each of Vidur's general operations on ``rows`` rows (module docstring)."""
    it = _model(spec, gpu, tp)
    if it.engine.fused_elementwise:
        raise ValueError(f"engine {it.engine.name!r} fuses its elementwise kernels: Vidur's per-op split assumes not")
    m = np.asarray(rows, dtype=float)
    g = it._gemm  # the model's own GEMM arguments (read only: one home for the roofline set-up)
    h, q, kv, f = spec.hidden, spec.q_dim, spec.kv_dim, float(spec.ffn_hidden)
    kv_tp = max(kv / tp, spec.head_dim)
    per_value_s = DEFAULT_CALIBRATION.elementwise_factor * it._act / it._stream_hbm
    values = {"input_layernorm": 2 * h, "post_attention_layernorm": 2 * h, "add": 6 * h, "mlp_act": 3 * f / tp,
              "attn_rope": (2 * (q + kv) + 2 * kv + 2 * q) / tp}  # fmt: skip
    out = {"attn_pre_proj": gemm_time(m, h, q / tp + 2 * kv_tp, **g), "attn_post_proj": gemm_time(m, q / tp, h, **g),
           "mlp_up_proj": gemm_time(m, h, (2 if spec.gated_mlp else 1) * f / tp, **g),
           "mlp_down_proj": gemm_time(m, f / tp, h, **g)}  # fmt: skip
    out |= {k: m * v * per_value_s for k, v in values.items()}
    return {k: np.asarray(v, dtype=float) for k, v in out.items()}


def check_split(spec: TransformerSpec, gpu: Accelerator, rows: np.ndarray, *, tp: int = 1) -> float:
    """Largest relative gap between layers × Σ per-op time + overhead and ``IterationModel.fixed_s`` (tp 1, pp 1:
    no collective in ``fixed_s``); raises if it exceeds 1e-9."""
    if tp != 1:
        raise ValueError("check_split covers tp 1 (fixed_s adds the all-reduce for tp > 1)")
    it = _model(spec, gpu, tp)
    ops = compute_op_times_s(spec, gpu, rows, tp=tp)
    total = spec.layers * sum(ops.values()) + it.engine.iteration_overhead_s
    ref = it.fixed_s(rows)
    gap = float(np.max(np.abs(total - ref) / ref))
    if gap > 1e-9:
        raise AssertionError(f"Vidur per-op split differs from IterationModel.fixed_s by {gap:.2e} (relative)")
    return gap


def _write_xz_csv(path: Path, header: list[str], rows: list[list[object]]) -> None:
    with lzma.open(path, "wt", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)


def _check_spec(spec: TransformerSpec) -> dict[str, object]:
    mine = {"n_head": spec.heads, "n_kv_head": spec.kv_heads, "n_embd": spec.hidden,
            "n_expanded_embd": spec.ffn_hidden, "vocab_size": spec.vocab, "use_gated_mlp": spec.gated_mlp,
            "num_layers": spec.layers}  # fmt: skip
    if mine != VIDUR_LLAMA3_8B:
        raise ValueError(f"{spec.name} has shapes {mine}; Vidur's {VIDUR_MODEL} has {VIDUR_LLAMA3_8B}")
    return mine


def write_profiles(spec: TransformerSpec, gpu: Accelerator, out: Path, *, tp: int = 1, max_tokens: int = 8192,
                   max_batch: int = 256, max_kv: int = 8192, max_chunk: int = 4096,
                   max_model_len: int = 4096) -> tuple[Path, Path]:  # fmt: skip
    """Write ``out/compute`` (config.json, mlp.csv.xz, attention.csv.xz) and ``out/network`` (config.json,
    all_reduce.csv.xz, send_recv.csv.xz); return the two folders. Rows: token counts 1..8 and every 8th up to
    ``max_tokens`` (Vidur looks its linear layers up at counts rounded up to 8); decode batches 1..``max_batch``
    × kv sizes 0..``max_kv`` every 256; prefill chunks 32..``max_chunk`` every 32 × the same kv sizes."""
    dims = _check_spec(spec)
    it = _model(spec, gpu, tp)
    compute, network = out / "compute", out / "network"
    compute.mkdir(parents=True, exist_ok=True)
    network.mkdir(parents=True, exist_ok=True)
    provenance = ("synthetic: per-operation times from scaleright's IterationModel (vllm profile, bf16, "
                  f"DEFAULT_CALIBRATION) for {spec.name} on {gpu.id}, not measurements")  # fmt: skip
    (compute / "config.json").write_text(json.dumps({"model": VIDUR_MODEL, "device_sku": VIDUR_DEVICE,
                                                     "source": provenance}, indent=1))  # fmt: skip
    (network / "config.json").write_text(json.dumps({"sku": VIDUR_NETWORK_DEVICE, "source": provenance}, indent=1))

    tokens = np.unique(np.concatenate([np.arange(1, 9), np.arange(8, max_tokens + 1, 8)]))
    if tp == 1:
        check_split(spec, gpu, tokens)
    ops = compute_op_times_s(spec, gpu, tokens, tp=tp)
    fixed = [dims["n_head"], dims["n_kv_head"], dims["n_embd"], dims["n_expanded_embd"], dims["vocab_size"],
             dims["use_gated_mlp"]]  # fmt: skip
    _write_xz_csv(compute / "mlp.csv.xz", [*MLP_KEYS, *(f"time_stats.{k}.median" for k in COMPUTE_OPS)],
                  [[*fixed, int(t), tp, *(float(ops[k][i]) * 1e3 for k in COMPUTE_OPS)]
                   for i, t in enumerate(tokens)])  # fmt: skip

    L = spec.layers
    kvs = np.arange(0, max_kv + 1, KV_GRANULARITY)
    head = [spec.hidden, spec.heads, spec.kv_heads, BLOCK_SIZE, tp, max_model_len]
    rows: list[list[object]] = []
    for b in range(1, max_batch + 1):  # decode: one query token per sequence over kv_cache_size tokens each
        rows += [[*head, b, 0, int(k), False, "synthetic", "", it.decode_slope_s * b * k / L * 1e3] for k in kvs]
    chunks = np.arange(CHUNK_STEP, max_chunk + 1, CHUNK_STEP)
    kk, pp = (a.ravel() for a in np.meshgrid(kvs, chunks, indexing="ij"))
    attn = [chunk_attention(p, k) for p, k in zip(pp, kk, strict=True)]
    pairs, kv_tok = (np.array(x, dtype=float) for x in zip(*attn, strict=True))
    prefill_s = (it.times_s(prefill_tokens=pp, prefill_pairs=pairs, prefill_kv_tokens=kv_tok)
                 - it.times_s(prefill_tokens=pp)) / L  # fmt: skip
    rows += [[*head, 1, int(p), int(k), True, "synthetic", float(t) * 1e3, ""]
             for p, k, t in zip(pp, kk, prefill_s, strict=True)]  # fmt: skip
    _write_xz_csv(compute / "attention.csv.xz",
                  [*ATTN_KEYS, "time_stats.attn_prefill.median", "time_stats.attn_decode.median"], rows)

    fits = scaled_fits(DEFAULT_CALIBRATION)
    nbytes = tokens * spec.hidden * 2.0  # Vidur: num_tokens = size / n_embd / 2
    net: list[list[object]] = []
    for n in (2, 4, 8):
        t = np.minimum(collective_time_s("all_reduce", nbytes, system=it.system, size=n, stride=1, fits=fits),
                       one_shot_all_reduce_s(nbytes, system=it.system, size=n, fits=fits))  # fmt: skip
        net += [[0, n, int(s), "all_reduce", n, 8, float(x) * 1e3] for s, x in zip(nbytes, t, strict=True)]
    _write_xz_csv(network / "all_reduce.csv.xz", [*NET_KEYS, "time_stats.all_reduce.median"], net)
    t = collective_time_s("p2p", nbytes, system=it.system, size=2, stride=1, fits=fits)
    _write_xz_csv(network / "send_recv.csv.xz", [*NET_KEYS, "time_stats.send_recv.median"],
                  [[0, 2, int(s), "send_recv", 2, 8, float(x) * 1e3] for s, x in zip(nbytes, t, strict=True)])
    return compute, network
