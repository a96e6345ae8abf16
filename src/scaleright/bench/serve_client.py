"""The HTTP side of ``bench serve``: one OpenAI-compatible ``/v1/completions`` request streamed and timed, the
server's identity, and the endpoint URL checked.

A request is ``POST {endpoint}/v1/completions`` with ``stream: true``; the server answers with Server-Sent Events,
one ``data: {json}`` line per chunk and ``data: [DONE]`` last (OpenAI's streaming format, which vLLM, SGLang,
TensorRT-LLM's ``trtllm-serve`` and llama.cpp's server all speak). Timing follows ``vllm bench serve``
(``backend_request_func.async_request_openai_completions``): the clock starts just before the request is sent;
TTFT is the arrival of the first chunk carrying text; each later chunk with text adds one inter-chunk gap (ITL);
the end-to-end latency is the arrival of the last chunk with text. Output tokens are the server's
``usage.completion_tokens`` when it reports one (``stream_options: {include_usage: true}``), else the number of
chunks with text (one token a chunk in vLLM and SGLang; a server that sends several tokens a chunk under-counts).

The prompt is a list of token ids (the completions API accepts one; the length is then exact, with no tokenizer
on the client): ids drawn uniformly from ``PROMPT_TOKEN_IDS``, ordinary tokens in the vocabularies of Llama,
Mistral, Qwen and GPT-2 (their special tokens sit at the ends of the range). ``ignore_eos: true`` (a vLLM / SGLang
/ TensorRT-LLM extension; others ignore it) asks for exactly ``max_tokens`` tokens.

Engine identity: ``GET /v1/models`` (``owned_by``: ``vllm``, ``sglang``, ``llamacpp``, ``tensorrt_llm``) and
``GET /version`` (``{"version": ...}`` in vLLM, SGLang and trtllm-serve); the ``Server`` response header as a
last resort (llama.cpp sends ``llama.cpp``).
"""

from __future__ import annotations

import json
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from scaleright.errors import InputError

__all__ = ["ENGINE_OF_OWNER", "PROMPT_TOKEN_IDS", "RequestResult", "check_endpoint", "identify", "one_request"]

PROMPT_TOKEN_IDS = (1_000, 20_000)  # [low, high) of the random prompt token ids
ENGINE_OF_OWNER = {"vllm": "vllm", "sglang": "sglang", "llamacpp": "llama.cpp", "llama.cpp": "llama.cpp",
                   "tensorrt_llm": "trtllm", "trtllm": "trtllm", "tensorrt-llm": "trtllm"}  # fmt: skip
ERROR_CHARS = 300  # characters of a server's error body kept in a message


@dataclass
class RequestResult:
    """One request as measured (seconds from its send; ``error`` set when it failed)."""

    index: int
    input_tokens: int
    sent_s: float = 0.0  # seconds since the run started
    ttft_s: float | None = None
    e2e_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    output_tokens: int = 0
    output_chunks: int = 0
    usage_reported: bool = False
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.ttft_s is not None and self.e2e_s is not None


def check_endpoint(url: str, *, flag: str = "--endpoint") -> str:
    """``url`` as the server's base (scheme, host, port; a trailing ``/v1`` dropped), or one line saying why not."""
    if not isinstance(url, str) or not url.strip() or len(url) > 2048 or not url.isprintable():
        raise InputError(f"{flag}: give the server's URL, e.g. http://127.0.0.1:8000 (1 to 2048 printable characters)")
    try:
        parts = urllib.parse.urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise InputError(f"{flag}={url!r}: not a URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"{flag}={url!r}: need http:// or https:// and a host, e.g. http://127.0.0.1:8000")
    if parts.query or parts.fragment:
        raise InputError(f"{flag}={url!r}: give the server's base URL, without ?query or #fragment")
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[:-3]
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}{f':{port}' if port is not None else ''}{path}"


def _short_error(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())[:ERROR_CHARS]


async def identify(client: Any, endpoint: str, model: str) -> dict[str, Any]:
    """The server's engine name and version, and its model list; ``InputError`` (one line) when it cannot be
    reached or does not serve ``model``."""
    import httpx

    try:
        resp = await client.get("/v1/models")
    except httpx.HTTPError as exc:
        raise InputError(f"--endpoint={endpoint}: cannot reach the server ({_short_error(exc)})") from None
    if resp.status_code != 200:
        raise InputError(f"--endpoint={endpoint}: GET /v1/models answered HTTP {resp.status_code}; is this an "
                         "OpenAI-compatible server?")  # fmt: skip
    try:
        data = resp.json().get("data") or []
        models = [str(m.get("id")) for m in data if isinstance(m, dict)]
        owners = [str(m.get("owned_by")) for m in data if isinstance(m, dict) and m.get("owned_by")]
    except (ValueError, AttributeError):
        raise InputError(f"--endpoint={endpoint}: GET /v1/models did not return an OpenAI model list") from None
    if models and model not in models:
        shown = ", ".join(models[:10]) + (", ..." if len(models) > 10 else "")
        raise InputError(f"--model={model!r}: not served by {endpoint}; it serves: {shown}")
    version = None
    try:
        v = await client.get("/version")
        if v.status_code == 200:
            version = v.json().get("version")
            version = str(version) if version is not None else None
    except (httpx.HTTPError, ValueError, AttributeError):
        pass
    server_header = resp.headers.get("server")
    owner = owners[0] if owners else None
    engine = owner or server_header
    profile = ENGINE_OF_OWNER.get((owner or "").lower()) or ENGINE_OF_OWNER.get((server_header or "").lower())
    return {"engine": engine, "engine_version": version, "engine_profile": profile, "models": models,
            "server_header": server_header,
            "engine_source": "GET /v1/models owned_by" if owner else ("Server header" if server_header else None)}


async def one_request(client: Any, payload: dict[str, Any], result: RequestResult, t0: float) -> RequestResult:
    """Send ``payload`` to ``/v1/completions``, stream the answer and fill ``result`` (timing as the module says).
    A transport error or an error answer is kept in ``result.error``; cancellation propagates."""
    import httpx

    st = time.perf_counter()
    result.sent_s = st - t0
    last = st
    usage_tokens: int | None = None
    try:
        async with client.stream("POST", "/v1/completions", json=payload) as resp:
            if resp.status_code != 200:
                body = (await resp.aread()).decode("utf-8", "replace")
                result.error = f"HTTP {resp.status_code}: {' '.join(body.split())[:ERROR_CHARS]}"
                return result
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue  # blank separators, ": keep-alive" comments, "event:" lines
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                now = time.perf_counter()
                try:
                    chunk = json.loads(data)
                except ValueError:
                    result.error = f"not a JSON event: {data[:80]!r}"
                    return result
                if not isinstance(chunk, dict):
                    continue
                if chunk.get("error"):
                    result.error = f"server error in the stream: {str(chunk['error'])[:ERROR_CHARS]}"
                    return result
                usage = chunk.get("usage")
                if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
                    usage_tokens = usage["completion_tokens"]
                choices = chunk.get("choices") or []
                text = choices[0].get("text") if choices and isinstance(choices[0], dict) else None
                if text:
                    if result.ttft_s is None:
                        result.ttft_s = now - st
                    else:
                        result.itl_s.append(now - last)
                    last = now
                    result.output_chunks += 1
    except (httpx.HTTPError, httpx.StreamError) as exc:  # transport, protocol, timeout; a stream used wrongly
        result.error = f"{type(exc).__name__}: {_short_error(exc)}"
        return result
    if result.ttft_s is None:
        result.error = "the stream ended without any text"
        return result
    result.e2e_s = last - st
    result.usage_reported = usage_tokens is not None
    result.output_tokens = usage_tokens if usage_tokens is not None else result.output_chunks
    return result
