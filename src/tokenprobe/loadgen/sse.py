"""Server-sent events of an OpenAI-compatible stream, from raw bytes to what the client counts.

Pure functions and a plain state object, no I/O, so every malformed case is testable without a
server. `take_line` accounts one line into a `StreamState` (the client's hot path).

The wire format (https://html.spec.whatwg.org/multipage/server-sent-events.html): lines ending in
LF or CRLF; `data: <payload>` lines carry the JSON chunks; lines starting with `:` are comments
(keep-alive pings); a blank line ends an event; `data: [DONE]` ends an OpenAI stream. llama.cpp
sends `error: {...}` lines for errors inside a stream; vLLM sends `data: {"error": {...}}`.

`LineSplitter` buffers partial lines across reads with no length limit, so one huge chunk is never
cut or refused (a client that reads with `readline()` into a small buffer fails on those).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, NoReturn

from tokenprobe.units import MILLI

DONE = b"[DONE]"


class MalformedStreamError(Exception):
    """A stream line that no OpenAI-compatible server would send (kind "malformed_stream")."""


class ServerStreamError(Exception):
    """The server reported an error inside the stream (kind "stream_error")."""


class LineSplitter:
    """Split a byte stream into lines (LF or CRLF), carrying partial lines across feeds."""

    __slots__ = ("_rest",)

    def __init__(self) -> None:
        self._rest = b""

    def feed(self, data: bytes) -> list[bytes]:
        """Complete lines in `self._rest + data`, without their line ends."""
        buf = self._rest + data if self._rest else data
        lines = buf.split(b"\n")
        self._rest = lines.pop()
        return [line[:-1] if line.endswith(b"\r") else line for line in lines]

    @property
    def pending(self) -> bytes:
        """Bytes of an unfinished last line (non-empty at end of stream = truncated)."""
        return self._rest


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


_scan_once = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # the C scanner, without decode()'s two regex passes
_Fields = tuple[str, str | None, dict[str, Any] | None, dict[str, Any] | None]


def chunk_fields(payload: bytes) -> _Fields:
    """(text, finish_reason, usage, timings) of one chunk, as `parse_chunk` defines them.

    The client's hot path (one call per streamed token): no intermediate object, and the
    common completions chunk returns early. Raises MalformedStreamError / ServerStreamError.
    """
    try:
        text = payload.decode()
        obj, end = _scan_once(text, 0)
    except (StopIteration, ValueError, UnicodeDecodeError):
        raise MalformedStreamError(f"data is not JSON: {_preview(payload)}") from None
    if end != len(text) and text[end:].strip():
        raise MalformedStreamError(f"data has more than one JSON value: {_preview(payload)}")
    if type(obj) is not dict:
        raise MalformedStreamError(f"data is not a JSON object: {_preview(payload)}")
    choices = obj.get("choices")
    if type(choices) is not list or "error" in obj:
        _odd_chunk(obj, payload)
    usage, timings = obj.get("usage"), obj.get("timings")
    usage = usage if type(usage) is dict else None
    timings = timings if type(timings) is dict else None
    if not choices:
        return "", None, usage, timings
    choice = choices[0]
    if type(choice) is dict:
        piece, finish = choice.get("text"), choice.get("finish_reason")
        if type(piece) is str:
            return piece, (finish if type(finish) is str else None), usage, timings
    piece, finish = _choice_text(choice)
    return piece, finish, usage, timings


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
    stale_retries: int = 0  # sends lost to a keep-alive connection the server had closed


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
    if st.stale_retries:
        extra["stale_retries"] = st.stale_retries
    if st.finish_reason is not None:
        extra["finish_reason"] = st.finish_reason
    timings = st.timings or {}
    for key, name in (("prompt_ms", "server_prompt_s"), ("predicted_ms", "server_decode_s")):
        value = timings.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            extra[name] = float(value) * MILLI
    for key, name in (
        ("prompt_n", "server_prompt_tokens"),
        ("predicted_n", "server_predicted_tokens"),
        ("cache_n", "server_cached_tokens"),
    ):
        count = token_count(timings.get(key))
        if count is not None:
            extra[name] = count
    return extra
