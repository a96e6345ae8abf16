"""One serving replica: continuous batching over a paged KV cache, as vLLM V1's scheduler does it.

Every engine iteration (Orca, Yu et al. 2022; vLLM V1 ``Scheduler.schedule``):
1. every decoding sequence gets one token; a sequence whose KV length is a multiple of the block size needs a new
   16-token block first (Kwon et al. 2023, PagedAttention). When the free blocks do not suffice, the most recently
   admitted running request is preempted and returns to the head of the queue: by recompute (vLLM V1; its blocks
   are freed and it prefills its prompt and the tokens generated so far again) or by swap (vLLM V0: a decoding
   request's KV goes to host memory over PCIe and comes back whole when blocks for it and its next token are free;
   both transfers lengthen the iteration they happen in; a partial prefill is always recomputed);
2. the rest of the token budget (``max_num_batched_tokens`` minus the decode tokens) goes to chunked prefills:
   first the requests already prefilling, in admission order, then new requests from the queue (first come, first
   served; the head blocks the queue) while fewer than ``max_num_seqs`` run and their chunk's blocks are free;
3. the fused iteration's time comes from ``estimate.iteration.IterationModel``; a request whose prefill completes
   samples its first token at the iteration's end (TTFT), and each decode iteration samples one more token.
Prefix caching: the first ``hit_rate`` share of each prompt (whole blocks) is found in the cache and not computed
(it still occupies blocks: a conservative, unshared count).

Events happen per iteration or per state change, never per token. Between state changes (arrival that can be
admitted, completion, the KV cache running out) a decode-only batch only grows its contexts: its iterations cost
``a + s · context`` (``DecodeRun``), so a run of n iterations is summed in closed form and booked as one event.
KV blocks of the whole batch are counted without per-sequence events: a sequence's KV length minus the replica's
decode-iteration counter is constant while it decodes, so sequences fall into 16 phase classes and the blocks the
next n iterations need are (n // 16) · B plus a partial sum over the classes.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from typing import Protocol

from scaleright.errors import InputError
from scaleright.estimate.iteration import DecodeRun
from scaleright.serve.kernel import Environment, Priority
from scaleright.serve.request import DECODE, DONE, MIGRATED, PREFILL, REJECTED, SWAPPED, WAITING, Request

__all__ = ["BLOCK_TOKENS", "PriorityQueue", "Replica", "SchedulerConfig", "StepCost"]

BLOCK_TOKENS = 16  # vLLM's default KV block size (tokens per block)
PREEMPTION = ("recompute", "swap")
_END = Priority.ITERATION_END
_SCHED = Priority.SCHEDULE


class StepCost(Protocol):
    """What a replica asks of its cost model (``IterationModel``, ``serve.speculative.SpeculativeModel``)."""

    swap_s_per_token: float

    def time_s(self, *, prefill_tokens: int = 0, decode_batch: int = 0, decode_context_tokens: float = 0.0,
               prefill_pairs: float = 0.0, prefill_kv_tokens: float = 0.0, prefill_seqs: int = 0) -> float: ...

    def decode_run(self, batch: int, context0: float) -> DecodeRun: ...


class SchedulerConfig:
    """Continuous-batching limits of one replica (vLLM flags of the same names)."""

    __slots__ = ("max_num_batched_tokens", "max_num_seqs", "preemption", "prefix_cache_hit_rate")

    def __init__(self, max_num_seqs: int = 256, max_num_batched_tokens: int = 8192, prefix_cache_hit_rate: float = 0.0,
                 preemption: str = "recompute"):  # fmt: skip
        if not isinstance(max_num_seqs, int) or max_num_seqs < 1:
            raise InputError(f"max_num_seqs={max_num_seqs!r} must be a positive integer")
        if not isinstance(max_num_batched_tokens, int) or max_num_batched_tokens < max_num_seqs:
            raise InputError(f"max_num_batched_tokens={max_num_batched_tokens!r} must be an integer >= "
                             f"max_num_seqs({max_num_seqs}) "
                             "(each running sequence needs a token per iteration)")  # fmt: skip
        if not 0 <= prefix_cache_hit_rate < 1:
            raise InputError(f"prefix_cache_hit_rate={prefix_cache_hit_rate} must lie in [0, 1)")
        if preemption not in PREEMPTION:
            raise InputError(f"preemption={preemption!r} not allowed; allowed: {', '.join(PREEMPTION)}")
        self.preemption = preemption
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.prefix_cache_hit_rate = prefix_cache_hit_rate


class PriorityQueue:
    """The waiting queue of a replica shared by services of several priorities: the highest ``priority`` first,
    first come first served within one (vLLM ``--scheduling-policy priority`` without preemption by priority).
    Offers the few deque operations the scheduler uses."""

    __slots__ = ("_levels", "_n", "_order")

    def __init__(self) -> None:
        self._levels: dict[int, deque[Request]] = {}
        self._order: list[int] = []  # priorities, highest first
        self._n = 0

    def _level(self, p: int) -> deque[Request]:
        q = self._levels.get(p)
        if q is None:
            q = self._levels[p] = deque()
            self._order = sorted(self._levels, reverse=True)
        return q

    def append(self, req: Request) -> None:
        self._level(req.priority).append(req)
        self._n += 1

    def appendleft(self, req: Request) -> None:
        self._level(req.priority).appendleft(req)
        self._n += 1

    def _head(self) -> deque[Request]:
        for p in self._order:
            q = self._levels[p]
            if q:
                return q
        raise IndexError("pop from an empty queue")

    def popleft(self) -> Request:
        self._n -= 1
        return self._head().popleft()

    def __getitem__(self, i: int) -> Request:
        if i != 0:
            raise IndexError("only the head of the queue is read")
        return self._head()[0]

    def __len__(self) -> int:
        return self._n

    def __bool__(self) -> bool:
        return self._n > 0


def _blocks(tokens: int) -> int:
    return -(-tokens // BLOCK_TOKENS)


class Replica:
    """Scheduler state, KV blocks and statistics of one replica."""

    def __init__(self, env: Environment, model: StepCost, config: SchedulerConfig, *, kv_blocks: int,
                 index: int = 0, on_finish: Callable[[Environment, Request], None] | None = None,
                 trace: list | None = None, next_arrival: Callable[[int], float] | None = None,
                 priorities: bool = False):  # fmt: skip
        if kv_blocks < 1:
            raise InputError(f"kv_blocks={kv_blocks}: the KV cache holds no block of {BLOCK_TOKENS} tokens")
        self.env, self.model, self.cfg, self.index = env, model, config, index
        self.total_blocks = self.free = kv_blocks
        self.on_finish = on_finish
        self.next_arrival = next_arrival  # time of the next request routed here, when the router knows it ahead
        self.trace = trace  # list of (start_s, duration_s, iterations, decode batch, prefill tokens), or None
        self.waiting: deque[Request] | PriorityQueue = PriorityQueue() if priorities else deque()
        self.prefilling: list[Request] = []
        self._heap: list[tuple[int, int, int, Request]] = []  # (finish counter, order, epoch, request)
        self.B = 0  # decoding sequences
        self.g = 0  # decode iterations run (every iteration advances every decoding sequence)
        self.sum_base = 0  # Σ (KV length − g) over decoding sequences
        self.phase = [0] * BLOCK_TOKENS  # decoding sequences per (KV length − g) mod block size
        self._order = 0
        self.busy = False
        self._wake = False
        self._epoch = 0  # of the pending iteration-end event
        self._run: tuple | None = None  # (start_s, DecodeRun | None, n, chunks)
        self.in_system = 0
        self.finished: list[Request] = []
        self.rejected: list[Request] = []
        self.preemptions = 0
        self.iterations = 0
        self.busy_s = 0.0
        self.kv_block_s = 0.0  # ∫ used blocks dt
        self.system_s = 0.0  # ∫ requests in system dt
        self.queue_s = 0.0  # ∫ waiting requests dt
        self._last = 0.0
        self.itl: list[tuple[float, int]] = []  # (mean iteration seconds of a run, tokens it sampled in decode)
        self._joining: list[Request] = []  # swapped-in requests that join the decode batch when this iteration ends
        self._spare = 0  # blocks held back for the joining requests' next token, returned when they join
        self._swap_tokens = 0  # KV tokens to move over the host link in the next iteration (swap out and in)
        self.swapped_tokens = 0  # all KV tokens swapped out or in

    # -- bookkeeping -------------------------------------------------------------------------------------------
    def _tick(self, now: float) -> None:
        dt = now - self._last
        if dt:
            self.system_s += self.in_system * dt
            self.queue_s += len(self.waiting) * dt
            self._last = now

    @property
    def running(self) -> int:
        return self.B + len(self.prefilling)

    def outstanding(self) -> int:
        return self.in_system

    # -- arrivals ----------------------------------------------------------------------------------------------
    def submit(self, env: Environment, req: Request) -> None:
        """A request arrives at this replica now."""
        self._tick(env.now)
        req.replica = self.index
        if _blocks(req.input_tokens + req.output_tokens) > self.total_blocks:
            req.state = REJECTED  # longer than the whole KV cache (vLLM refuses prompts beyond max_model_len)
            self.rejected.append(req)
            env.record("reject", req.id)
            if self.on_finish is not None:
                self.on_finish(env, req)
            return
        hit = self.cfg.prefix_cache_hit_rate
        if hit and req.state == WAITING:
            req.cached_tokens = req.done = min(int(req.input_tokens * hit) // BLOCK_TOKENS * BLOCK_TOKENS,
                                               req.input_tokens - 1)  # fmt: skip
        self.in_system += 1
        head = not self.waiting
        self.waiting.append(req)
        if env.log is not None:
            env.record("arrive", req.id, self.index)
        if not self.busy:
            if not self._wake:
                self._wake = True
                env.schedule(env.now, _SCHED, self._step)
        elif head and self._run is not None and self._run[1] is not None and not self._run[4]:  # noqa: SIM102
            # a decode-only run is in flight: cut it at the iteration boundary after now if the request could join
            if self.running < self.cfg.max_num_seqs and self.cfg.max_num_batched_tokens > self.B:
                start, run, n, _, _ = self._run
                n2 = run.iterations_until(env.now - start, n)
                if n2 < n:
                    self._epoch += 1
                    self._run = (start, run, n2, None, True)
                    env.schedule(max(start + run.total_s(n2), env.now), _END, self._end, self._epoch)

    # -- KV blocks of decoding sequences -----------------------------------------------------------------------
    def _decode_blocks(self, n: int) -> int:
        """Blocks the decoding batch needs over the next ``n`` iterations."""
        q, r = divmod(n, BLOCK_TOKENS)
        need = q * self.B
        g, ph = self.g, self.phase
        for j in range(r):
            need += ph[(-(g + j)) % BLOCK_TOKENS]
        return need

    def _max_decode_iterations(self) -> int:
        """Most iterations the decoding batch can run on the free blocks (>= 1 when the next one fits)."""
        B, free = self.B, self.free
        q, rem = divmod(free, B)
        g, ph = self.g, self.phase
        acc, j = 0, 0
        while j < BLOCK_TOKENS - 1:
            acc += ph[(-(g + j)) % BLOCK_TOKENS]
            if acc > rem:
                break
            j += 1
        return BLOCK_TOKENS * q + j

    def _add_decode(self, req: Request) -> None:
        req.state = DECODE
        req.base = req.done - self.g
        req.epoch += 1
        self.phase[req.base % BLOCK_TOKENS] += 1
        self.sum_base += req.base
        self.B += 1
        heapq.heappush(self._heap, (self.g + req.output_tokens - req.generated, req.order, req.epoch, req))

    def _remove_decode(self, req: Request) -> int:
        """Take ``req`` out of the decoding batch; returns the blocks it held."""
        self.phase[req.base % BLOCK_TOKENS] -= 1
        self.sum_base -= req.base
        self.B -= 1
        req.epoch += 1
        return _blocks(req.base + self.g)

    # -- preemption --------------------------------------------------------------------------------------------
    def _preempt_latest(self, env: Environment) -> None:
        victim = max(self.prefilling, key=lambda r: r.order, default=None)
        for _, order, epoch, r in self._heap:
            if r.state == DECODE and r.epoch == epoch and (victim is None or order > victim.order):
                victim = r
        assert victim is not None, "preemption with nothing running"
        if victim.state == DECODE:
            # while decoding, KV length = prompt + tokens sampled − 1 (the last sampled token is not in KV yet)
            victim.generated = victim.base + self.g - victim.input_tokens + 1
        if victim.state == DECODE and self.cfg.preemption == "swap":
            kv = victim.base + self.g
            self.free += self._remove_decode(victim)
            victim.state = SWAPPED  # its KV goes to host memory and comes back whole: no recompute
            victim.done = kv
            self._swap_tokens += kv
            self.swapped_tokens += kv
        else:
            if victim.state == DECODE:
                self.free += self._remove_decode(victim)
            else:  # a partial prefill is recomputed in both modes (vLLM swaps only running decodes)
                self.prefilling.remove(victim)
                self.free += victim.blocks
            victim.state = WAITING
            victim.target = victim.input_tokens + victim.generated
            victim.done = victim.cached_tokens
        victim.blocks = 0
        victim.preemptions += 1
        self.preemptions += 1
        self._tick(env.now)
        self.waiting.appendleft(victim)
        env.record("preempt", victim.id)

    # -- the scheduler -----------------------------------------------------------------------------------------
    def _schedule_prefills(self, env: Environment) -> list[tuple[Request, int]]:
        """Token budget left by the decode tokens to running prefills, then to new requests (blocks reserved)."""
        cfg = self.cfg
        dec_need = self.phase[(-self.g) % BLOCK_TOKENS] if self.B else 0
        self.free -= dec_need  # the decode tokens of this iteration come first
        budget = cfg.max_num_batched_tokens - self.B
        chunks: list[tuple[Request, int]] = []
        for r in self.prefilling:
            if budget <= 0:
                break
            take = min(r.target - r.done, budget)
            need = _blocks(r.done + take) - r.blocks
            if need > self.free:
                take = (r.blocks + self.free) * BLOCK_TOKENS - r.done
                if take <= 0:
                    break
                need = self.free
            self.free -= need
            r.blocks += need
            budget -= take
            chunks.append((r, take))
        waiting = self.waiting
        if waiting:
            self._tick(env.now)
        while waiting and budget > 0 and self.running + len(self._joining) < cfg.max_num_seqs:
            r = waiting[0]
            if r.state == SWAPPED or r.state == MIGRATED:  # KV comes whole; it decodes from the next iteration on
                need = _blocks(r.done + 1)  # with room for its next token, or it would preempt itself at once
                if need > self.free:
                    break
                waiting.popleft()
                self.free -= need
                r.order = self._order
                self._order += 1
                if r.state == SWAPPED:  # back in over the host link (a migrated KV arrived before it queued)
                    self._swap_tokens += r.done
                    self.swapped_tokens += r.done
                self._joining.append(r)
                self._spare += need - _blocks(r.done)  # held for it until it joins the batch
                continue
            take = min(r.target - r.done, budget)
            need = _blocks(r.done + take)
            if need > self.free:
                break
            waiting.popleft()
            self.free -= need
            r.blocks = need
            r.state = PREFILL
            r.order = self._order
            self._order += 1
            self.prefilling.append(r)
            budget -= take
            chunks.append((r, take))
        self.free += dec_need  # booked when the iteration ends
        return chunks

    def _step(self, env: Environment) -> None:
        self._wake = False
        while True:
            while self.B and self.phase[(-self.g) % BLOCK_TOKENS] > self.free:
                self._preempt_latest(env)
            chunks = self._schedule_prefills(env)
            if chunks or self.B or self._joining or not self.prefilling:
                break
            self._preempt_latest(env)  # prefills hold every block and none can go on: free the latest one's
        if not chunks and not self.B and not self._joining:
            assert not self.waiting, "a queued request fits an empty cache by the admission rule"
            self.busy = False
            self._run = None
            return
        self.busy = True
        ctx = self.sum_base + self.B * self.g
        swap_s = 0.0
        if self._swap_tokens:
            swap_s = self._swap_tokens * self.model.swap_s_per_token  # host link, serialised with the step
            self._swap_tokens = 0
        if chunks or swap_s or self._joining:
            p = pairs = kv_tok = 0.0
            for r, take in chunks:
                p += take
                pairs += take * (r.done + (take + 1) / 2)
                kv_tok += r.done + take
            dur = self.model.time_s(prefill_tokens=int(p), decode_batch=self.B, decode_context_tokens=ctx,
                                    prefill_pairs=pairs, prefill_kv_tokens=kv_tok,
                                    prefill_seqs=len(chunks))  # fmt: skip
            self._run = (env.now, None, 1, chunks, True)
            end = env.now + dur + swap_s
        else:
            heap = self._heap
            while heap[0][3].state != DECODE or heap[0][2] != heap[0][3].epoch:
                heapq.heappop(heap)
            n = min(heap[0][0] - self.g, self._max_decode_iterations())
            run = self.model.decode_run(self.B, ctx)
            end = env.now + run.total_s(n)
            cut = False
            if self.next_arrival is not None and not self.waiting:
                # the router knows when the next request comes here: end the run at the iteration it can join
                t_next = self.next_arrival(self.index)
                cut = True
                if t_next < end and self.running < self.cfg.max_num_seqs and self.cfg.max_num_batched_tokens > self.B:
                    n = run.iterations_until(t_next - env.now, n)
                    end = max(env.now + run.total_s(n), t_next)
            self._run = (env.now, run, n, None, cut)
        self._epoch += 1
        env.schedule(end, _END, self._end, self._epoch)

    def _end(self, env: Environment, epoch: int) -> None:
        if epoch != self._epoch:
            return  # the run was cut short by an arrival; its new end is booked
        assert self._run is not None
        start, _, n, chunks, _ = self._run
        now = env.now
        dur = now - start
        used0 = self.total_blocks - self.free
        B = self.B
        if not B:
            new = 0
        elif n == 1:
            new = self.phase[(-self.g) % BLOCK_TOKENS]
        else:
            new = self._decode_blocks(n)
        self.free -= new
        g = self.g = self.g + n
        self.iterations += n
        self.busy_s += dur
        self.kv_block_s += (used0 + used0 + new) / 2 * dur
        if B:
            self.itl.append((dur / n, n * B))
        if self.trace is not None:
            self.trace.append((start, dur, n, B, sum(t for _, t in chunks) if chunks else 0))
        if env.log is not None:
            env.record("iterations", n, B, sum(t for _, t in chunks) if chunks else 0, start)
        done: list[Request] = []
        heap = self._heap
        if heap and heap[0][0] <= g:
            pop = heapq.heappop
            while heap and heap[0][0] <= g:
                _, _, ep, r = pop(heap)
                if r.state == DECODE and r.epoch == ep:
                    self.free += self._remove_decode(r)
                    r.generated = r.output_tokens
                    done.append(r)
        if chunks:
            for r, take in chunks:
                r.done += take
                if r.done < r.target:
                    continue
                self.prefilling.remove(r)
                r.generated += 1
                if r.generated == 1:
                    r.first_token_s = now
                    if env.log is not None:
                        env.record("first_token", r.id)
                if r.generated >= r.output_tokens:
                    self.free += r.blocks
                    done.append(r)
                else:
                    self._add_decode(r)
                r.blocks = 0
        if self._joining:
            self.free += self._spare  # the next step's decode check hands these blocks to them first
            self._spare = 0
            for r in self._joining:
                self._add_decode(r)
            self._joining = []
        if done:
            self._tick(now)
            self.in_system -= len(done)
            self.finished += done
            log, cb = env.log, self.on_finish
            for r in done:
                r.state = DONE
                r.finish_s = now
                if log is not None:
                    env.record("finish", r.id)
                if cb is not None:
                    cb(env, r)
        self._run = None
        if env.peek() > now:
            self._step(env)  # nothing else happens at this instant: schedule the next iteration right away
        else:
            self._wake = True  # arrivals or other ends at this instant come first
            env.schedule(now, _SCHED, self._step)

    def integrals(self, now: float) -> tuple[float, float, float, float]:
        """(∫ busy dt, ∫ used KV blocks dt, ∫ waiting requests dt, ∫ requests in system dt) from 0 to ``now``,
        the iteration in flight counted up to ``now`` (at its starting block count)."""
        self._tick(now)
        busy, kv = self.busy_s, self.kv_block_s
        if self._run is not None:
            dt = now - self._run[0]
            busy += dt
            kv += (self.total_blocks - self.free) * dt
        return busy, kv, self.queue_s, self.system_s

    def close(self, now: float) -> None:
        """Bring the time integrals up to ``now`` (end of the simulation)."""
        self._tick(now)

