"""``estimate memory`` takes the layout flags ``estimate train`` takes (issue #12, item 5: one CLI vocabulary):
``--dp``, ``--fsdp``, ``--dp-shard``, ``--etp`` and ``--virtual-stages``, with the same meaning and checks.

The expected values are independent of the code under test: Megatron-Core's interleaved 1F1B schedule
(``get_forward_backward_func`` -> ``forward_backward_pipelining_with_interleaving``) runs
``(pp - 1) * 2 + (v - 1) * pp`` warm-up micro-batch chunks on the first stage before its first backward, so the
first stage holds ``2 (pp - 1) + (v - 1) pp + 1`` chunks of ``L / (pp v)`` layers at its peak, against ``pp``
micro-batches of ``L / pp`` layers without interleaving (Narayanan et al. 2021, section 2.2); ZeRO-3 shards the
weights over the data-parallel ranks (Rajbhandari et al. 2020: 2 B / N_d per parameter of bf16 weights).
"""

from __future__ import annotations

import json

import pytest

from tests.cli_helpers import assert_one_line, run_main

BASE = ["estimate", "memory", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--gpus", "64", "--tp", "4", "--pp",
        "8", "--micro-batch", "1", "--global-batch", "128", "--seq-len", "4096", "--sequence-parallel", "--framework",
        "megatron-core", "--zero", "1"]  # fmt: skip


def _json(args: list[str], monkeypatch, capsys) -> dict:
    code, out, err = run_main([*args, "--json"], monkeypatch, capsys)
    assert code == 0, err
    return json.loads(out)


def _in_flight_layers(layers: int, pp: int, v: int) -> float:
    """Layer-micro-batches the first stage keeps for backward at its peak under (interleaved) 1F1B."""
    if v == 1:
        return pp * layers / pp
    return (2 * (pp - 1) + (v - 1) * pp + 1) * layers / (pp * v)


@pytest.mark.parametrize("v", [2, 5])
def test_virtual_stages_scale_the_first_stage_activations_as_the_interleaved_schedule_keeps_them(v, monkeypatch,
                                                                                                   capsys):  # fmt: skip
    plain = _json(BASE, monkeypatch, capsys)["memory_breakdown_gb"]["activations"]
    inter = _json([*BASE, "--virtual-stages", str(v)], monkeypatch, capsys)["memory_breakdown_gb"]["activations"]
    want = _in_flight_layers(80, 8, v) / _in_flight_layers(80, 8, 1)  # 115 / 80 at v = 2, 94 / 80 at v = 5
    assert inter / plain == pytest.approx(want, rel=0.02)


def test_memory_and_train_report_the_same_memory_for_the_same_layout_flags(monkeypatch, capsys):
    flags = ["--dp", "2", "--virtual-stages", "2"]
    mem = _json([*BASE, *flags], monkeypatch, capsys)
    train = _json(["estimate", "train", *BASE[2:], *flags], monkeypatch, capsys)
    assert mem["memory_breakdown_gb"] == pytest.approx(train["memory_breakdown_gb"])


def test_fsdp_is_zero3_and_shards_the_weights_over_dp(monkeypatch, capsys):
    args = ["estimate", "memory", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpus", "8"]
    one = _json(args, monkeypatch, capsys)["memory_breakdown_gb"]["weights"]
    sharded = _json([*args, "--fsdp"], monkeypatch, capsys)["memory_breakdown_gb"]["weights"]
    assert sharded == pytest.approx(one / 8, rel=1e-6)
    assert _json([*args, "--zero", "3"], monkeypatch, capsys)["memory_breakdown_gb"]["weights"] == sharded


@pytest.mark.parametrize("extra, pattern", [
    (["--fsdp", "--zero", "1"], r"^error: --fsdp is ZeRO-3; drop --zero or set --zero 3 \(got --zero 1\)$"),
    (["--dp", "8", "--gpus", "16"], r"^error: tp\(1\) \* pp\(1\) \* dp\(8\) \* cp\(1\) = 8 != gpus\(16\)$"),
    (["--fsdp", "--task", "inference"], r"^error: --fsdp applies to training; --task inference does not use it"),
    (["--virtual-stages", "2", "--task", "inference"],
     r"^error: --virtual-stages=2 applies to training; --task inference does not use it"),
    (["--virtual-stages", "0"], r"^error: --virtual-stages=0 must be a positive integer$"),
])  # fmt: skip
def test_bad_layout_flags_are_one_line(extra, pattern, monkeypatch, capsys):
    args = ["estimate", "memory", "--model", "llama-3.1-8b", "--gpus", "8", *extra]
    assert_one_line(*run_main(args, monkeypatch, capsys), pattern)
