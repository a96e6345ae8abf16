"""How the parent reads a run directory: the cause of a failure (the rank that died, not the peer that lost it),
the hung rank, teardown crashes; and how it watches the beacons (the hang timeout counts from the hung rank's last
progress; a rank that marked ``done`` is never hung)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from scaleright.bench import BenchRunError, LaunchSpec
from scaleright.bench.launch import REMOTE, Launch, _supervise, diagnose, torchrun_failures


def beacon(run_dir, rank, seq, label):
    (run_dir / f"rank{rank}.progress").write_text(json.dumps({"pid": 999999, "seq": seq, "label": label}))


def test_earliest_failure_is_the_cause(tmp_path):
    for rank, t, err in ((0, 2.0, "RuntimeError: Connection closed by peer"), (1, 1.0, "ValueError: boom")):
        (tmp_path / f"rank{rank}.error.json").write_text(json.dumps(
            {"rank": rank, "cause": "crash", "error": err, "phase": "step 3: backward", "time": t}))
    with pytest.raises(BenchRunError, match=r"^rank 1 crashed at world_size=2 during 'step 3: backward': ValueError"):
        diagnose(tmp_path, world_size=2, returncode=1, timed_out=False, timeout_s=10, multi_node=False)


def test_hang_names_the_least_advanced_rank(tmp_path):
    beacon(tmp_path, 0, 12, "step 0: backward")
    beacon(tmp_path, 1, 10, "step 0: start")
    beacon(tmp_path, 2, 12, "step 0: backward")
    with pytest.raises(BenchRunError, match=r"^rank 1 hung at world_size=3: made no progress past 'step 0: start' "
                                            r"\(other ranks reached 'step 0: backward'\) within --timeout-s=5;") as e:
        diagnose(tmp_path, world_size=3, returncode=-9, timed_out=True, timeout_s=5, multi_node=False)
    assert (e.value.rank, e.value.cause) == (1, "hang")


def test_hang_before_a_rank_started_names_it(tmp_path):
    beacon(tmp_path, 0, 2, "init_process_group")
    with pytest.raises(BenchRunError, match=r"^rank 1 hung at world_size=2: never started"):
        diagnose(tmp_path, world_size=2, returncode=-9, timed_out=True, timeout_s=5, multi_node=False)


def test_teardown_crash_after_every_rank_finished_still_counts(tmp_path):
    (tmp_path / "result.json").write_text(json.dumps({"ranks": [{"rank": 1}, {"rank": 0}]}))
    beacon(tmp_path, 0, 30, "done")
    beacon(tmp_path, 1, 30, "done")
    got = diagnose(tmp_path, world_size=2, returncode=1, timed_out=False, timeout_s=5, multi_node=False)
    assert [r["rank"] for r in got] == [0, 1]


def test_exit_without_any_report_quotes_the_log(tmp_path):
    with pytest.raises(BenchRunError, match="torchrun exited with code 1 at world_size=2 and no local rank reported "
                                            "a cause; last log line: Segmentation fault"):
        diagnose(tmp_path, world_size=2, returncode=1, timed_out=False, timeout_s=5, multi_node=False,
                 log_tail="Segmentation fault")


def test_node_without_rank_zero_is_remote(tmp_path):
    assert diagnose(tmp_path, world_size=8, returncode=0, timed_out=False, timeout_s=5, multi_node=True) == REMOTE


KILLED_LOG = """\
Root Cause (first observed failure):
[0]:
  time      : 2026-12-01_11:17:37
  host      : box
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 29191)  (SIGKILL)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 29191
------------------------------------------------------------
Other Failures:
[1]:
  time      : 2026-12-01_11:17:37
  host      : box
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 29190)
  error_file: <N/A>
"""


def peer_lost(run_dir, rank, t=1.0):
    (run_dir / f"rank{rank}.error.json").write_text(json.dumps(
        {"rank": rank, "cause": "crash", "phase": "step 3: backward", "time": t,
         "error": "RuntimeError: [gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:59578"}))


def test_torchrun_failures_are_read_per_rank():
    assert torchrun_failures(KILLED_LOG) == {1: {"local_rank": 1, "exitcode": -9, "pid": 29191},
                                             0: {"local_rank": 0, "exitcode": 1, "pid": 29190}}


def test_a_killed_rank_is_blamed_not_the_peer_that_lost_it(tmp_path):
    peer_lost(tmp_path, 0)
    beacon(tmp_path, 1, 9, "step 3: forward")
    with pytest.raises(BenchRunError) as e:
        diagnose(tmp_path, world_size=2, returncode=1, timed_out=False, timeout_s=10, multi_node=False,
                 log_text=KILLED_LOG)
    assert str(e.value) == ("rank 1 was killed by SIGKILL (the kernel's out-of-memory killer sends this) at "
                            "world_size=2 after 'step 3: forward'")
    assert (e.value.rank, e.value.cause) == (1, "killed")


def test_ranks_torchrun_stopped_with_sigterm_are_not_the_cause(tmp_path):
    (tmp_path / "rank1.error.json").write_text(json.dumps(
        {"rank": 1, "cause": "exit", "code": 4, "error": "SystemExit: 4", "phase": "step 0: start", "time": 5.0}))
    log = KILLED_LOG.replace("exitcode  : -9 (pid: 29191)", "exitcode  : 4 (pid: 29191)").replace(
        "exitcode  : 1 (pid: 29190)", "exitcode  : -15 (pid: 29190)")
    with pytest.raises(BenchRunError, match=r"^rank 1 called sys.exit\(4\) at world_size=2 during 'step 0: start'$"):
        diagnose(tmp_path, world_size=2, returncode=1, timed_out=False, timeout_s=10, multi_node=False, log_text=log)


def test_only_lost_connections_blame_the_earliest(tmp_path):
    peer_lost(tmp_path, 0, t=2.0)
    peer_lost(tmp_path, 1, t=1.0)
    with pytest.raises(BenchRunError, match=r"^rank 1 crashed at world_size=2 during 'step 3: backward': .*by peer"):
        diagnose(tmp_path, world_size=2, returncode=1, timed_out=False, timeout_s=10, multi_node=False)


# A stand-in for torchrun: writes beacons like the ranks do (label, seq, pid), for _supervise to watch.
FAKE_RANKS = r"""
import json, os, sys, time
run_dir, plan = sys.argv[1], json.loads(sys.argv[2])
seq = {}
def mark(rank, label):
    seq[rank] = seq.get(rank, 0) + 1
    rec = json.dumps({"pid": os.getpid(), "seq": seq[rank], "label": label}).encode().ljust(512)
    with open(os.path.join(run_dir, f"rank{rank}.progress"), "r+b" if rank in seq and seq[rank] > 1 else "wb") as f:
        f.write(rec)
for rank, label in plan["first"]:
    mark(rank, label)
end = time.monotonic() + plan["busy_s"]
i = 0
while time.monotonic() < end:
    i += 1
    for rank in plan["busy_ranks"]:
        mark(rank, f"step {i}")
    time.sleep(0.05)
for rank, label in plan["then"]:
    mark(rank, label)
time.sleep(plan["sleep_s"])
"""


def _supervise_fake(tmp_path, plan, timeout_s):
    proc = subprocess.Popen([sys.executable, "-c", FAKE_RANKS, str(tmp_path), json.dumps(plan)],
                            start_new_session=True)
    t0 = time.monotonic()
    try:
        watch = _supervise(proc, tmp_path, Launch("fake", 2, LaunchSpec(timeout_s=timeout_s)))
    finally:
        proc.kill()
        proc.wait()
    return watch, time.monotonic() - t0


@pytest.mark.slow
def test_a_rank_that_marked_done_is_not_hung_however_long_teardown_takes(tmp_path):
    plan = {"first": [(0, "done")], "busy_ranks": [1], "busy_s": 4.0, "then": [(1, "done")], "sleep_s": 4.0}
    watch, took = _supervise_fake(tmp_path, plan, timeout_s=2.0)
    assert not watch.timed_out and took >= 8.0  # torchrun exited by itself; both ranks were done long before


@pytest.mark.slow
def test_the_hang_timeout_counts_from_the_hung_ranks_last_progress(tmp_path):
    plan = {"first": [(0, "start"), (1, "start")], "busy_ranks": [0, 1], "busy_s": 5.0,
            "then": [(1, "step 0: start")], "sleep_s": 3600}
    watch, took = _supervise_fake(tmp_path, plan, timeout_s=2.0)
    assert watch.timed_out and took >= 7.0  # 5 s of progress, then 2 s without: not 2 s after the launch


BAD_FLAGS = [
    (["train", "--nproc", "9223372036854775808"], "--nproc must be <= 1,024 (processes per node; "),
    (["train", "--nproc", "1," + "9" * 5000], "--nproc must be positive integers separated by commas; got '999"),
    (["train", "--nproc", "2", "--nnodes", "70000", "--rdzv-endpoint", "h:1"], "--nnodes must be <= 65,536"),
    (["train", "--steps", "10000000"], "--steps must be <= 1,000,000"),
    (["train", "--warmup", "-1"], "--warmup must be >= 0 (got -1)"),
    (["train", "--micro-batch", "99999999999999999999"], "--micro-batch must be <= 65,536"),
    (["train", "--hidden", "4294967296"], "--hidden must be <= 1,048,576"),
    (["train", "--seed", "-1"], "--seed must be from 0 to 4,294,967,295 (got -1)"),
    (["train", "--timeout-s", "1e9"], "--timeout-s must be <= 604,800 (one week)"),
    (["train", "--timeout-s", "0"], "--timeout-s must be > 0 (got 0)"),
    (["train", "--nnodes", "2", "--rdzv-endpoint", "node0"], "--rdzv-endpoint='node0' must be HOST:PORT"),
    (["train", "--nnodes", "2", "--rdzv-endpoint", "node0:0"], "and a port from 1 to 65535"),
    (["train", "--nnodes", "2", "--rdzv-endpoint", ":29500"], "with a non-empty host"),
    (["train", "--nnodes", "2", "--rdzv-endpoint", "::1:29500"], "(IPv6 in brackets, [::1]:29500)"),
    (["comm", "--nproc", ",".join(map(str, range(1, 66)))], "--nproc lists 65 values; give at most 64"),
    (["comm", "--sizes", "2000000GB"], "size '2000000GB' in --sizes must be <= 1e+15 (a petabyte)"),
    (["comm", "--iters", "0"], "--iters must be >= 1 (got 0)"),
    (["infer", "--batch-sizes", "1,2000000"], "--batch-sizes must be <= 1,048,576"),
    (["infer", "--repeats", "2000000"], "--repeats must be <= 1,000,000"),
]


@pytest.mark.parametrize(("args", "message"), BAD_FLAGS, ids=[" ".join(a)[:40] for a, _ in BAD_FLAGS])
def test_every_count_and_the_endpoint_are_checked_before_any_work(cli, args, message):
    dry = ["--dry-run"] if args[0] != "infer" else []
    proc = cli("bench", *args, *dry, timeout=60)  # a world size of 2**63 used to hang here, growing memory
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("error: ") and message in line, line
    assert proc.stdout == ""


@pytest.mark.parametrize("endpoint", ["node0:29500", "10.0.0.1:1", "[::1]:65535", "[fe80::1%eth0]:29500"])
def test_good_endpoints_reach_the_torchrun_command(cli, endpoint):
    proc = cli("bench", "train", "--nproc", "2", "--nnodes", "2", "--rdzv-endpoint", endpoint, "--dry-run", "--json")
    assert proc.returncode == 0, proc.stderr
    cmd = json.loads(proc.stdout)["launches"][0]["command"]
    assert cmd[cmd.index("--rdzv-endpoint") + 1] == endpoint
