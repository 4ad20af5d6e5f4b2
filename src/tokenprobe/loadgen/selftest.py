"""The client's own ceiling: a trivial local stream server, and the client run against it.

The server (`python -m tokenprobe.loadgen.selftest`, or `StreamServer` in-process) answers every
POST to /v1/completions or /v1/chat/completions at once with `max_tokens` one-token SSE chunks,
usage on the last one and `[DONE]`, as one HTTP/1.1 keep-alive response; it does no inference, so
what limits a run against it is the client. It listens on 127.0.0.1 only and prints
`PORT <n>` when ready. Run as a subprocess it gets a core of its own, as a real server would.

`run_self_test` measures, against it: closed-loop requests/s and streamed tokens/s, the p99
send lag of an open-loop run at `lag_rate_per_s`, and the client's CPU seconds per request and
per streamed token (whose inverses are the ceiling on one dedicated core, a figure that holds
even when other work shares the machine). A measured result near these figures says more about
the client than about the server.
"""

from __future__ import annotations

import asyncio
import json
import select
import subprocess
import sys
import tempfile
import time
from typing import Any

from tokenprobe.errors import ServerError
from tokenprobe.loadgen.config import BenchConfig
from tokenprobe.loadgen.runner import run_bench_async, run_blocking
from tokenprobe.loadgen.summary import bench_summary
from tokenprobe.units import now_s

START_TIMEOUT_S = 30.0
_HEAD_END = b"\r\n\r\n"
_MODELS = b'{"object":"list","data":[{"id":"selftest","object":"model","owned_by":"tokenprobe"}]}'


def _event(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def sse_body(output_tokens: int, chat: bool) -> bytes:
    """The whole event stream of one response with `output_tokens` one-token chunks."""

    def choice(text: str, finish: str | None) -> dict[str, Any]:
        if chat:
            return {"index": 0, "delta": {"content": text}, "finish_reason": finish}
        return {"index": 0, "text": text, "finish_reason": finish}

    token = _event({"choices": [choice(" tok", None)]})
    usage = {"prompt_tokens": 8, "completion_tokens": output_tokens}
    usage["total_tokens"] = 8 + output_tokens
    last = _event({"choices": [choice("", "length")], "usage": usage})
    return token * output_tokens + last + b"data: [DONE]\n\n"


class _StreamProtocol(asyncio.Protocol):
    """HTTP/1.1 keep-alive, one request at a time per connection, canned answers."""

    def __init__(self, cache: dict[tuple[int, bool], bytes]) -> None:
        self._buf = b""
        self._cache = cache
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self._buf += data
        while self._answer_one():
            pass

    def _answer_one(self) -> bool:
        end = self._buf.find(_HEAD_END)
        if end < 0:
            return False
        head = self._buf[:end].decode("latin-1")
        length = _content_length(head)
        body_start = end + len(_HEAD_END)
        if len(self._buf) < body_start + length:
            return False
        body = self._buf[body_start : body_start + length]
        self._buf = self._buf[body_start + length :]
        assert self._transport is not None
        self._transport.write(self._response(head.split(" ", 2)[1], body))
        return True

    def _response(self, path: str, body: bytes) -> bytes:
        if path.endswith("/models"):
            return _http(200, "application/json", _MODELS)
        if path.endswith("/health"):
            return _http(200, "application/json", b'{"status":"ok"}')
        if not path.endswith("completions"):
            return _http(404, "application/json", b'{"error":"not found"}')
        try:
            tokens = int(json.loads(body).get("max_tokens", 16))
        except (ValueError, AttributeError):
            return _http(400, "application/json", b'{"error":"bad json"}')
        key = (tokens, path.endswith("chat/completions"))
        if key not in self._cache:
            self._cache[key] = _http(200, "text/event-stream", sse_body(*key))
        return self._cache[key]


def _content_length(head: str) -> int:
    for line in head.split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            return int(value.strip())
    return 0


def _http(status: int, content_type: str, body: bytes) -> bytes:
    head = f"HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\n"
    head += f"Content-Length: {len(body)}\r\nConnection: keep-alive\r\n\r\n"
    return head.encode() + body


async def serve(port: int = 0) -> asyncio.Server:
    """Start the trivial stream server on 127.0.0.1 (port 0: a free one)."""
    cache: dict[tuple[int, bool], bytes] = {}
    loop = asyncio.get_running_loop()
    return await loop.create_server(lambda: _StreamProtocol(cache), "127.0.0.1", port)


async def _serve_forever() -> None:
    server = await serve()
    port = server.sockets[0].getsockname()[1]
    sys.stdout.write(f"PORT {port}\n")
    sys.stdout.flush()
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    await reader.read()  # serve until the parent closes our stdin or exits


class StreamServerProcess:
    """The trivial server in a subprocess of its own (a core of its own, like a real server)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tokenprobe.loadgen.selftest"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], START_TIMEOUT_S)
        line = self.proc.stdout.readline() if ready else ""
        if not line.startswith("PORT "):
            self.close()
            raise ServerError(f"the self-test stream server did not start: {line!r}")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}/v1"

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> StreamServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


SHORT_OUTPUT_TOKENS = 16  # request-bound phase: per-request overhead dominates
LONG_OUTPUT_TOKENS = 512  # token-bound phase: per-chunk parsing dominates


async def _phase(url: str, **mode: Any) -> dict[str, Any]:
    """One run against the trivial server; adds the client's CPU seconds per request.

    CPU time (`time.process_time`, this process only: the server is another one) between the
    first and the last finished request, per request: unlike rates, it barely moves when other
    processes compete for the cores, so 1 / it is the ceiling on one dedicated core.
    """
    cpu_marks_s: list[float] = []
    with tempfile.TemporaryDirectory(prefix="tokenprobe-selftest-") as out:
        config = BenchConfig(
            url=url,
            model="selftest",
            input_tokens=8,
            seed=0,
            verify_input_tokens=False,
            timeout_s=30.0,
            out=out,  # records are written as in a real run: part of the client's cost
            **mode,
        )
        run = await run_bench_async(config, lambda _r: cpu_marks_s.append(time.process_time()))
    summary = bench_summary(run)
    spans = len(cpu_marks_s) - 1
    summary["cpu_s_per_request"] = (cpu_marks_s[-1] - cpu_marks_s[0]) / spans if spans else None
    return summary


async def measure_ceiling(
    url: str, duration_s: float = 3.0, concurrency: int = 32, lag_rate_per_s: float = 500.0
) -> dict[str, Any]:
    """This client's ceiling against the trivial server at `url`, in three phases of
    `duration_s` each: requests/s with short answers, streamed tokens/s with long ones (closed
    loop at `concurrency`), and send lag of an open loop at `lag_rate_per_s`."""
    started = now_s()
    closed = {"concurrency": concurrency, "duration_s": duration_s}
    short = await _phase(url, output_tokens=SHORT_OUTPUT_TOKENS, **closed)
    long = await _phase(url, output_tokens=LONG_OUTPUT_TOKENS, **closed)
    lag = await _phase(
        url, output_tokens=SHORT_OUTPUT_TOKENS, rate_per_s=lag_rate_per_s, duration_s=duration_s
    )
    return {
        "requests_per_s": short["requests_per_s"] or 0.0,
        "streamed_tokens_per_s": long["output_tokens_per_s"] or 0.0,
        "concurrency": concurrency,
        "output_tokens": {
            "requests_phase": SHORT_OUTPUT_TOKENS,
            "tokens_phase": LONG_OUTPUT_TOKENS,
        },
        "lag_rate_per_s": lag_rate_per_s,
        "lag_run_requests_per_s": lag["requests_per_s"] or 0.0,
        "send_lag_p50_s": lag["client"]["send_lag_s"]["p50"],
        "send_lag_p99_s": lag["client"]["send_lag_s"]["p99"],
        "cpu_s_per_request": short["cpu_s_per_request"],
        "cpu_s_per_token": _per(long["cpu_s_per_request"], LONG_OUTPUT_TOKENS),
        "one_core_requests_per_s": _inverse(short["cpu_s_per_request"]),
        "one_core_tokens_per_s": _inverse(_per(long["cpu_s_per_request"], LONG_OUTPUT_TOKENS)),
        "errors": {k: v for p in (short, long, lag) for k, v in p["errors"].items()},
        "wall_s": now_s() - started,
    }


def _per(value: float | None, count: int) -> float | None:
    return None if value is None else value / count


def _inverse(value: float | None) -> float | None:
    return None if not value else 1.0 / value


def run_self_test(duration_s: float = 3.0, concurrency: int = 32) -> dict[str, Any]:
    """Start the trivial server in a subprocess, measure the client against it, stop it."""
    with StreamServerProcess() as server:
        return run_blocking(measure_ceiling(server.url, duration_s, concurrency))


if __name__ == "__main__":
    asyncio.run(_serve_forever())
