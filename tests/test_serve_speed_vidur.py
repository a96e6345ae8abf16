"""The synthetic Vidur profiling tables of ``benchmarks/vidur_profiles.py`` carry what Vidur's loaders read.

The expected columns are written out by hand from Vidur 0.0.26's
``vidur/execution_time_predictor/sklearn_execution_time_predictor.py`` (``_get_input_files``, ``_load_compute_df``,
``_load_attention_df``, ``_load_all_reduce_df``, ``_load_send_recv_df``, the ``feature_cols`` / ``target_col`` of
``_train_general_models`` and ``_train_attention_layer_models``) and ``vidur/config/model_config.py``
(``Llama38BModelConfig``). Where that source is installed (``/tmp/vidurvenv``), each name is also looked up in it,
so the hand-written list cannot drift from the Vidur the benchmark runs.
"""

from __future__ import annotations

import csv
import json
import lzma
from pathlib import Path

import numpy as np
import pytest

from benchmarks.vidur_profiles import check_split, write_profiles
from scaleright.catalog import get_gpu
from scaleright.workload import load_model

VIDUR_SRC = Path("/tmp/vidurvenv/lib/python3.11/site-packages/vidur/execution_time_predictor/"
                 "sklearn_execution_time_predictor.py")  # fmt: skip
GENERAL_OPS = ["attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj", "mlp_act", "input_layernorm",
               "post_attention_layernorm", "attn_rope", "add"]  # fmt: skip
MLP_READ = ["n_head", "n_kv_head", "n_embd", "n_expanded_embd", "use_gated_mlp", "vocab_size",
            "num_tensor_parallel_workers", "num_tokens",
            *(f"time_stats.{op}.median" for op in GENERAL_OPS)]  # fmt: skip
ATTN_READ = ["n_embd", "n_q_head", "n_kv_head", "block_size", "num_tensor_parallel_workers", "prefill_chunk_size",
             "batch_size", "kv_cache_size", "time_stats.attn_prefill.median",
             "time_stats.attn_decode.median"]  # fmt: skip
ALL_REDUCE_READ = ["num_workers", "devices_per_node", "collective", "size", "time_stats.all_reduce.median"]
SEND_RECV_READ = ["collective", "devices_per_node", "size", "time_stats.send_recv.median"]
# Llama38BModelConfig: num_q_heads 32, num_kv_heads 8, embedding_dim 4096, mlp_hidden_dim 14336, vocab 128256, gated
LLAMA3_8B = {"n_head": "32", "n_kv_head": "8", "n_embd": "4096", "n_expanded_embd": "14336", "vocab_size": "128256",
             "use_gated_mlp": "True"}  # fmt: skip


def _rows(path: Path) -> list[dict[str, str]]:
    with lzma.open(path, "rt", newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    out = tmp_path_factory.mktemp("vidur")
    # small grids: the columns and filters do not depend on the grid's extent
    compute, network = write_profiles(load_model("llama-3.1-8b"), get_gpu("h100-sxm"), out, max_tokens=64,
                                      max_batch=4, max_kv=512, max_chunk=128)  # fmt: skip
    return compute, network


def test_compute_tables_have_vidur_columns_and_rows_its_filters_keep(tables):
    compute, _ = tables
    cfg = json.loads((compute / "config.json").read_text())
    assert (cfg["model"], cfg["device_sku"]) == ("meta-llama/Llama-3-8B", "h100")  # _get_input_files' asserts
    mlp = _rows(compute / "mlp.csv.xz")
    assert set(MLP_READ) <= set(mlp[0])
    kept = [r for r in mlp if all(r[k] == v for k, v in LLAMA3_8B.items()) and r["num_tensor_parallel_workers"] == "1"]
    assert len(kept) == len(mlp) > 0
    assert all(float(r[f"time_stats.{op}.median"]) > 0 for r in kept for op in GENERAL_OPS)
    attn = _rows(compute / "attention.csv.xz")
    assert set(ATTN_READ) <= set(attn[0])
    attn = [r for r in attn if (r["n_embd"], r["n_q_head"], r["n_kv_head"], r["block_size"],
                                r["num_tensor_parallel_workers"]) == ("4096", "32", "8", "16", "1")]  # fmt: skip
    decode = [r for r in attn if r["prefill_chunk_size"] == "0"]  # Vidur: is_decode = prefill_chunk_size == 0
    prefill = [r for r in attn if r["prefill_chunk_size"] != "0"]
    assert decode and prefill
    assert all(r["time_stats.attn_decode.median"] != "" for r in decode)
    assert all(float(r["time_stats.attn_prefill.median"]) > 0 for r in prefill)


def test_network_tables_have_vidur_columns(tables):
    _, network = tables
    assert json.loads((network / "config.json").read_text())["sku"] == "h100_dgx"
    ar = _rows(network / "all_reduce.csv.xz")
    assert set(ALL_REDUCE_READ) <= set(ar[0])
    # _load_all_reduce_df keeps num_workers == devices_per_node == tp and collective all_reduce
    assert {r["num_workers"] for r in ar if r["num_workers"] == r["devices_per_node"]} == {"2", "4", "8"}
    sr = _rows(network / "send_recv.csv.xz")
    assert set(SEND_RECV_READ) <= set(sr[0])
    assert {(r["collective"], r["devices_per_node"]) for r in sr} == {("send_recv", "2")}


def test_per_op_split_adds_back_to_the_iteration_model():
    # layers × Σ Vidur columns + engine overhead == IterationModel.fixed_s at tp 1 (raises if not)
    assert check_split(load_model("llama-3.1-8b"), get_gpu("h100-sxm"), np.arange(1, 8193)) <= 1e-9


@pytest.mark.skipif(not VIDUR_SRC.exists(), reason="Vidur 0.0.26 not installed at /tmp/vidurvenv")
def test_hand_written_columns_appear_in_vidurs_loader_source():
    src = VIDUR_SRC.read_text()
    names = [*MLP_READ, *ATTN_READ, *ALL_REDUCE_READ, *SEND_RECV_READ, "device_sku", "sku"]
    # the general ops' targets are built as f"time_stats.{model_name}.median" from their quoted names
    missing = [n for n in names if f'"{n}"' not in src and not (n.startswith("time_stats.") and
               n.split(".")[1] in GENERAL_OPS and f'"{n.split(".")[1]}"' in src)]  # fmt: skip
    missing += [f for f in ("mlp.csv.xz", "attention.csv.xz", "all_reduce.csv.xz", "send_recv.csv.xz")
                if f"/{f}" not in src]  # fmt: skip
    assert not missing, missing
