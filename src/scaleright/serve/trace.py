"""Chrome trace export of a simulation (the Trace Event Format read by chrome://tracing and Perfetto).

Per replica (``pid``; per scheduler of a replica with pipelined micro-batches): its iteration runs on thread 0 as
complete ("X") events named by their shape (a run of n identical decode iterations is one event); each request's time to
first token and decode phase as async ("b"/"e") events on its replica. Timestamps are microseconds of simulated time. At
most ``max_requests`` requests are exported so a long run stays a file a browser opens.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["chrome_trace_events", "write_chrome_trace"]


def chrome_trace_events(fleet, *, max_requests: int = 20_000) -> dict:
    ev: list[dict] = []
    k = fleet.micro_batches  # schedulers per replica (pipelined stages): one process each
    for i, rows in enumerate(fleet.trace_rows or []):
        label = f"replica {i // k} micro-batch {i % k}" if k > 1 else f"replica {i}"
        ev.append({"ph": "M", "name": "process_name", "pid": i, "args": {"name": label}})
        for start, dur, n, b, p in rows:
            name = f"prefill {p} + decode {b}" if p else f"decode {b} x{n}"
            ev.append({"ph": "X", "name": name, "pid": i, "tid": 0, "ts": start * 1e6, "dur": dur * 1e6,
                       "args": {"iterations": n, "decode_batch": b, "prefill_tokens": p}})  # fmt: skip
    for r in fleet.requests[:max_requests]:
        if r.finish_s != r.finish_s:  # NaN: rejected or unfinished
            continue
        base = {"cat": "request", "id": r.id, "pid": max(r.replica, 0), "tid": 1}
        ev.append({**base, "ph": "b", "name": "ttft", "ts": r.arrival_s * 1e6,
                   "args": {"input_tokens": r.input_tokens, "output_tokens": r.output_tokens}})  # fmt: skip
        ev.append({**base, "ph": "e", "name": "ttft", "ts": r.first_token_s * 1e6})
        ev.append({**base, "ph": "b", "name": "decode", "ts": r.first_token_s * 1e6})
        ev.append({**base, "ph": "e", "name": "decode", "ts": r.finish_s * 1e6})
    return {"traceEvents": ev, "displayTimeUnit": "ms"}


def write_chrome_trace(path: Path | str, trace: dict, *, flag: str = "--trace-out") -> Path:
    """Write ``trace`` as JSON to ``path`` atomically."""
    from scaleright.textfile import write_atomic

    return write_atomic(flag, path, json.dumps(trace))
