"""SSE parsing: line splitting across reads, OpenAI chunk shapes, malformed input."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenprobe.loadgen.sse import (
    LineSplitter,
    MalformedStreamError,
    ServerStreamError,
    parse_chunk,
    parse_line,
)

STREAM = (
    b'data: {"choices":[{"text":"Hel","index":0,"finish_reason":null}]}\r\n\r\n'
    b": keep-alive ping\n\n"
    b'data: {"choices":[{"text":"lo","index":0,"finish_reason":"length"}],'
    b'"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\n'
    b"data: [DONE]\n\n"
)


@given(st.lists(st.integers(min_value=1, max_value=len(STREAM) - 1), max_size=12))
def test_lines_are_the_same_however_the_bytes_are_cut(cuts: list[int]):
    bounds = [0, *sorted(set(cuts)), len(STREAM)]
    splitter = LineSplitter()
    lines = [line for a, b in itertools.pairwise(bounds) for line in splitter.feed(STREAM[a:b])]
    assert lines == LineSplitter().feed(STREAM)
    assert splitter.pending == b""
    assert [parse_line(x) for x in lines if parse_line(x)][-1] == b"[DONE]"


def test_a_huge_line_is_kept_whole():
    text = "x" * 5_000_000
    payload = json.dumps({"choices": [{"text": text, "finish_reason": None}]}).encode()
    splitter = LineSplitter()
    pieces = [b"data: " + payload[:1000], payload[1000:], b"\n\n"]
    lines = [line for piece in pieces for line in splitter.feed(piece)]
    assert parse_chunk(parse_line(lines[0]) or b"").text == text


def test_completion_and_chat_chunks():
    done = parse_chunk(b'{"choices":[{"text":"","finish_reason":"length"}],"usage":{"a":1}}')
    assert (done.text, done.finish_reason, done.usage) == ("", "length", {"a": 1})
    role = parse_chunk(b'{"choices":[{"delta":{"role":"assistant","content":null}}]}')
    assert role.text == ""
    think = parse_chunk(b'{"choices":[{"delta":{"reasoning_content":"hm"}}]}')
    assert think.text == "hm"
    usage_only = parse_chunk(b'{"choices":[],"usage":{"completion_tokens":4},"timings":{}}')
    assert usage_only.text == "" and usage_only.usage == {"completion_tokens": 4}


@pytest.mark.parametrize(
    "payload",
    [b"{not json", b"[1, 2]", b'{"id": 3}', b'{"choices":[1]}', b'{"choices":[]} {"x":1}'],
)
def test_malformed_chunks_raise(payload: bytes):
    with pytest.raises(MalformedStreamError):
        parse_chunk(payload)


def test_error_events_and_non_sse_lines():
    with pytest.raises(ServerStreamError, match="slot"):
        parse_line(b'error: {"message":"slot"}')
    with pytest.raises(ServerStreamError, match="overloaded"):
        parse_chunk(b'{"error":{"message":"overloaded"}}')
    with pytest.raises(MalformedStreamError, match="html"):
        parse_line(b"<html><body>")
    assert parse_line(b"event: message") is None and parse_line(b": ping") is None
