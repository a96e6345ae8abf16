"""The reaper process of one run directory: ``python -m scaleright.bench.reaper RUN_DIR DIR_ENV`` with stdin the read
end of a pipe only the launcher writes to (``bench/lifeline.py``, ``Reaper``).

End of file on stdin means the launcher closed the pipe or died (even by ``kill -9``: the kernel closes a dead
process's files). If the run directory still has its owner file, the launcher did not clean up: stop what remains of
the run and remove the directory. A module of its own, imported by nothing, so ``-m`` runs it exactly once.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from scaleright.bench.lifeline import OWNER_FILE, reap


def main(argv: list[str]) -> None:
    """Wait for end of file on stdin, then reap ``argv[0]`` if its owner file is still there."""
    run_dir, dir_env = Path(argv[0]), argv[1]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C meant for the launcher is not for the reaper
    while sys.stdin.buffer.read(4096):
        pass
    if (run_dir / OWNER_FILE).exists():
        reap(run_dir, dir_env=dir_env)


if __name__ == "__main__":
    main(sys.argv[1:])
