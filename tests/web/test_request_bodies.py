"""Request bodies over real HTTP: the 1 MB cap holds however the body is framed (Content-Length,
chunked, a Content-Length that lies), without the server holding the excess; bodies that are not
JSON Python can hold, or hold NaN, infinity or huge numbers, are a 400/422 naming the field."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
from collections.abc import Iterator

import httpx
import psutil
import pytest

from tokenprobe.web.app import MAX_BODY_BYTES

from .conftest import Server

JSON = {"Content-Type": "application/json"}


def _padded(body: bytes, total_bytes: int) -> bytes:
    """`body` followed by spaces (valid JSON whitespace) to exactly `total_bytes`."""
    return body + b" " * (total_bytes - len(body))


def _chunks(data: bytes, size: int = 64 * 1024) -> Iterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


def _post_chunked(server: Server, path: str, chunks: Iterator[bytes]) -> tuple[int, bytes]:
    """POST with Transfer-Encoding: chunked (no Content-Length), the way http.client streams an
    iterator; the server may answer before the client has sent everything."""
    host, port = server.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        conn.request("POST", path, body=chunks, headers=JSON, encode_chunked=True)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _rss_bytes(server: Server) -> int:
    return int(psutil.Process(server.process.pid).memory_info().rss)


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_body_at_the_cap_is_read_and_one_byte_more_is_413(server: Server, framing: str) -> None:
    at_cap = _padded(b'{"batch": 2}', MAX_BODY_BYTES)
    over = at_cap + b" "
    for body, want in ((at_cap, 200), (over, 413)):
        if framing == "chunked":
            status, text = _post_chunked(server, "/api/estimate", _chunks(body))
        else:
            r = httpx.post(f"{server.url}/api/estimate", content=body, headers=JSON, timeout=60)
            status, text = r.status_code, r.content
        assert status == want, (framing, len(body), text[:200])
    assert b"1,000,000 bytes" in text


def test_a_huge_chunked_body_is_refused_without_being_held(server: Server) -> None:
    body_bytes = 64 * MAX_BODY_BYTES
    before = _rss_bytes(server)
    status, text = _post_chunked(
        server, "/api/estimate", (b'{"model": "' + b"a" * 1_000_000 for _ in range(64))
    )
    grown = _rss_bytes(server) - before
    assert status == 413 and b"request body over" in text
    # a server that buffered the body would have grown by about its size (64 MB) or more
    assert grown < body_bytes // 4, grown
    assert server.alive()


def test_a_content_length_that_lies_does_not_lift_the_cap(server: Server) -> None:
    """Content-Length 10 beside Transfer-Encoding: chunked: the chunked framing wins (RFC 9112
    section 6.3), so the bytes that arrive are what is counted, not the header."""
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        sock.sendall(
            b"POST /api/estimate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 10\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        chunk = b"%x\r\n%s\r\n" % (100_000, b" " * 100_000)
        try:
            for _ in range(20):
                sock.sendall(chunk)
        except OSError:
            pass  # the server may stop reading once it has answered
        answer = sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 4"), answer[:200]
    assert server.alive()


def test_bytes_past_a_short_content_length_are_not_read_as_the_body(server: Server) -> None:
    """Content-Length 12, then 64 KiB more in the same write: the body is the 12 bytes declared
    (a 200 for batch 2), the rest is read as the next request on the connection (not HTTP: a 400
    from uvicorn, which then closes), never as more body (that would be a 422 or a 413)."""
    body = b'{"batch": 2}'
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        sock.sendall(
            b"POST /api/estimate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s%s" % (len(body), body, b"x" * 65536)
        )
        answers = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                answers += chunk
    assert answers.startswith(b"HTTP/1.1 200"), answers[:200]
    assert b'"batch":2' in answers.replace(b" ", b"")
    assert b"HTTP/1.1 400" in answers  # the leftover bytes, refused as a request
    assert server.alive()


def test_a_declared_length_over_the_cap_is_413_before_the_body(server: Server) -> None:
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        sock.sendall(
            b"POST /api/estimate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000000000\r\n\r\n{}"
        )
        answer = sock.recv(4096)  # answered although 999,999,998 bytes were never sent
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]


CFG = {
    "model_type": "llama",
    "hidden_size": 2048,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "num_hidden_layers": 16,
    "intermediate_size": 8192,
    "vocab_size": 32000,
}
MOE = {**CFG, "model_type": "mixtral", "num_local_experts": 8}


def _cfg(base: dict[str, object] = CFG, **changes: object) -> bytes:
    """A body pasting `base` with `changes` (json.dumps writes NaN and 1e300 as they are)."""
    return json.dumps({"hf_config": {**base, **changes}}).encode()


RAW_BODIES: list[tuple[str, bytes, int, str]] = [
    ("NaN power", b'{"power_limit_w": NaN}', 422, "power_limit_w"),
    ("Infinity power", b'{"power_limit_w": Infinity}', 422, "power_limit_w"),
    ("1e400 power (inf)", b'{"power_limit_w": 1e400}', 422, "power_limit_w"),
    ("-Infinity batch", b'{"batch": -Infinity}', 422, "batch"),
    ("float batch", b'{"batch": 1e3}', 422, "batch"),
    ("huge digits", b'{"batch": ' + b"9" * 5000 + b"}", 400, "4,300 digits"),
    ("NaN in config", _cfg(hidden_size=float("nan")), 400, "hf_config.hidden_size"),
    ("1e300 in config", _cfg(vocab_size=1e300), 400, "hf_config.vocab_size"),
    ("a billion layers", _cfg(num_hidden_layers=10**9), 400, "hf_config.num_hidden_layers"),
    (
        "more experts per token than experts",
        _cfg(MOE, num_experts_per_tok=10**9),
        400,
        "hf_config",
    ),
    ("nested too deeply", b"[" * 100_000 + b"]" * 100_000, 400, "nested"),
    ("not UTF-8", b'{"model": "caf\xe9"}', 400, "UTF-8"),
    ("broken JSON", b'{"batch": ', 422, "JSON"),
    ("a lone surrogate", b'{"model": "\\ud800"}', 422, "model"),
    ("a JSON string", b'"llama"', 422, "body"),
    ("nothing", b"", 422, "body"),
]


@pytest.mark.parametrize("path", ["/api/estimate", "/api/whatif"])
@pytest.mark.parametrize(("case", "body", "status", "words"), RAW_BODIES)
def test_a_bad_body_is_a_4xx_naming_what_is_wrong(
    server: Server, path: str, case: str, body: bytes, status: int, words: str
) -> None:
    r = httpx.post(f"{server.url}{path}", content=body, headers=JSON, timeout=60)
    assert r.status_code == status, (case, r.text[:300])
    assert words in r.json()["detail"], (case, r.json()["detail"])
