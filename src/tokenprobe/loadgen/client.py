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
"connect" (nothing listening), "connection_closed" (the server closed or reset the connection, or
ended the stream before its end), "malformed_stream" (not SSE, data that is not an OpenAI chunk,
or a usage/timings number that is NaN, infinite, negative or not a number), "stream_error" (the
server reported an error inside the stream) or "client_error". Every wait is bounded by the
request's `timeout_s`. Error texts pass through the run's redaction (no key in a record).

Re-sends (RFC 9112 §9.3.1: a client must not retry a non-idempotent request on its own unless
it can tell the request was never applied). aiohttp retries only idempotent methods, never
these POSTs. This client re-sends a request at most once (MAX_RETRIES), and only when it went out
on a pooled keep-alive connection that turned out closed before any response byte: the server's
close of an idle connection crossed the send (llama.cpp closes its connection after every
stream). The re-send goes out on a fresh connection, the record says so (`extra["retries"]`, and
`client.retried_requests` in the summary), and from then on the client stops reusing
connections (`keep_alive` False), so the race cannot recur. A connection dropped on a fresh
connection, or after the response began, is never re-sent: it is "connection_closed".
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

import aiohttp

from tokenprobe.loadgen.credentials import Credentials, api_root, credentials, with_path
from tokenprobe.loadgen.failures import (
    classify_exception,
    error_text,
    lost_on_pooled_connection,
    on_reuse,
)
from tokenprobe.loadgen.sse import (
    MAX_LINE_BYTES,
    LineSplitter,
    MalformedStreamError,
    RequestFailedError,
    StreamState,
    server_figures,
    take_line,
    token_count,
)
from tokenprobe.records import RequestRecord, redact
from tokenprobe.units import MiB, now_s

Endpoint = Literal["completions", "chat"]
ENDPOINTS: tuple[str, ...] = ("completions", "chat")
READ_BUFSIZE_BYTES = 4 * MiB  # aiohttp's flow-control window; 64 KiB by default
MAX_RETRIES = 1  # see the module docstring: only a send lost on a pooled connection found closed
TOKENIZE_TIMEOUT_S = 30.0  # /tokenize calls are set-up and bookkeeping, not measured requests
KEEPALIVE_S = 4.0  # below the 5 s idle timeout of cpp-httplib (llama.cpp) and uvicorn (vLLM)


@dataclass(frozen=True, slots=True)
class Target:
    """Where and how to send: the server's base URL (…/v1), the model name and the API shape.

    `api_key` is held in memory only (repr hides it; it is never written to a run folder);
    `base_url` may hold userinfo and key-like query parameters (`loadgen.credentials`): `url` is
    the shown form, with those masked. `ignore_eos` asks the server to generate
    exactly `max_tokens` (vLLM and llama.cpp honour it).
    """

    base_url: str
    model: str
    endpoint: Endpoint = "completions"
    timeout_s: float = 600.0
    api_key: str | None = field(default=None, repr=False)
    ignore_eos: bool = True
    extra_body: Mapping[str, Any] = field(default_factory=dict)

    @property
    def credentials(self) -> Credentials:
        return credentials(self.base_url, self.api_key)

    @property
    def path(self) -> str:
        return "/chat/completions" if self.endpoint == "chat" else "/completions"

    @property
    def url(self) -> str:
        """The completions URL as shown (no userinfo, key-like values masked)."""
        shown = self.credentials.shown_url
        base, sep, query = shown.partition("?")
        return base.rstrip("/") + self.path + sep + query

    @property
    def secrets(self) -> tuple[str, ...]:
        return self.credentials.secrets


@dataclass(frozen=True, slots=True)
class WireRequest:
    """One request as sent: its prompt, how many tokens to ask for, its input length if known,
    and a dataset's chat messages (sent instead of the prompt on the chat endpoint). Its shape
    (arrival, lengths, prefix group) is a `tokenprobe.workload.RequestSpec`."""

    request_id: str
    prompt: str
    max_output_tokens: int
    input_tokens: int | None = None
    messages: tuple[tuple[str, str], ...] = ()
    prefix_group: int | None = None  # the shared prefix it opens with (None: none); recorded


def _figures(spec: WireRequest, st: StreamState) -> dict[str, float | str]:
    """The record's extra: the server's figures and, for a prompt opening with a shared
    prefix, its group (what `diagnose --predict` replays the prefix cache with)."""
    extra = server_figures(st)
    if spec.prefix_group is not None:
        extra["prefix_group"] = float(spec.prefix_group)
    return extra


def request_body(target: Target, spec: WireRequest) -> dict[str, Any]:
    """The JSON body of a streaming request with usage asked for."""
    body: dict[str, Any] = {
        "model": target.model,
        "max_tokens": spec.max_output_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if target.endpoint == "chat":
        turns = spec.messages or (("user", spec.prompt),)
        body["messages"] = [{"role": role, "content": content} for role, content in turns]
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

    def __init__(
        self,
        target: Target,
        t0_s: float,
        max_connections: int = 0,
        max_line_bytes: int = MAX_LINE_BYTES,
    ) -> None:
        self.target = target
        self.max_line_bytes = max_line_bytes
        self.t0_s = t0_s
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self._fresh: aiohttp.ClientSession | None = None  # a new connection per request
        creds = target.credentials
        self.secrets = creds.secrets
        self._headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if creds.authorization:
            self._headers["Authorization"] = creds.authorization
        self._tokenize_works: bool | None = None
        self._timeout = aiohttp.ClientTimeout(total=target.timeout_s)
        self._url = with_path(creds.request_url, target.path)  # parsed once, not per request
        self._tokenize_url = with_path(api_root(creds.request_url), "/tokenize")
        self.keep_alive = True  # False once the server was seen closing pooled connections
        self.connections_opened = 0

    async def __aenter__(self) -> StreamClient:
        trace = aiohttp.TraceConfig()
        trace.on_connection_reuseconn.append(on_reuse)
        trace.on_connection_create_end.append(self._on_create)
        connector = aiohttp.TCPConnector(
            limit=self._max_connections, ttl_dns_cache=300, keepalive_timeout=KEEPALIVE_S
        )
        fresh = aiohttp.TCPConnector(limit=self._max_connections, force_close=True)
        options: dict[str, Any] = {
            "read_bufsize": READ_BUFSIZE_BYTES,
            "auto_decompress": False,
            "trace_configs": [trace],
        }
        self._session = aiohttp.ClientSession(connector=connector, **options)
        self._fresh = aiohttp.ClientSession(connector=fresh, **options)
        return self

    async def _on_create(self, *_: object) -> None:
        self.connections_opened += 1

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for session in (self._session, self._fresh):
            if session is not None:
                await session.close()
        self._session = self._fresh = None

    @property
    def session(self) -> aiohttp.ClientSession:
        """The session for the next send: pooled while the server keeps connections alive."""
        session = self._session if self.keep_alive else self._fresh
        if session is None:
            raise RuntimeError("StreamClient used outside `async with`")
        return session

    @property
    def fresh_session(self) -> aiohttp.ClientSession:
        if self._fresh is None:
            raise RuntimeError("StreamClient used outside `async with`")
        return self._fresh

    def redact(self, text: str) -> str:
        """`text` with every secret of the target replaced by "***"."""
        return str(redact(text, self.secrets))

    async def send(
        self, spec: WireRequest, scheduled_s: float, timeout_s: float | None = None
    ) -> RequestRecord:
        """Send one request now; `scheduled_s` (run-relative) is when it should have been sent.

        `timeout_s` overrides the target's for this request (the preflight uses a longer one).
        A re-send happens only as the module docstring says; `sent_s` is then the time of the
        send that counted and `extra["retries"]` is 1.
        """
        return await self._send(spec, scheduled_s, timeout_s, [])

    async def send_keeping_text(
        self, spec: WireRequest, scheduled_s: float
    ) -> tuple[RequestRecord, str]:
        """`send`, and the text the server streamed (a conversation's next turn carries it)."""
        streams: list[StreamState] = []
        record = await self._send(spec, scheduled_s, None, streams)
        return record, "".join(streams[-1].text_parts)

    async def _send(
        self,
        spec: WireRequest,
        scheduled_s: float,
        timeout_s: float | None,
        streams: list[StreamState],
    ) -> RequestRecord:
        payload = json.dumps(request_body(self.target, spec)).encode()
        limit_s = self.target.timeout_s if timeout_s is None else timeout_s
        timeout = self._timeout if timeout_s is None else aiohttp.ClientTimeout(total=limit_s)
        stream = StreamState()
        streams.append(stream)
        while True:
            sent_abs_s = now_s()
            session = self.session if not stream.retries else self.fresh_session
            try:
                await self._stream(session, payload, timeout, stream)
            except RequestFailedError as exc:
                return self._failed(spec, scheduled_s, sent_abs_s, stream, exc.kind, exc.message)
            except Exception as exc:  # every failure is data, never a crashed run
                if stream.retries < MAX_RETRIES and lost_on_pooled_connection(exc, stream):
                    self.keep_alive = False
                    stream = StreamState(retries=stream.retries + 1)
                    streams.append(stream)
                    continue
                kind, message = classify_exception(exc, limit_s)
                return self._failed(spec, scheduled_s, sent_abs_s, stream, kind, message)
            return await self._succeeded(spec, scheduled_s, sent_abs_s, stream)

    async def _stream(
        self,
        session: aiohttp.ClientSession,
        payload: bytes,
        timeout: aiohttp.ClientTimeout,
        st: StreamState,
    ) -> None:
        async with session.post(
            self._url, data=payload, headers=self._headers, timeout=timeout, trace_request_ctx=st
        ) as resp:
            st.got_response = True
            if resp.status != 200:
                raise RequestFailedError(f"http_{resp.status}", await error_text(resp))
            content_type = resp.headers.get("Content-Type", "?")
            splitter = LineSplitter(self.max_line_bytes)
            try:
                async for data in resp.content.iter_any():
                    if st.done:
                        continue  # drain the chunked-encoding end, so the connection is reusable
                    t = now_s()
                    for line in splitter.feed(data):
                        if take_line(line, t, st, content_type):
                            st.end_s = t
                            break
            except MalformedStreamError as exc:  # a line past LineSplitter's bound
                raise RequestFailedError("malformed_stream", str(exc)) from None
            if st.done:
                return
            st.end_s = now_s()
            if splitter.pending:
                take_line(splitter.pending, st.end_s, st, content_type)
            if st.finish_reason is None and not st.done:
                raise RequestFailedError(
                    "connection_closed",
                    "the server ended the stream before [DONE] or a finish_reason",
                )

    def _base(
        self, spec: WireRequest, scheduled_s: float, sent_abs_s: float, st: StreamState
    ) -> dict[str, Any]:
        t0 = self.t0_s
        times = [t - t0 for t in st.chunk_times_s]
        return {
            "request_id": spec.request_id,
            "scheduled_s": scheduled_s,
            "sent_s": sent_abs_s - t0,
            "first_token_s": times[0] if times else None,
            "token_times_s": times,
            "extra": redact(_figures(spec, st), self.secrets),  # finish_reason is server text
        }

    def _failed(
        self,
        spec: WireRequest,
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
            error_message=self.redact(message)[:1000],
            token_count_source="chunks",
        )

    async def _succeeded(
        self, spec: WireRequest, scheduled_s: float, sent_abs_s: float, st: StreamState
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

    async def _counts(self, spec: WireRequest, st: StreamState) -> tuple[int, int, str]:
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
        """POST /tokenize (bookkeeping, not a measured request); None when the server has none
        or it fails. Re-sent once, on a fresh connection, after a pooled one found closed."""
        timeout = aiohttp.ClientTimeout(total=TOKENIZE_TIMEOUT_S)
        payload = json.dumps(body).encode()
        doc: object = None
        for attempt in range(MAX_RETRIES + 1):
            st = StreamState()
            session = self.session if attempt == 0 else self.fresh_session
            try:
                async with session.post(
                    self._tokenize_url,
                    data=payload,
                    headers=self._headers,
                    timeout=timeout,
                    trace_request_ctx=st,
                ) as resp:
                    st.got_response = True
                    if resp.status != 200:
                        return None
                    doc = await resp.json(content_type=None)
                    break
            except Exception as exc:  # a failed count is a fallback, never a crash
                if attempt == MAX_RETRIES or not lost_on_pooled_connection(exc, st):
                    return None
                self.keep_alive = False
        tokens = doc.get("tokens") if isinstance(doc, dict) else None
        return tokens if isinstance(tokens, list) else None
