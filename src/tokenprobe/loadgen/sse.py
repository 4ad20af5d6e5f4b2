"""Server-sent events of an OpenAI-compatible stream, from raw bytes to what the client counts.

Pure functions and a plain state object, no I/O, so every malformed case is testable without a
server. `take_line` accounts one line into a `StreamState` (the client's hot path).

The wire format (https://html.spec.whatwg.org/multipage/server-sent-events.html): lines ending in
LF or CRLF; `data: <payload>` lines carry the JSON chunks; lines starting with `:` are comments
(keep-alive pings); a blank line ends an event; `data: [DONE]` ends an OpenAI stream. llama.cpp
sends `error: {...}` lines for errors inside a stream; vLLM sends `data: {"error": {...}}`.

`LineSplitter` buffers partial lines across reads up to MAX_LINE_BYTES (64 MiB, far above any real
chunk: an 8 MB chunk is read whole, where a client that reads with `readline()` into a small
buffer fails), so a server that streams one endless line is a malformed stream, not an
exhausted memory.

Every number the client keeps from a chunk (`usage` token counts, llama.cpp's `timings`) is
checked where it enters (`check_usage`, `check_timings`, through `tokenprobe.files.finite`): NaN,
±inf (JSON's `NaN`/`Infinity`, or `1e999`), a string, a negative or a null there makes the
request a `malformed_stream` failure naming the field, never a crashed run or a NaN in a record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, NoReturn

from tokenprobe.errors import ConfigError
from tokenprobe.files import finite
from tokenprobe.units import MILLI, MiB

DONE = b"[DONE]"
MAX_LINE_BYTES = 64 * MiB
MAX_TOKEN_COUNT = 2**53  # a count above this is not one a float (or a server) holds exactly


class MalformedStreamError(Exception):
    """A stream line that no OpenAI-compatible server would send (kind "malformed_stream")."""


class ServerStreamError(Exception):
    """The server reported an error inside the stream (kind "stream_error")."""


class LineSplitter:
    """Split a byte stream into lines (LF or CRLF), carrying partial lines across feeds.

    A partial line is kept as a list of pieces (joined once its end arrives), so a long line fed
    in many small reads costs linear, not quadratic, copying; past `max_line_bytes` it raises
    MalformedStreamError.
    """

    __slots__ = ("_parts", "_size", "max_line_bytes")

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self._parts: list[bytes] = []
        self._size = 0
        self.max_line_bytes = max_line_bytes

    def feed(self, data: bytes) -> list[bytes]:
        """Complete lines in the pending bytes + `data`, without their line ends."""
        if b"\n" not in data:
            self._keep(data)
            return []
        if self._parts:
            data = b"".join(self._parts) + data
            self._parts, self._size = [], 0
        lines = data.split(b"\n")
        self._keep(lines.pop())
        return [line[:-1] if line.endswith(b"\r") else line for line in lines]

    def _keep(self, piece: bytes) -> None:
        if not piece:
            return
        self._parts.append(piece)
        self._size += len(piece)
        if self._size > self.max_line_bytes:
            size = self._size
            self._parts, self._size = [], 0
            raise MalformedStreamError(
                f"a line of over {size:,} bytes without a line end (at most "
                f"{self.max_line_bytes:,} are read)"
            )

    @property
    def pending(self) -> bytes:
        """Bytes of an unfinished last line (non-empty at end of stream = truncated)."""
        return b"".join(self._parts)


@dataclass(slots=True)
class Chunk:
    """What one `data:` JSON chunk tells the client."""

    text: str
    finish_reason: str | None
    usage: dict[str, Any] | None
    timings: dict[str, Any] | None


def parse_line(line: bytes) -> bytes | None:
    """The payload of a `data:` line, or None for lines that carry none (blank, comment, event).

    Raises ServerStreamError for llama.cpp's `error:` lines and MalformedStreamError for a line
    that is not SSE at all (e.g. HTML or a JSON body sent where a stream was asked for).
    """
    if not line or line.startswith(b":"):
        return None
    if line.startswith(b"data:"):
        return line[5:].strip()
    if line.startswith(b"error:"):
        raise ServerStreamError(line[6:].strip().decode("utf-8", "replace")[:500])
    if line.startswith((b"event:", b"id:", b"retry:")):
        return None
    raise MalformedStreamError(f"not an SSE line: {_preview(line)}")


def parse_chunk(payload: bytes) -> Chunk:
    """Interpret one JSON chunk of /v1/completions or /v1/chat/completions.

    Text is `choices[0].text` (completions) or `choices[0].delta.content` plus any
    `delta.reasoning_content` (chat; reasoning tokens are output tokens too). The usage-only last
    chunk of chat has `choices: []`.
    """
    return Chunk(*chunk_fields(payload))


# the C scanner, without decode()'s two regex passes; it takes NaN/Infinity (not JSON), which
# check_usage/check_timings then refuse by name where they matter
_scan_once = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_Fields = tuple[str, str | None, dict[str, Any] | None, dict[str, Any] | None]


def chunk_fields(payload: bytes) -> _Fields:
    """(text, finish_reason, usage, timings) of one chunk, as `parse_chunk` defines them.

    The client's hot path (one call per streamed token): no intermediate object, and the
    common completions chunk returns early. Raises MalformedStreamError / ServerStreamError.
    """
    try:
        text = payload.decode()
        obj, end = _scan_once(text, 0)
    except (StopIteration, ValueError, UnicodeDecodeError, RecursionError):
        raise MalformedStreamError(f"data is not JSON: {_preview(payload)}") from None
    if end != len(text) and text[end:].strip():
        raise MalformedStreamError(f"data has more than one JSON value: {_preview(payload)}")
    if type(obj) is not dict:
        raise MalformedStreamError(f"data is not a JSON object: {_preview(payload)}")
    choices = obj.get("choices")
    if type(choices) is not list or "error" in obj:
        _odd_chunk(obj, payload)
    usage, timings = obj.get("usage"), obj.get("timings")
    if usage is not None:
        check_usage(usage)
    if timings is not None:
        check_timings(timings)
    if not choices:
        return "", None, usage, timings
    choice = choices[0]
    if type(choice) is dict:
        piece, finish = choice.get("text"), choice.get("finish_reason")
        if type(piece) is str:
            return piece, (finish if type(finish) is str else None), usage, timings
    piece, finish = _choice_text(choice)
    return piece, finish, usage, timings


USAGE_COUNTS: tuple[str, ...] = ("prompt_tokens", "completion_tokens", "total_tokens")
TIMINGS_MS: tuple[str, ...] = ("prompt_ms", "predicted_ms")
TIMINGS_COUNTS: tuple[str, ...] = ("prompt_n", "predicted_n", "cache_n")


def check_usage(usage: object) -> None:
    """An OpenAI `usage` object: its token counts, when present, are counts (ints >= 0).

    `"usage": null` (sent on every chunk but the last with include_usage) is checked by the
    caller; here null is refused only for a count that is present.
    """
    if type(usage) is not dict:
        raise MalformedStreamError(f"usage is not an object: {usage!r:.200}")
    for key in USAGE_COUNTS:
        if key in usage:
            _count(f"usage.{key}", usage[key])


def check_timings(timings: object) -> None:
    """llama.cpp's `timings` object: its durations (ms) and counts, when present, are finite
    and >= 0 (tools/server/server.cpp, `result_timings::to_json`)."""
    if type(timings) is not dict:
        raise MalformedStreamError(f"timings is not an object: {timings!r:.200}")
    for key in TIMINGS_MS:
        if key in timings:
            _finite(f"timings.{key}", timings[key])
    for key in TIMINGS_COUNTS:
        if key in timings:
            _count(f"timings.{key}", timings[key])


def _finite(name: str, value: object) -> float:
    if type(value) is str:  # finite() would parse "12"; a server sends numbers as numbers
        raise MalformedStreamError(f"{name}={value!r:.100}: a number, not a string")
    try:
        return finite(name, value, lo=0.0)
    except ConfigError as exc:
        raise MalformedStreamError(f"{name}={value!r:.100}: {exc.allowed}") from None


def _count(name: str, value: object) -> int:
    if type(value) is not int or not 0 <= value <= MAX_TOKEN_COUNT:
        raise MalformedStreamError(f"{name}={value!r:.100}: a token count (an integer >= 0)")
    return value


def _odd_chunk(obj: dict[str, Any], payload: bytes) -> NoReturn:
    """A chunk without a choices list: an error report (vLLM) or not an OpenAI chunk at all."""
    if "error" in obj:
        raise ServerStreamError(json.dumps(obj["error"])[:500])
    raise MalformedStreamError(f"chunk has no 'choices' list: {_preview(payload)}")


def _choice_text(choice: object) -> tuple[str, str | None]:
    if type(choice) is not dict:
        raise MalformedStreamError(f"choice is not an object: {choice!r:.200}")
    finish = choice.get("finish_reason")
    finish_reason = finish if type(finish) is str else None
    text = choice.get("text")
    if type(text) is str:
        return text, finish_reason
    delta = choice.get("delta")
    if delta is None:
        return "", finish_reason
    if type(delta) is not dict:
        raise MalformedStreamError(f"delta is not an object: {delta!r:.200}")
    content, reasoning = delta.get("content"), delta.get("reasoning_content")
    if type(reasoning) is str:
        return (content if type(content) is str else "") + reasoning, finish_reason
    return (content if type(content) is str else ""), finish_reason


def _preview(data: bytes, limit: int = 120) -> str:
    text = data[:limit].decode("utf-8", "replace")
    return repr(text) + ("..." if len(data) > limit else "")


# ---------------------------------------------------------------- accounting one response


@dataclass(slots=True)
class StreamState:
    """What the reading loop has gathered from one response so far."""

    chunk_times_s: list[float] = field(default_factory=list)
    text_parts: list[str] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    timings: dict[str, Any] | None = None
    finish_reason: str | None = None
    done: bool = False
    got_response: bool = False
    end_s: float | None = None
    retries: int = 0  # earlier sends of this request, lost on a pooled connection found closed
    reused_connection: bool = False  # this send went out on a pooled keep-alive connection


class RequestFailedError(Exception):
    """Internal: carries an error kind and message from the reading loop to the record."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def take_line(line: bytes, t_s: float, st: StreamState, content_type: str) -> bool:
    """Account one line read at `t_s`; True when the stream is over ([DONE]). (Hot path.)"""
    if not line:
        return False
    try:
        payload = line[5:].strip() if line.startswith(b"data:") else parse_line(line)
        if payload is None:
            return False
        if payload == DONE:
            st.done = True
            return True
        text, finish, usage, timings = chunk_fields(payload)
    except MalformedStreamError as exc:
        raise RequestFailedError(
            "malformed_stream", f"{exc} (Content-Type: {content_type})"
        ) from None
    except ServerStreamError as exc:
        raise RequestFailedError("stream_error", f"server error in stream: {exc}") from None
    if text:
        st.chunk_times_s.append(t_s)
        st.text_parts.append(text)
    if finish is not None:
        st.finish_reason = finish
    if usage is not None:
        st.usage = usage
    if timings is not None:
        st.timings = timings
    return False


def token_count(value: object) -> int | None:
    """`value` when it is a token count (a non-negative int), else None."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def server_figures(st: StreamState) -> dict[str, float | str]:
    """Server-reported figures kept with the record (llama.cpp `timings` converted to seconds)."""
    extra: dict[str, float | str] = {"chunks": len(st.chunk_times_s)}
    if st.retries:
        extra["retries"] = st.retries
    if st.finish_reason is not None:
        extra["finish_reason"] = st.finish_reason
    timings = st.timings or {}  # checked by check_timings where it entered
    for key, name in (("prompt_ms", "server_prompt_s"), ("predicted_ms", "server_decode_s")):
        value = timings.get(key)
        if value is not None:
            extra[name] = float(value) * MILLI
    for key, name in (
        ("prompt_n", "server_prompt_tokens"),
        ("predicted_n", "server_predicted_tokens"),
        ("cache_n", "server_cached_tokens"),
    ):
        count = token_count(timings.get(key))
        if count is not None:
            extra[name] = count
    cached = _usage_cached_tokens(st.usage)
    if cached is not None and "server_cached_tokens" not in extra:
        extra["server_cached_tokens"] = cached
    return extra


def _usage_cached_tokens(usage: dict[str, Any] | None) -> int | None:
    """OpenAI usage's `prompt_tokens_details.cached_tokens` (vLLM, SGLang, OpenAI itself)."""
    details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
    return token_count(details.get("cached_tokens")) if isinstance(details, dict) else None
