"""Test-only fault injection for the workers, switched by ``SCALERIGHT_BENCH_FAULT`` (hidden, undocumented in --help).

Format ``KIND:rankN``; several faults may be separated by ``|`` (``crash:rank1|hang:rank0``). A worker calls
``inject`` at the start of its first timed step. KIND is one of:

- ``crash``: raise an exception;
- ``hang``: sleep forever;
- ``oom``: allocate far more memory than exists, so the real allocator fails (``torch.OutOfMemoryError`` on CUDA,
  the CPU allocator's "can't allocate memory" ``RuntimeError`` on CPU);
- ``sigkill``: SIGKILL itself, as the kernel's out-of-memory killer does (nothing in the process runs after it);
- ``segv``: SIGSEGV itself (default action restored first), as a crash in native code does;
- ``exit``: ``os._exit(3)``, a silent exit with no Python error (no atexit handlers, no traceback);
- ``keyboardinterrupt``: raise ``KeyboardInterrupt``, as a stray SIGINT would;
- ``systemexit``: call ``sys.exit(4)``.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scaleright.errors import InputError

if TYPE_CHECKING:
    import torch

__all__ = ["Fault", "parse_faults", "inject", "ENV", "KINDS", "EXIT_CODE", "SYSEXIT_CODE"]

ENV = "SCALERIGHT_BENCH_FAULT"
KINDS = ("crash", "hang", "oom", "sigkill", "segv", "exit", "keyboardinterrupt", "systemexit")
EXIT_CODE = 3  # the silent os._exit of ``exit``
SYSEXIT_CODE = 4  # the sys.exit of ``systemexit``


@dataclass(frozen=True)
class Fault:
    """One injected failure: what happens and on which global rank."""

    kind: str  # one of KINDS
    rank: int  # global rank that fails


def parse_faults(text: str | None) -> list[Fault]:
    """``'crash:rank1|hang:rank0'`` -> faults; empty or None -> []."""
    out = []
    for item in (text or "").split("|"):
        if not item.strip():
            continue
        m = re.fullmatch(r"\s*([a-z]+):rank(\d{1,7})\s*", item)
        if not m or m.group(1) not in KINDS:
            raise InputError(f"{ENV}='{text}': each item must be KIND:rankN with KIND in {', '.join(KINDS)}")
        out.append(Fault(m.group(1), int(m.group(2))))
    return out


def inject(rank: int, device: torch.device) -> None:
    """Trigger the fault configured for ``rank`` in the environment, if any."""
    for fault in parse_faults(os.environ.get(ENV)):
        if fault.rank != rank:
            continue
        kind = fault.kind
        if kind == "crash":
            raise RuntimeError(f"injected crash ({ENV}={kind}:rank{rank})")
        if kind == "hang":
            while True:
                time.sleep(3600)
        if kind == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        if kind == "segv":
            signal.signal(signal.SIGSEGV, signal.SIG_DFL)  # no Python-level handler may intercept it
            os.kill(os.getpid(), signal.SIGSEGV)
            time.sleep(60)  # delivery is asynchronous only in theory; never run on
        if kind == "exit":
            os._exit(EXIT_CODE)
        if kind == "keyboardinterrupt":
            raise KeyboardInterrupt
        if kind == "systemexit":
            sys.exit(SYSEXIT_CODE)
        if kind == "oom":
            import torch

            torch.empty(2**62, dtype=torch.uint8, device=device)  # 4 EiB: no allocator can satisfy this
