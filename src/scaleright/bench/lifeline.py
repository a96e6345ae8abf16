"""What ties the benchmark's processes to the command that started them, so none outlives it.

The chain is launcher (``scaleright bench ...``) -> torchrun (its own session) -> workers (``bench/rank.py``, each
in its own session, as torchrun starts them). Killing the launcher with ``kill -9`` runs none of its code, so:

- every worker follows its parent two ways: ``PR_SET_PDEATHSIG`` (Linux ``prctl(2)``, through ctypes) has the
  kernel SIGKILL it the moment torchrun exits, and ``watch_parent``, a daemon thread polling ``os.getppid()`` (a
  process whose parent exits is re-parented at once) and the launcher's pid twice a second, ends it once either is
  gone (the portable fallback, and the link to the launcher). torchrun then sees its workers fail and exits.
- the run directory goes with the launcher too: ``Reaper`` starts a small process (its own session) that holds the
  read end of a pipe only the launcher writes to. End of file there means the launcher has exited; if the directory
  still has its ``owner.pid`` file (the launcher removes the whole directory when it cleans up, or just that file
  when it keeps the directory), the reaper stops what remains of the run (``reap``) and removes the directory.
- ``sweep_stale`` removes run directories whose owner is gone at the start of the next launch: the last resort
  when the reaper was killed too.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["set_parent_death_signal", "watch_parent", "pid_alive", "environ_has", "sweep_stale", "reap",
           "Reaper", "OWNER_FILE", "RUN_DIR_PREFIX", "LAUNCHER_ENV", "TORCHRUN_PID_FILE"]

LAUNCHER_ENV = "SCALERIGHT_BENCH_LAUNCHER_PID"  # pid of the scaleright process that owns the run
OWNER_FILE = "owner.pid"  # in a run directory: the launcher's pid
TORCHRUN_PID_FILE = "torchrun.pid"  # in a run directory: torchrun's pid (it leads its own process group)
RUN_DIR_PREFIX = "scaleright-bench-"
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def set_parent_death_signal(sig: int) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent exits; False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def pid_alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie (exited, not yet reaped by its parent) counts as gone."""
    if pid <= 0:  # kill(0 or -N, 0) would ask about whole process groups
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc (not Linux): kill(0) is all we know
    return stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")


def watch_parent(on_orphaned: Callable[[], None], *, launcher_pid: int | None = None,
                 period_s: float = 0.5) -> threading.Thread:
    """Start a daemon thread that calls ``on_orphaned()`` once this process's parent changes or, if given, the
    launcher's pid is gone."""
    parent = os.getppid()

    def loop() -> None:
        while True:
            if os.getppid() != parent or (launcher_pid is not None and not pid_alive(launcher_pid)):
                on_orphaned()
                return
            time.sleep(period_s)

    thread = threading.Thread(target=loop, name="scaleright-lifeline", daemon=True)
    thread.start()
    return thread


def sweep_stale(tmp_dir: str | None = None) -> list[Path]:
    """Remove run directories under ``tmp_dir`` (default: the temp dir) whose owner process is gone."""
    removed = []
    for path in Path(tmp_dir or tempfile.gettempdir()).glob(RUN_DIR_PREFIX + "*"):
        try:
            owner = int((path / OWNER_FILE).read_text().strip())
        except (OSError, ValueError):
            continue  # not ours, or kept on purpose (SCALERIGHT_BENCH_KEEP removes the owner file)
        if not pid_alive(owner):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


class Reaper:
    """The reaper of one run directory (see the module doc). ``close()`` once the launcher has cleaned up: the
    reaper then sees end of file, finds no owner file and exits. A dead launcher's pipe is closed by the kernel."""

    def __init__(self, run_dir: Path, *, dir_env: str):
        import subprocess

        read_end, self._write_end = os.pipe()  # non-inheritable (PEP 446): no other child holds the write end
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "scaleright.bench.reaper", str(run_dir), dir_env], stdin=read_end,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        except BaseException:
            os.close(self._write_end)
            raise
        finally:
            os.close(read_end)

    def close(self, timeout_s: float = 30.0) -> None:
        """Close the pipe and wait for the reaper to finish."""
        import subprocess

        if self._write_end >= 0:
            os.close(self._write_end)
            self._write_end = -1
        try:
            self._proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


def environ_has(pid: int, key: str, value: str) -> bool:
    """True when process ``pid`` runs with ``key=value`` in its environment (Linux ``/proc``; elsewhere True, as
    nothing better is known)."""
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes()
    except FileNotFoundError:
        return not sys.platform.startswith("linux")  # on Linux: the process is gone
    except OSError:
        return False
    return f"{key}={value}".encode() in env.split(b"\0")


def reap(run_dir: Path, *, dir_env: str, grace_s: float = 5.0) -> None:
    """Stop every process of the run in ``run_dir`` (torchrun's group, then each worker's) and remove the
    directory. Used by the reaper once the launcher is gone without cleaning up."""
    from scaleright.bench.progress import read_progress

    pids = []
    try:
        pids.append(int((run_dir / TORCHRUN_PID_FILE).read_text()))
    except (OSError, ValueError):
        pass
    pids += [int(b["pid"]) for b in read_progress(run_dir).values() if str(b.get("pid", "")).isdigit()]
    ours = [p for p in pids if pid_alive(p) and environ_has(p, dir_env, str(run_dir))]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in ours:
            try:
                os.killpg(pid, sig)  # torchrun and every worker lead their own session
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + grace_s
        while any(pid_alive(p) for p in ours) and time.monotonic() < deadline:
            time.sleep(0.05)
    shutil.rmtree(run_dir, ignore_errors=True)
