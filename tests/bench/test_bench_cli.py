"""The CLI surface without running a benchmark: dry-run, missing torch, validation errors, the public API."""

from __future__ import annotations

import json
import subprocess
import sys
import types

import pytest

import scaleright.bench as bench


def test_dry_run_prints_the_torchrun_command_and_per_rank_config(cli):
    proc = cli("bench", "train", "--nproc", "1,2", "--strategy", "fsdp", "--device", "cpu", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "-m torch.distributed.run" in proc.stdout and "--nproc-per-node 2" in proc.stdout
    assert "--module scaleright.bench.worker" in proc.stdout and '"strategy": "fsdp-full"' in proc.stdout


def test_dry_run_json_for_two_nodes_uses_c10d_rendezvous(cli):
    proc = cli("bench", "train", "--nproc", "4", "--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint",
               "node0:29500", "--device", "cuda", "--dry-run", "--json")
    [launch] = json.loads(proc.stdout)["launches"]
    assert launch["world_size"] == 8 and len(launch["ranks"]) == 4
    cmd = launch["command"]
    assert cmd[cmd.index("--rdzv-endpoint") + 1] == "node0:29500" and cmd[cmd.index("--rdzv-backend") + 1] == "c10d"
    assert cmd[cmd.index("--node-rank") + 1] == "1" and "--standalone" not in cmd
    assert launch["ranks"][3]["device"] == "cuda:3" and launch["ranks"][3]["backend"] == "nccl"


def test_comm_dry_run(cli):
    proc = cli("bench", "comm", "--nproc", "2", "--sizes", "1KB", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "scaleright.bench.comm_worker" in proc.stdout


BLOCK_TORCH = "import sys; sys.modules['torch'] = None; sys.argv = ['scaleright'] + sys.argv[1:]; " \
              "from scaleright.cli.main import main; main()"


def _without_torch(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK_TORCH, *args], capture_output=True, text=True, timeout=60)


def test_dry_run_works_without_torch():
    proc = _without_torch("bench", "train", "--nproc", "2", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "torch.distributed.run" in proc.stdout


@pytest.mark.parametrize("command", [["bench", "train", "--nproc", "1"], ["bench", "infer"], ["bench", "comm"]])
def test_missing_torch_is_one_line_naming_the_extra(command, tmp_path):
    proc = _without_torch(*command, "--db", str(tmp_path / "x.sqlite"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: torch is not installed; install the benchmark extra: pip install 'scaleright[bench]'"]


@pytest.mark.parametrize(("args", "message"), [
    (["--strategy", "single", "--nproc", "2"], "strategy=single runs one process but world_size=2 was asked"),
    (["--strategy", "zero3"], "unknown strategy 'zero3'; valid: single, ddp, fsdp-full, fsdp-grad-op, fsdp"),
    (["--nproc", "1,x"], "--nproc must be positive integers separated by commas; got 'x'"),
    (["--heads", "5"], "heads=5 does not divide hidden=64"),
    (["--nnodes", "2"], "nnodes=2 needs --rdzv-endpoint HOST:PORT"),
    (["--timeout-s", "inf"], "launch.timeout_s: Input should be a finite number"),
])
def test_bad_train_options_are_one_line_errors(cli, args, message):
    proc = cli("bench", "train", "--dry-run", *args)
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("error: ") and message in line


def test_importing_the_package_does_not_import_torch():
    code = "import sys, scaleright.bench, scaleright.cli.main; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def test_public_api_is_exactly_all():
    assert sorted(bench.__all__) == sorted(set(bench.__all__))
    for name in bench.__all__:
        obj = getattr(bench, name)  # raises AttributeError for a name in __all__ that is not defined
        # every public name is a scaleright function or class, or an UPPER_CASE constant
        if callable(obj):
            assert obj.__module__.startswith("scaleright."), f"{name} comes from {obj.__module__}"
        else:
            assert name.isupper(), f"{name} is a {type(obj).__name__}, neither callable nor a constant"
    assert {"run_train_bench", "RunStore", "scaling_efficiency"} <= set(bench.__all__)
    public = {n for n, v in vars(bench).items() if not n.startswith("_") and not isinstance(v, types.ModuleType)}
    assert public == set(bench.__all__)


@pytest.mark.parametrize(("args", "message"), [
    (["bench", "report", "--html", "{missing}/x.html"],
     "--html={missing}/x.html: directory '{missing}' does not exist"),
    (["bench", "report", "--html", "{tmp}"], "--html={tmp}: is a directory; give a file path"),
    (["bench", "report", "--job-tokens", "nan"], "--job-tokens=nan must be a finite positive number"),
    (["bench", "report", "--price-usd-per-gpu-hour", "-1"], "--price-usd-per-gpu-hour=-1.0 must be a finite"),
    (["runs", "list", "--db", "{tmp}"], "{tmp} is a directory; a run database is a file"),
    (["runs", "export", "--out", "{missing}/runs.json"], "--out={missing}/runs.json: directory '{missing}' does not"),
    (["runs", "export", "--json", "--format", "csv"], "--json and --format csv conflict"),
    (["bench", "comm", "--dry-run", "--sizes", "1KB,0.0001KB"], "size '0.0001KB' in --sizes is under one byte"),
], ids=["report-html-missing-dir", "report-html-is-dir", "job-tokens-nan", "negative-price", "db-is-dir",
        "export-out-missing-dir", "export-json-vs-csv", "comm-size-under-a-byte"])
def test_bad_report_and_runs_options_are_one_line_errors(cli, tmp_path, args, message):
    fill = {"tmp": str(tmp_path), "missing": str(tmp_path / "absent")}
    args = [a.format(**fill) for a in args]
    if "--db" not in args:
        args += ["--db", str(tmp_path / "runs.sqlite")]
    proc = cli(*args)
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("error: ") and message.format(**fill) in line


def test_runs_show_and_export_accept_json(cli, tmp_path, make_run):
    db = tmp_path / "runs.sqlite"
    bench.RunStore(db).add(**make_run())
    shown = cli("runs", "show", "1", "--json", "--db", db)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["id"] == 1
    exported = cli("runs", "export", "--json", "--db", db)
    assert exported.returncode == 0, exported.stderr
    assert [r["id"] for r in json.loads(exported.stdout)] == [1]


def test_report_with_no_successful_train_run_is_an_error_like_compare_and_calibrate(cli, tmp_path, make_run):
    db = tmp_path / "runs.sqlite"
    bench.RunStore(db).add(**make_run(status="failed"))
    for args in (["bench", "report"], ["bench", "report", "--json"]):
        proc = cli(*args, "--db", db)
        assert proc.returncode == 2, proc.stdout
        assert proc.stdout == ""
        [line] = proc.stderr.strip().splitlines()
        assert line == ("error: no successful train runs in the database to report on; run `scaleright bench train` "
                        "first")
