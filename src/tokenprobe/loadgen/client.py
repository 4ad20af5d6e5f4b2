"""The streaming client: one request to an OpenAI-compatible server -> one RequestRecord.

What is measured, on the one clock (`tokenprobe.units.now_s`), relative to the run's start `t0_s`:
- `sent_s`: just before the request is handed to the connection;
- `token_times_s`: the arrival time of every streamed chunk that carries text (one entry per
  chunk; when the server's usage says more tokens than chunks, some chunks carried several
  tokens and ITL is then counted chunk to chunk, as vLLM's benchmark_serving does);
- `first_token_s`: the first such chunk (vLLM and GuideLLM: first non-empty text/delta);
- `finish_s`: the end of the stream (`[DONE]` or the server closing after a finish_reason).

Token counts come from the server's `usage` (asked for with `stream_options.include_usage`; the
`token_count_source` is "usage"); without it, from the server's `/tokenize` endpoint on the
streamed text ("tokenizer"), else one token per text chunk ("chunks").

A failed request is data, never an exception: `error_kind` is "http_<status>", "timeout",
"connect" (nothing listening), "disconnect" (the connection dropped or the stream stopped
before its end), "malformed_stream" (not SSE, or data that is not an OpenAI chunk),
"stream_error" (the server reported an error inside the stream) or "client_error". Every wait is
bounded by the request's `timeout_s`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

import aiohttp
from yarl import URL

from tokenprobe.loadgen.sse import (
    LineSplitter,
    RequestFailedError,
    StreamState,
    server_figures,
    take_line,
    token_count,
)
from tokenprobe.records import RequestRecord
from tokenprobe.units import MiB, now_s

Endpoint = Literal["completions", "chat"]
ENDPOINTS: tuple[str, ...] = ("completions", "chat")
READ_BUFSIZE_BYTES = 4 * MiB  # aiohttp's flow-control window; 64 KiB by default
ERROR_BODY_BYTES = 600
STALE_RETRIES = 3
TOKENIZE_TIMEOUT_S = 30.0  # /tokenize calls are set-up and bookkeeping, not measured requests
KEEPALIVE_S = 4.0  # below the 5 s idle timeout of cpp-httplib (llama.cpp) and uvicorn (vLLM)


@dataclass(frozen=True, slots=True)
class Target:
    """Where and how to send: the server's base URL (…/v1), the model name and the API shape.

    `api_key` is held in memory only (repr hides it; it is never written to a run folder).
    `ignore_eos` asks the server to generate exactly `max_tokens` (vLLM and llama.cpp honour it).
    """

    base_url: str
    model: str
    endpoint: Endpoint = "completions"
    timeout_s: float = 600.0
    api_key: str | None = field(default=None, repr=False)
    ignore_eos: bool = True
    extra_body: Mapping[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        path = "/chat/completions" if self.endpoint == "chat" else "/completions"
        return self.base_url.rstrip("/") + path

    @property
    def root_url(self) -> str:
        """The server root (base URL without a trailing /v1), where /tokenize and /health live."""
        base = self.base_url.rstrip("/")
        return base[: -len("/v1")] if base.endswith("/v1") else base


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One request: its prompt, how many tokens to ask for, and its input length if known."""

    request_id: str
    prompt: str
    max_output_tokens: int
    input_tokens: int | None = None


def request_body(target: Target, spec: RequestSpec) -> dict[str, Any]:
    """The JSON body of a streaming request with usage asked for."""
    body: dict[str, Any] = {
        "model": target.model,
        "max_tokens": spec.max_output_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if target.endpoint == "chat":
        body["messages"] = [{"role": "user", "content": spec.prompt}]
    else:
        body["prompt"] = spec.prompt
    if target.ignore_eos:
        body["ignore_eos"] = True
    body.update(target.extra_body)
    return body


class StreamClient:
    """An aiohttp session that sends streaming requests and turns each into a RequestRecord.

    Use as `async with StreamClient(target, t0_s) as client: record = await client.send(...)`.
    `max_connections` 0 means no limit (open-loop rate mode needs one connection per request in
    flight).
    """

    def __init__(self, target: Target, t0_s: float, max_connections: int = 0) -> None:
        self.target = target
        self.t0_s = t0_s
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self._headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if target.api_key:
            self._headers["Authorization"] = f"Bearer {target.api_key}"
        self._tokenize_works: bool | None = None
        self._timeout = aiohttp.ClientTimeout(total=target.timeout_s)
        self._url = URL(target.url)  # parsed once, not once per request

    async def __aenter__(self) -> StreamClient:
        connector = aiohttp.TCPConnector(
            limit=self._max_connections, ttl_dns_cache=300, keepalive_timeout=KEEPALIVE_S
        )
        self._session = aiohttp.ClientSession(
            connector=connector, read_bufsize=READ_BUFSIZE_BYTES, auto_decompress=False
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("StreamClient used outside `async with`")
        return self._session

    async def send(
        self, spec: RequestSpec, scheduled_s: float, timeout_s: float | None = None
    ) -> RequestRecord:
        """Send one request now; `scheduled_s` (run-relative) is when it should have been sent.

        `timeout_s` overrides the target's for this request (the preflight uses a longer one).

        A pooled keep-alive connection that the server already closed fails before any response
        (llama.cpp closes after each stream, with a race against reuse); such a request never
        reached the server, so it is sent again on a fresh connection, at most
        `STALE_RETRIES` times, and `sent_s` is the time of the send that counted.
        """
        payload = json.dumps(request_body(self.target, spec)).encode()
        limit_s = self.target.timeout_s if timeout_s is None else timeout_s
        timeout = self._timeout if timeout_s is None else aiohttp.ClientTimeout(total=limit_s)
        for attempt in range(STALE_RETRIES + 1):
            stream = StreamState(stale_retries=attempt)
            sent_abs_s = now_s()
            try:
                await self._stream(payload, timeout, stream)
            except RequestFailedError as exc:
                return self._failed(spec, scheduled_s, sent_abs_s, stream, exc.kind, exc.message)
            except Exception as exc:  # every failure is data, never a crashed run
                if attempt < STALE_RETRIES and _stale_connection(exc, stream):
                    continue
                kind, message = classify_exception(exc, limit_s)
                return self._failed(spec, scheduled_s, sent_abs_s, stream, kind, message)
            return await self._succeeded(spec, scheduled_s, sent_abs_s, stream)
        raise AssertionError("unreachable: the last attempt always returns")

    async def _stream(
        self, payload: bytes, timeout: aiohttp.ClientTimeout, st: StreamState
    ) -> None:
        async with self.session.post(
            self._url, data=payload, headers=self._headers, timeout=timeout
        ) as resp:
            st.got_response = True
            if resp.status != 200:
                body = await resp.content.read(ERROR_BODY_BYTES)
                text = body.decode("utf-8", "replace").strip()
                raise RequestFailedError(f"http_{resp.status}", f"HTTP {resp.status}: {text}")
            content_type = resp.headers.get("Content-Type", "?")
            splitter = LineSplitter()
            async for data in resp.content.iter_any():
                if st.done:
                    continue  # drain the chunked-encoding end, so the connection is reusable
                t = now_s()
                for line in splitter.feed(data):
                    if take_line(line, t, st, content_type):
                        st.end_s = t
                        break
            if st.done:
                return
            st.end_s = now_s()
            if splitter.pending:
                take_line(splitter.pending, st.end_s, st, content_type)
            if st.finish_reason is None and not st.done:
                raise RequestFailedError(
                    "disconnect", "stream ended before [DONE] or a finish_reason"
                )

    def _base(
        self, spec: RequestSpec, scheduled_s: float, sent_abs_s: float, st: StreamState
    ) -> dict[str, Any]:
        t0 = self.t0_s
        times = [t - t0 for t in st.chunk_times_s]
        return {
            "request_id": spec.request_id,
            "scheduled_s": scheduled_s,
            "sent_s": sent_abs_s - t0,
            "first_token_s": times[0] if times else None,
            "token_times_s": times,
            "extra": server_figures(st),
        }

    def _failed(
        self,
        spec: RequestSpec,
        scheduled_s: float,
        sent_abs_s: float,
        st: StreamState,
        kind: str,
        message: str,
    ) -> RequestRecord:
        end_abs_s = st.end_s if st.end_s is not None else now_s()
        return RequestRecord(
            **self._base(spec, scheduled_s, sent_abs_s, st),
            finish_s=end_abs_s - self.t0_s,
            input_tokens=spec.input_tokens or 0,
            output_tokens=len(st.chunk_times_s),
            error_kind=kind,
            error_message=message[:1000],
            token_count_source="chunks",
        )

    async def _succeeded(
        self, spec: RequestSpec, scheduled_s: float, sent_abs_s: float, st: StreamState
    ) -> RequestRecord:
        end_abs_s = st.end_s if st.end_s is not None else now_s()
        input_tokens, output_tokens, source = await self._counts(spec, st)
        return RequestRecord(
            **self._base(spec, scheduled_s, sent_abs_s, st),
            finish_s=end_abs_s - self.t0_s,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            token_count_source=source,
        )

    async def _counts(self, spec: RequestSpec, st: StreamState) -> tuple[int, int, str]:
        """(input_tokens, output_tokens, source): usage, else /tokenize, else chunks."""
        usage = st.usage or {}
        completion = token_count(usage.get("completion_tokens"))
        prompt = token_count(usage.get("prompt_tokens"))
        input_tokens = prompt if prompt is not None else (spec.input_tokens or 0)
        if completion is not None:
            return input_tokens, completion, "usage"
        counted = await self.count_tokens("".join(st.text_parts))
        if counted is not None:
            return input_tokens, counted, "tokenizer"
        return input_tokens, len(st.chunk_times_s), "chunks"

    async def count_tokens(self, text: str) -> int | None:
        """Token count of `text` by the server's /tokenize (llama.cpp, vLLM); None if it has none.

        Sends both llama.cpp's key (`content`) and vLLM's (`prompt`, with `model`); both answer
        `{"tokens": [...]}`. Special tokens (BOS) are not added: this counts generated text.
        """
        if self._tokenize_works is False:
            return None
        body: dict[str, Any] = {"content": text, "prompt": text, "model": self.target.model}
        body.update(add_special=False, add_special_tokens=False)
        tokens = await self._tokenize(body)
        self._tokenize_works = tokens is not None
        return None if tokens is None else len(tokens)

    async def tokenize_prompt(self, text: str) -> int | None:
        """Token count of a prompt as the server will count it (with its special tokens)."""
        body = {"content": text, "prompt": text, "model": self.target.model, "add_special": True}
        tokens = await self._tokenize(body)
        return None if tokens is None else len(tokens)

    async def _tokenize(self, body: dict[str, Any]) -> list[Any] | None:
        """POST /tokenize; None when the server has none or it fails (retried on a stale socket)."""
        timeout = aiohttp.ClientTimeout(total=TOKENIZE_TIMEOUT_S)
        url = self.target.root_url + "/tokenize"
        payload = json.dumps(body).encode()
        doc: object = None
        for attempt in range(STALE_RETRIES + 1):
            try:
                async with self.session.post(
                    url, data=payload, headers=self._headers, timeout=timeout
                ) as resp:
                    if resp.status != 200:
                        return None
                    doc = await resp.json(content_type=None)
                    break
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
                if attempt == STALE_RETRIES or isinstance(exc, aiohttp.ClientConnectorError):
                    return None
            except (aiohttp.ClientError, TimeoutError, ValueError):
                return None
        tokens = doc.get("tokens") if isinstance(doc, dict) else None
        return tokens if isinstance(tokens, list) else None


def _stale_connection(exc: Exception, st: StreamState) -> bool:
    """A reused connection found closed before any response: the server never saw the request."""
    if st.got_response or isinstance(exc, aiohttp.ClientConnectorError):
        return False
    return isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientOSError)


def classify_exception(exc: Exception, timeout_s: float) -> tuple[str, str]:
    """Map a client-side exception to (error_kind, message)."""
    if isinstance(exc, TimeoutError):  # aiohttp's timeouts subclass it
        return "timeout", f"no complete response within timeout_s={timeout_s:g}"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return "connect", f"cannot connect: {exc}"
    if isinstance(
        exc,
        aiohttp.ServerDisconnectedError
        | aiohttp.ClientPayloadError
        | aiohttp.ClientOSError
        | ConnectionError,
    ):
        return "disconnect", f"connection dropped: {type(exc).__name__}: {exc}"
    if isinstance(exc, aiohttp.ClientError):
        return "client_error", f"{type(exc).__name__}: {exc}"
    return "client_error", f"unexpected {type(exc).__name__}: {exc}"
