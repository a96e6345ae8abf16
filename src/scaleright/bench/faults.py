"""Test-only fault injection for the workers, switched by ``SCALERIGHT_BENCH_FAULT`` (hidden, undocumented in --help).

Format ``KIND:rankN`` with KIND one of ``crash`` (raise an exception), ``hang`` (sleep forever), ``oom`` (allocate
far more memory than exists, so the real allocator fails: ``torch.OutOfMemoryError`` on CUDA, the CPU allocator's
"can't allocate memory" ``RuntimeError`` on CPU). Several faults may be separated by ``|``. A worker calls
``inject`` at the start of its first timed step.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scaleright.errors import InputError

if TYPE_CHECKING:
    import torch

__all__ = ["Fault", "parse_faults", "inject", "ENV"]

ENV = "SCALERIGHT_BENCH_FAULT"
KINDS = ("crash", "hang", "oom")


@dataclass(frozen=True)
class Fault:
    """One injected failure: what happens and on which global rank."""

    kind: str  # crash | hang | oom
    rank: int  # global rank that fails


def parse_faults(text: str | None) -> list[Fault]:
    """``'crash:rank1|hang:rank0'`` -> faults; empty or None -> []."""
    out = []
    for item in (text or "").split("|"):
        if not item.strip():
            continue
        m = re.fullmatch(r"\s*(\w+):rank(\d+)\s*", item)
        if not m or m.group(1) not in KINDS:
            raise InputError(f"{ENV}='{text}': each item must be KIND:rankN with KIND in {', '.join(KINDS)}")
        out.append(Fault(m.group(1), int(m.group(2))))
    return out


def inject(rank: int, device: torch.device) -> None:
    """Trigger the fault configured for ``rank`` in the environment, if any."""
    for fault in parse_faults(os.environ.get(ENV)):
        if fault.rank != rank:
            continue
        if fault.kind == "crash":
            raise RuntimeError(f"injected crash ({ENV}={fault.kind}:rank{rank})")
        if fault.kind == "hang":
            while True:
                time.sleep(3600)
        import torch

        torch.empty(2**62, dtype=torch.uint8, device=device)  # 4 EiB: no allocator can satisfy this
