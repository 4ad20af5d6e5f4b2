"""A FAKE OpenAI-ish server (aiohttp, 127.0.0.1) that misbehaves on purpose, in a thread.

Used only where the real llama.cpp server cannot produce the case: malformed SSE, an HTML page,
a stream without usage, a dropped connection. The path picks the behaviour:
`http://127.0.0.1:PORT/<mode>/v1/completions`. A request with max_tokens=1 (the runner's
preflight) is answered properly in the modes that misbehave mid-run ("malformed", "drop",
"error_event"), so that a run starts and each later request is counted as an error.

Tests add their own hostile behaviours with `server.script(name, handler)`: `handler(request,
max_tokens)` answers every request of that mode except the preflight's (max_tokens=1, answered
properly, unless `preflight=True`). `server.requests[mode]` counts the requests the server
received per mode (re-sends included), so a test can tell a re-send from a single send.
"""

from __future__ import annotations

import asyncio
import collections
import json
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

MODES = (
    "ok",
    "html",
    "json_body",
    "malformed",
    "not_sse",
    "no_usage",
    "no_usage_tokenize",
    "drop",
    "error_event",
    "http500",
    "huge",
    "no_models",
)
HUGE_TEXT_CHARS = 8_000_000
Script = Callable[[web.Request, int], Awaitable[web.StreamResponse]]
SCRIPTS = web.AppKey("scripts", dict)
REQUESTS = web.AppKey("requests", collections.Counter)
WHOLE = web.AppKey("whole", set)


def _chunk(text: str, finish: str | None = None, usage: dict[str, int] | None = None) -> bytes:
    obj: dict[str, Any] = {"choices": [{"index": 0, "text": text, "finish_reason": finish}]}
    if usage is not None:
        obj["usage"] = usage
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


async def _stream(request: web.Request, chunks: list[bytes]) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    for chunk in chunks:
        await resp.write(chunk)
    return resp


def good_stream(n: int) -> list[bytes]:
    """The chunks of a well-formed completions stream of `n` tokens, usage and [DONE]."""
    usage = {"prompt_tokens": 3, "completion_tokens": n, "total_tokens": 3 + n}
    return [*(_chunk(" w") for _ in range(n)), _chunk("", "length", usage), b"data: [DONE]\n\n"]


async def raw_stream(request: web.Request, chunks: list[bytes]) -> web.StreamResponse:
    """Send `chunks` as they are (an SSE response) and end the response."""
    return await _stream(request, chunks)


async def _completions(request: web.Request) -> web.StreamResponse:
    mode = request.match_info["mode"]
    request.app[REQUESTS][mode] += 1
    n = int((await request.json()).get("max_tokens", 4))
    scripts: dict[str, Script] = request.app[SCRIPTS]
    if mode in scripts:
        if n == 1 and mode not in request.app[WHOLE]:
            return await _stream(request, good_stream(1))
        return await scripts[mode](request, n)
    good = [_chunk(" w") for _ in range(n)]
    usage = {"prompt_tokens": 3, "completion_tokens": n, "total_tokens": 3 + n}
    done = [_chunk("", "length", usage), b"data: [DONE]\n\n"]
    if mode == "html":
        return web.Response(text="<html><body>It works!</body></html>", content_type="text/html")
    if mode == "json_body":
        return web.json_response({"choices": [{"text": "hi", "finish_reason": "stop"}]})
    if mode == "http500":
        return web.json_response({"error": "boom"}, status=500)
    if mode == "huge":  # one 8 MB chunk: must not trip a line-length limit or crawl
        return await _stream(request, [_chunk("x" * HUGE_TEXT_CHARS), *done])
    if mode == "ok" or n == 1:
        return await _stream(request, good + done)
    if mode == "malformed":
        return await _stream(request, [*good[:2], b"data: {not json\n\n", *done])
    if mode == "not_sse":
        return await _stream(request, [*good[:2], b"hello there\n\n", *done])
    if mode in ("no_usage", "no_usage_tokenize"):
        return await _stream(request, [*good, _chunk("", "length"), b"data: [DONE]\n\n"])
    if mode == "error_event":
        return await _stream(request, [*good[:1], b'error: {"message":"slot died"}\n\n'])
    if mode == "drop":
        resp = await _stream(request, good[:2])
        assert request.transport is not None
        request.transport.abort()  # the connection drops mid-stream
        return resp
    raise web.HTTPNotFound()


async def _models(request: web.Request) -> web.Response:
    """GET /v1/models: one model in mode "ok", an empty list in "no_models", else 404."""
    mode = request.match_info["mode"]
    if mode == "ok":
        return web.json_response({"object": "list", "data": [{"id": "fake-model"}]})
    if mode == "no_models":
        return web.json_response({"object": "list", "data": []})
    raise web.HTTPNotFound()


async def _tokenize(request: web.Request) -> web.Response:
    if request.match_info["mode"] != "no_usage_tokenize":
        raise web.HTTPNotFound()
    body = await request.json()
    return web.json_response({"tokens": list(range(len(body["content"].split())))})


class FakeServer:
    """`with FakeServer() as s: s.url("malformed")` -> http://127.0.0.1:PORT/malformed/v1."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.scripts: dict[str, Script] = {}
        self.requests: collections.Counter[str] = collections.Counter()
        self.whole: set[str] = set()  # scripts that answer the preflight too

    def url(self, mode: str) -> str:
        assert mode in MODES or mode in self.scripts, mode
        return f"http://127.0.0.1:{self.port}/{mode}/v1"

    def script(self, name: str, handler: Script, preflight: bool = False) -> str:
        """Serve mode `name` with `handler` (the preflight's request too with `preflight`);
        returns its API URL."""
        self.scripts[name] = handler
        if preflight:
            self.whole.add(name)
        return self.url(name)

    async def _start(self) -> None:
        app = web.Application()
        app[SCRIPTS] = self.scripts
        app[REQUESTS] = self.requests
        app[WHOLE] = self.whole
        app.router.add_post("/{mode}/v1/completions", _completions)
        app.router.add_post("/{mode}/v1/chat/completions", _completions)
        app.router.add_post("/{mode}/tokenize", _tokenize)
        app.router.add_get("/{mode}/v1/models", _models)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert isinstance(server, asyncio.Server)
        self.port = server.sockets[0].getsockname()[1]

    def __enter__(self) -> FakeServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._runner is not None:
            cleanup = asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop)
            cleanup.result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()
