"""What would make a training layout fit: the smallest single changes, each computed by the memory model.

When ``training_memory`` says a layout does not fit, ``fit_hints`` tries one change at a time — more recomputation,
a higher ZeRO stage, sequence parallelism, half the micro-batch, twice the GPUs (as tensor or data parallelism), a
GPU with more memory from the catalog, 4-bit frozen weights for a fine-tune (QLoRA) — and returns those that fit,
with the memory each would need; when no single change does, the fewest GPUs (doubling) that fit with ZeRO-3 and
full recomputation. Nothing is estimated apart from the model: each hint is ``training_memory`` on the
changed layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scaleright.errors import ScalerightError
from scaleright.estimate.layout import Layout
from scaleright.estimate.memory.training import training_memory

if TYPE_CHECKING:
    from scaleright.catalog.gpus import Accelerator
    from scaleright.workload.spec import TransformerSpec

__all__ = ["FitHint", "fit_hints"]


@dataclass(frozen=True)
class FitHint:
    """One change that makes the layout fit: the flags that express it, and the memory per GPU it needs."""

    change: str  # the CLI flags, e.g. "--recompute full"
    total_gb: float
    gpu: str
    gpus: int

    def as_dict(self) -> dict[str, Any]:
        return {"change": self.change, "total_gb": self.total_gb, "gpu": self.gpu, "gpus": self.gpus}


def fit_hints(spec: TransformerSpec, *, layout: Layout, seq_len: int, gpu: Accelerator,
              gpus_catalog: list[Accelerator] | None = None, task: str = "pretrain", **memory_kw: Any,
              ) -> list[FitHint]:  # fmt: skip
    """The single changes (see the module docstring) under which ``layout`` fits, smallest memory first within each
    kind of change; empty when the layout already fits or nothing single does."""
    def total(lay: Layout, t: str = task) -> float | None:
        try:
            lay.validate(spec)
            return training_memory(spec, layout=lay, seq_len=seq_len, task=t, **memory_kw).total_gb
        except ScalerightError:
            return None  # the changed layout is not valid for this model

    base = total(layout)
    if base is None or base <= gpu.memory_gb:
        return []
    n = layout.gpus
    tries: list[tuple[str, Layout, int, str]] = []  # (flags, layout, gpus, task)
    for rc in ("selective", "full"):
        if ("none", "selective", "full").index(rc) > ("none", "selective", "full").index(
                layout.recompute if layout.recompute in ("none", "selective", "full") else "none"):  # fmt: skip
            tries.append((f"--recompute {rc}", layout.replace(recompute=rc), n, task))
    if layout.dp * layout.cp > 1:
        tries += [(f"--zero {z}", layout.replace(zero=z), n, task) for z in range(layout.zero + 1, 4)]
    if layout.tp > 1 and not layout.sequence_parallel:
        tries.append(("--sequence-parallel", layout.replace(sequence_parallel=True), n, task))
    if layout.micro_batch > 1:
        mb = layout.micro_batch // 2
        tries.append((f"--micro-batch {mb}", layout.replace(micro_batch=mb), n, task))
    if layout.tp * 2 <= max(gpu.gpus_per_node, 1):
        tries.append((f"--gpus {2 * n} --tp {2 * layout.tp}", layout.replace(tp=2 * layout.tp), 2 * n, task))
    z = max(layout.zero, 3)
    tries.append((f"--gpus {2 * n}" + (f" --zero {z}" if z != layout.zero else ""),
                  layout.replace(dp=2 * layout.dp, zero=z), 2 * n, task))  # fmt: skip
    if task in ("full-finetune", "lora"):
        tries.append(("--task qlora", layout.replace(zero=0 if layout.zero < 3 else 3), n, "qlora"))
    out: list[FitHint] = []
    for flags, lay, count, t in tries:
        need = total(lay, t)
        if need is not None and need <= gpu.memory_gb:
            out.append(FitHint(flags, need, gpu.id, count))
    if not out:  # no single change: the fewest GPUs (doubling) with ZeRO-3 and full recomputation
        for k in (2, 4, 8, 16, 32, 64):
            lay = layout.replace(dp=k * layout.dp, zero=3, recompute="full")
            need = total(lay)
            if need is not None and need <= gpu.memory_gb:
                out.append(FitHint(f"--gpus {k * n} --zero 3 --recompute full", need, gpu.id, k * n))
                break
    for g in sorted(gpus_catalog or [], key=lambda x: x.memory_gb):  # the smallest GPU that holds it as it is
        if g.memory_gb >= base and g.id != gpu.id:
            out.append(FitHint(f"--gpu {g.id}", base, g.id, n))
            break
    return out
