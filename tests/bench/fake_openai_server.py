"""A small OpenAI-compatible streaming server on 127.0.0.1 whose token timing is known exactly, for ``bench serve``.

``POST /v1/completions`` with ``stream: true`` answers, for a prompt of P tokens (a list of token ids, or a string
counted as whitespace-separated words) and ``max_tokens`` N:
- the first chunk ``ttft_base_s + ttft_per_prompt_token_s · P`` after the request was read,
- each of the other N − 1 chunks ``itl_s`` after the previous one (one token, the text " t", per chunk),
- then, when asked (``stream_options.include_usage``), a usage chunk, and ``data: [DONE]``.
Every request is served on its own (no batching, no queue), so the latencies a client measures are these plus the
loopback and scheduling delays of this machine, which only ever add time.

``GET /v1/models`` lists ``model`` owned by ``owner``; ``GET /version`` returns ``{"version": version}``. A request
for another model gets HTTP 404 with an OpenAI-style error body; ``fail_every=k`` answers every k-th completion
request with HTTP 500. Plain asyncio streams, HTTP/1.1 with ``Connection: close`` (no framework needed).
"""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass, field


@dataclass
class FakeTiming:
    ttft_base_s: float = 0.020
    ttft_per_prompt_token_s: float = 1e-4
    itl_s: float = 0.010

    def ttft_s(self, prompt_tokens: int) -> float:
        return self.ttft_base_s + self.ttft_per_prompt_token_s * prompt_tokens


@dataclass
class FakeOpenAIServer:
    timing: FakeTiming = field(default_factory=FakeTiming)
    model: str = "fake-model"
    owner: str = "vllm"
    version: str = "0.0.0-fake"
    fail_every: int = 0
    seen: list[dict] = field(default_factory=list)  # every completion request body, in arrival order
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> FakeOpenAIServer:
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(self._loop)
            self._server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=serve, daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        async def shutdown() -> None:
            self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:] if ":" in ln)}
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            if method == "GET" and path == "/v1/models":
                await self._json(writer, 200, {"object": "list", "data": [
                    {"id": self.model, "object": "model", "owned_by": self.owner}]})
            elif method == "GET" and path == "/version":
                await self._json(writer, 200, {"version": self.version})
            elif method == "POST" and path == "/v1/completions":
                await self._complete(writer, json.loads(body))
            else:
                await self._json(writer, 404, {"error": {"message": f"no route {method} {path}"}})
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _json(self, writer: asyncio.StreamWriter, status: int, obj: dict) -> None:
        data = json.dumps(obj).encode()
        writer.write(f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
                     "Connection: close\r\n\r\n".encode() + data)
        await writer.drain()

    async def _complete(self, writer: asyncio.StreamWriter, req: dict) -> None:
        loop = asyncio.get_running_loop()
        t_read = loop.time()
        self.seen.append(req)
        if req.get("model") != self.model:
            await self._json(writer, 404, {"error": {"message": f"The model `{req.get('model')}` does not exist."}})
            return
        if self.fail_every and len(self.seen) % self.fail_every == 0:
            await self._json(writer, 500, {"error": {"message": "injected failure"}})
            return
        prompt = req["prompt"]
        p = len(prompt) if isinstance(prompt, list) else len(str(prompt).split())
        n = int(req["max_tokens"])
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(max(0.0, t_read + self.timing.ttft_s(p) - loop.time()))
        for k in range(n):
            if k:
                await asyncio.sleep(self.timing.itl_s)
            chunk = {"id": "cmpl-fake", "object": "text_completion", "model": self.model,
                     "choices": [{"index": 0, "text": " t", "finish_reason": "length" if k == n - 1 else None}]}
            writer.write(f"data: {json.dumps(chunk)}\n\n".encode())
            await writer.drain()
        if (req.get("stream_options") or {}).get("include_usage"):
            usage = {"prompt_tokens": p, "completion_tokens": n, "total_tokens": p + n}
            writer.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode())
        writer.write(b"data: [DONE]\n\n")
        await writer.drain()
