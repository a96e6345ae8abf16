"""One replica of an engine that keeps ``k`` micro-batches in flight over its pipeline stages, as ``k`` schedulers.

vLLM V0 builds ``pipeline_parallel_size`` schedulers ("virtual engines"), each with ``num_gpu_blocks // pp`` KV
blocks, and gives a new request to the one with the fewest unfinished requests; TensorRT-LLM and SGLang keep pp
micro-batches in flight the same way (``estimate.engines``, ``overlaps_pipeline_stages``). ``PipelinedReplica``
is that: ``k`` ``Replica`` schedulers sharing the replica's KV blocks in equal parts, each iteration one
micro-batch's (``IterationModel.micro_batches``), behind the few attributes a pool of ``serve.fleet`` reads of a
replica. The GPU busy time is the schedulers' summed busy time over ``k``: each micro-batch's iteration occupies
each of the pp = k stages for a k-th of it. (``serve.simulate`` puts the schedulers straight into its cluster.)
"""

from __future__ import annotations

from collections.abc import Callable

from scaleright.errors import InputError
from scaleright.serve.kernel import Environment
from scaleright.serve.replica import Replica, SchedulerConfig, StepCost
from scaleright.serve.request import Request

__all__ = ["PipelinedReplica"]


class _Queues:
    """The waiting queues of several schedulers, counted together."""

    __slots__ = ("parts",)

    def __init__(self, parts: list[Replica]):
        self.parts = parts

    def __len__(self) -> int:
        return sum(len(r.waiting) for r in self.parts)


class PipelinedReplica:
    """``micro_batches`` schedulers of one replica (module docstring); ``kv_blocks`` is the replica's total."""

    def __init__(self, env: Environment, model: StepCost, config: SchedulerConfig, *, kv_blocks: int,
                 micro_batches: int, index: int = 0, on_finish: Callable[[Environment, Request], None] | None = None,
                 priorities: bool = False):  # fmt: skip
        if kv_blocks // micro_batches < 1:
            raise InputError(f"kv_blocks={kv_blocks}: too few to give each of the {micro_batches} micro-batches in "
                             "flight one block")  # fmt: skip
        self.index = index
        self.k = micro_batches
        self.parts = [Replica(env, model, config, kv_blocks=kv_blocks // micro_batches, index=index,
                              on_finish=on_finish, priorities=priorities) for _ in range(micro_batches)]  # fmt: skip

    def submit(self, env: Environment, req: Request) -> None:
        """To the scheduler with the fewest requests (vLLM V0's choice of virtual engine), the first on a tie."""
        min(self.parts, key=lambda r: r.in_system).submit(env, req)

    @property
    def in_system(self) -> int:
        return sum(r.in_system for r in self.parts)

    @property
    def busy(self) -> bool:
        return any(r.busy for r in self.parts)

    @property
    def waiting(self) -> _Queues:
        """The schedulers' queues, sized as one (the pool counts the requests waiting)."""
        return _Queues(self.parts)

    @property
    def busy_s(self) -> float:
        return sum(r.busy_s for r in self.parts) / self.k

    @property
    def system_s(self) -> float:
        return sum(r.system_s for r in self.parts)

    @property
    def preemptions(self) -> int:
        return sum(r.preemptions for r in self.parts)

    def close(self, now: float) -> None:
        for r in self.parts:
            r.close(now)
