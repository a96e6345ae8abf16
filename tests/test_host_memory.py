"""Host memory bandwidth as system data (issue #9 items 2 and 11): the catalog's figures and their derivations, the
default for a system that states none, the user's override, and what the figure times: ZeRO-Offload's CPU step and
the host-staged copies of PCIe without peer-to-peer.

Expected values are computed here from first principles (a 64-bit DDR channel moves 8 bytes per transfer, so a peak
is sockets x channels x MT/s x 8 B), read from systems.yaml and the reference csv files with the yaml and csv modules,
or derived in the test from the bytes that must pass through host memory; never read through the code under test.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

import scaleright
from scaleright.catalog import get_gpu
from scaleright.catalog.systems import DEFAULT_HOST_MEMORY, HostMemory, System, list_systems, system_for
from scaleright.errors import InputError
from scaleright.estimate.collectives import collective_time_s
from scaleright.estimate.layout import Layout
from scaleright.estimate.train import estimate_train, train_step_arrays
from scaleright.workload import load_model
from scaleright.workload.params import count_params

DATA = Path(scaleright.__file__).parent / "catalog" / "data"
YAML = {d["id"]: d for d in yaml.safe_load((DATA / "systems.yaml").read_text())}
REF = Path(__file__).resolve().parents[1] / "validation" / "reference" / "components"
GB = 1e9


# ---- the catalog's figures ----------------------------------------------------------------------------------------


def test_every_peak_is_its_channels_times_the_transfer_rate_times_8_bytes():
    peaks = 0
    for s in list_systems():
        hm = YAML[s.id].get("host_memory")
        if hm is None:
            continue
        assert hm["source"].strip(), s.id
        if hm["basis"] == "peak":
            peaks += 1
            assert hm["memory"].endswith(str(hm["mt_per_s"])), (s.id, hm["memory"])  # DDR4-3200: 3200 MT/s
            assert s.host.gb_per_s == pytest.approx(hm["sockets"] * hm["channels_per_socket"] * hm["mt_per_s"]
                                                    * 8 / 1000, rel=1e-9), s.id  # fmt: skip
    assert peaks >= 25


@pytest.mark.parametrize(("system", "gb_per_s"), [
    ("dgx-a100", 2 * 8 * 3200 * 8 / 1000),  # 2x EPYC 7742, 8 DDR4-3200 channels each
    ("hgx-h100", 2 * 8 * 4800 * 8 / 1000),  # 2x Xeon Platinum 8480C, 8 DDR5-4800 channels each
    ("hgx-b200", 2 * 8 * 5600 * 8 / 1000),  # 2x Xeon Platinum 8570, 8 DDR5-5600 channels each
    ("rtx-5090-box", 2 * 8 * 4800 * 8 / 1000),  # nccl #1639: 2x Xeon 8480+
    ("mi250x-node", 1 * 8 * 3200 * 8 / 1000),  # one EPYC 7A53 per Frontier node
])  # fmt: skip
def test_a_hosts_peak_is_its_cpus_channels(system, gb_per_s):
    assert system_for(YAML[system]["accelerators"][0], system=system).host.gb_per_s == pytest.approx(gb_per_s)


def test_grace_hosts_carry_the_measured_stream_triad():
    """hbm_bandwidth.csv: STREAM Triad on the two Grace CPUs of an Azure ND GB200 v6 VM (one 4-GPU compute tray)."""
    with (REF / "hbm_bandwidth.csv").open(newline="") as f:
        (row,) = [r for r in csv.DictReader(f) if "Grace" in r["gpu"] and r["kernel"] == "CPU STREAM Triad"]
    tray = float(row["achieved_TB_per_s"]) * 1000
    gb200 = system_for("gb200")
    assert (gb200.host.basis, gb200.gpus_per_node) == ("measured", 4)
    assert gb200.host.gb_per_s == pytest.approx(tray)
    assert system_for("gh200").host.gb_per_s == pytest.approx(tray / 2)  # one Grace per GH200


def test_a_system_that_states_no_host_memory_gets_the_documented_default_marked_as_such():
    missing = [s for s in list_systems() if "host_memory" not in YAML[s.id]]
    assert {s.id for s in missing} >= {"tpu-v4-pod", "trn1-32xl"}
    for s in missing:
        assert s.host is DEFAULT_HOST_MEMORY
        assert (s.host.basis, s.host.assumed) == ("default", True)
        assert "default" in s.host.derivation and "override" in s.host.source
    # the stated choice: a DGX H100 host, two sockets of eight DDR5-4800 channels
    assert DEFAULT_HOST_MEMORY.gb_per_s == pytest.approx(2 * 8 * 4800 * 8 / 1000)


def test_assumed_hosts_say_so():
    for s in list_systems():
        hm = YAML[s.id].get("host_memory")
        if hm is not None and hm.get("assumed"):
            assert s.host.assumed and "assumed" in s.host.derivation, s.id
            assert "assumed" in hm["source"] or "measured on GB200" in hm.get("notes", ""), s.id


def test_a_peak_whose_product_is_wrong_or_missing_is_rejected_by_name():
    with pytest.raises(ValidationError, match=r"2 sockets x 8 channels x 3200 MT/s x 8 B = 409.6"):
        HostMemory(gb_per_s=500.0, basis="peak", sockets=2, channels_per_socket=8, mt_per_s=3200, source="x")
    with pytest.raises(ValidationError, match="needs sockets, channels_per_socket and mt_per_s"):
        HostMemory(gb_per_s=409.6, basis="peak", source="x")
    with pytest.raises(ValidationError, match="gb_per_s"):
        HostMemory(gb_per_s=0.0, basis="measured", source="x")
    with pytest.raises(ValidationError, match="host_memory"):
        System.model_validate({**YAML["dgx-a100"], "host_memory": {**YAML["dgx-a100"]["host_memory"], "ddr": 4}})


def test_the_override_replaces_the_figure_and_bad_values_name_the_field():
    s = system_for("rtx-4090", host_memory_gb_per_s=51.2)  # a desktop: 2 x DDR4-3200 channels
    assert (s.host.gb_per_s, s.host.basis) == (51.2, "override")
    assert system_for("rtx-4090").host.gb_per_s == pytest.approx(409.6)  # the catalog's is untouched
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(InputError, match="host_memory_gb_per_s"):
            system_for("rtx-4090", host_memory_gb_per_s=bad)


def test_the_systems_cache_follows_the_host_memory_in_the_file(tmp_path, monkeypatch):
    """An edited systems.yaml is a new cache key: the figure read back is the file's, never a stale pickle."""
    from scaleright.catalog import systems
    from scaleright.catalog.cache import CACHE_ENV, NO_CACHE_ENV, cached_entries

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(NO_CACHE_ENV, raising=False)
    path = tmp_path / "systems.yaml"
    entry = dict(YAML["dgx-a100"])

    def load():
        return cached_entries("systems", path, System, lambda: systems._parse(path))

    path.write_text(yaml.safe_dump([entry]))
    assert load()[0].host.gb_per_s == pytest.approx(409.6)
    assert load()[0].host.gb_per_s == pytest.approx(409.6)  # a hit
    entry["host_memory"] = {**entry["host_memory"], "mt_per_s": 2933, "memory": "DDR4-2933", "gb_per_s": 375.424}
    path.write_text(yaml.safe_dump([entry]))
    assert load()[0].host.gb_per_s == pytest.approx(2 * 8 * 2933 * 8 / 1000)
    assert len(list((tmp_path / "cache").glob("catalog-*.pickle"))) == 2


# ---- ZeRO-Offload's CPU step -------------------------------------------------------------------------------------


def test_the_cpu_optimizer_step_runs_at_the_systems_host_memory():
    """8 x A100 (DGX A100: 409.6 GB/s for 8 GPUs), Llama 3.1 8B, ZeRO-2 with the optimizer offloaded: each GPU's
    partition of P/8 parameters moves 28 B per parameter through the host in the CPU-Adam step (Ren et al. 2021).
    Halving the host's bandwidth adds exactly one more CPU step: P/8 x 28 B / (H/2 / 8) - P/8 x 28 B / (H / 8)."""
    spec = load_model("llama-3.1-8b")
    gpu = get_gpu("a100-80gb")
    lay = Layout(dp=8, zero=2, micro_batch=1, global_batch=32, recompute="none", offload_optimizer=True)
    h = 409.6e9
    at = {x: estimate_train(spec, gpu=gpu, layout=lay, seq_len=4096,
                            system=system_for(gpu.id, host_memory_gb_per_s=x / 1e9)).time_breakdown_s["offload"]
          for x in (h, h / 2)}  # fmt: skip
    cpu_step = count_params(spec).total / 8 * 28 / (h / 8)
    assert at[h / 2] - at[h] == pytest.approx(cpu_step, rel=1e-9)
    default = estimate_train(spec, gpu=gpu, layout=lay, seq_len=4096).time_breakdown_s["offload"]
    assert default == pytest.approx(at[h], rel=1e-12)  # the catalog's DGX A100 host, not a DDR5 one


# ---- PCIe without P2P: every staged byte is written to and read from host memory ---------------------------------


@settings(max_examples=200, deadline=None)
@given(kind=st.sampled_from(["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p"]),
       n=st.integers(min_value=2, max_value=8), s=st.floats(min_value=1e3, max_value=16e9),
       host=st.floats(min_value=10.0, max_value=2000.0), groups=st.sampled_from([None, 1, 2, 4]),
       gpu=st.sampled_from(["rtx-4090", "rtx-5090"]))  # fmt: skip
def test_a_host_staged_collective_costs_at_least_its_bytes_over_host_memory_bandwidth(kind, n, s, host, groups, gpu):
    """A rank of a ring sends f·S (f = 2(n−1)/n for all-reduce, (n−1)/n for all-gather, reduce-scatter and
    all-to-all, 1 for send/recv). Without P2P each sent byte is copied into host memory and read out by its
    receiver: two DRAM transfers. The q GPUs of the 8-GPU host that communicate at once (all 8 unless told how
    many groups run together: then n x groups, at most 8) move 2·q·f·S bytes through DRAM of H GB/s."""
    system = system_for(gpu, host_memory_gb_per_s=host)
    assert system.tiers[0].kind == "pcie-host" and system.gpus_per_node == 8
    f = {"all_reduce": 2 * (n - 1) / n, "p2p": 1.0}.get(kind, (n - 1) / n)
    q = 8 if groups is None else min(8, n * groups)
    t = float(collective_time_s(kind, s, system=system, size=n, concurrent_groups=groups))
    assert t >= 2 * q * f * s / (host * GB) * (1 - 1e-12)


def test_host_memory_is_what_binds_a_desktop_and_not_a_server():
    """2 x RTX 4090 on a desktop's dual-channel DDR4-3200 (51.2 GB/s): two GPUs staging 2 bytes of DRAM traffic per
    byte sent get 51.2 / 4 = 12.8 GB/s each, below PCIe 4.0's host-staged rate, so the all-reduce takes exactly
    S·2(n−1)/n / 12.8 GB/s at large S; the 409.6 GB/s server host leaves the PCIe rate in charge."""
    s = 4e9
    desktop = system_for("rtx-4090", gpus_per_node=2, host_memory_gb_per_s=51.2)
    t = float(collective_time_s("all_reduce", s, system=desktop, size=2))
    assert t == pytest.approx(s * 1.0 / (51.2 * GB / 4), rel=1e-3)  # latency is µs against ~0.3 s
    server = system_for("rtx-4090", gpus_per_node=2)
    assert float(collective_time_s("all_reduce", s, system=server, size=2)) < t


def _tp_bytes_per_gpu(spec, seq_len: int, mb: int, tp: int, layers: int, n_micro: int) -> float:
    """Bytes one GPU sends for TP without recompute: 2 all-reduces per layer forward and 2 backward of s·b·h 16-bit
    activations (Megatron-LM; with sequence parallelism an all-gather plus a reduce-scatter, the same bytes),
    ring factor 2(n−1)/n."""
    return 4 * seq_len * mb * spec.hidden * 2.0 * 2 * (tp - 1) / tp * layers * n_micro


@settings(max_examples=25, deadline=None)
@given(tp=st.sampled_from([2, 4, 8]), host=st.floats(min_value=20.0, max_value=800.0),
       mb=st.sampled_from([1, 2]), n_micro=st.sampled_from([1, 4]), sp=st.booleans(),
       overlap=st.booleans())  # fmt: skip
def test_tp_over_pcie_without_p2p_costs_at_least_its_bytes_over_host_memory_bandwidth(tp, host, mb, n_micro, sp,
                                                                                      overlap):  # fmt: skip
    """Llama 3.1 8B, tensor parallel on the 8-card RTX 4090 box (stock driver: no P2P), every GPU of the host in a
    TP group at once: the step's TP time is at least the host's DRAM traffic 2 x 8 x (TP bytes per GPU) over H,
    whether or not the framework overlaps TP communication (host-staged copies leave nothing to overlap)."""
    spec = load_model("llama-3.1-8b")
    gpu = get_gpu("rtx-4090")
    system = system_for(gpu.id, host_memory_gb_per_s=host)
    seq = 2048
    lay = Layout(tp=tp, pp=1, dp=8 // tp, zero=1, micro_batch=mb, global_batch=mb * n_micro * (8 // tp),
                 recompute="none", sequence_parallel=sp)  # fmt: skip
    r = train_step_arrays(spec, gpu=gpu, system=system, seq_len=seq, global_batch=lay.global_batch,
                          tp_comm_overlap=overlap, **lay.kwargs())  # fmt: skip
    bound = 2 * 8 * _tp_bytes_per_gpu(spec, seq, mb, tp, spec.layers, n_micro) / (host * GB)
    assert float(np.asarray(r["t_tp_comm"])) >= bound * (1 - 1e-9)


def test_estimate_train_prints_the_host_memory_its_figures_use(monkeypatch, capsys):
    """Host-staged TP (a GeForce box without P2P) and ZeRO-Offload's CPU step use the host's DRAM bandwidth, so the
    terminal says which figure and how it was obtained; an NVLink layout without offload uses none and says none."""
    from tests.cli_helpers import run_main

    base = ["estimate", "train", "--model", "llama-3.1-8b", "--gpus", "8"]
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = run_main([*base, "--gpu", "rtx-4090", "--tp", "2"], monkeypatch, capsys)
    assert code == 0, err
    lines = [line for line in out.splitlines() if line.startswith("host memory ")]
    assert len(lines) == 1 and "GB/s" in lines[0], lines
    code, out, err = run_main([*base, "--gpu", "h100-sxm", "--tp", "2"], monkeypatch, capsys)
    assert code == 0, err
    assert not [line for line in out.splitlines() if line.startswith("host memory ")]
    code, out, err = run_main([*base, "--gpu", "h100-sxm", "--zero", "2", "--offload-optimizer"], monkeypatch, capsys)
    assert code == 0, err
    assert "host memory 2 x 8 x DDR5-4800 x 8 B = 614.4 GB/s (peak)" in out  # DGX H100: two Xeon 8480C sockets
