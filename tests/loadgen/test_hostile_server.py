"""The client and the runner against hostile local servers (tests/loadgen/fake_server.py scripts).

Each misbehaviour must end as a failure record of the right kind, naming what was wrong, in a run
that goes on and keeps its records; a request is never re-sent without the record saying so.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from loadgen.fake_server import FakeServer, good_stream, raw_stream
from tokenprobe.loadgen import BenchConfig, StreamClient, Target, WireRequest, run_bench
from tokenprobe.records import RequestRecord, read_run
from tokenprobe.units import MiB, now_s


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def _send(url: str, max_tokens: int = 4, timeout_s: float = 5.0, **client: int) -> RequestRecord:
    async def go() -> RequestRecord:
        target = Target(base_url=url, model="m", timeout_s=timeout_s)
        async with StreamClient(target, now_s(), **client) as c:
            return await c.send(WireRequest("r", "hello", max_tokens), 0.0)

    return asyncio.run(go())


def _config(url: str, out: Path | None = None, **changes: object) -> BenchConfig:
    settings: dict[str, object] = dict(
        url=url,
        model="m",
        concurrency=2,
        num_requests=4,
        input_tokens=4,
        output_tokens=4,
        verify_input_tokens=False,
        timeout_s=5.0,
        out=str(out) if out else None,
    )
    settings.update(changes)
    return BenchConfig(**settings)  # type: ignore[arg-type]


def _chunk_with(extra: str) -> bytes:
    """A last chunk whose JSON ends with `extra` (raw text: json.dumps cannot write 1e999)."""
    return b'data: {"choices":[{"text":"","finish_reason":"length"}],' + extra.encode() + b"}\n\n"


def _script_last_chunk(fake: FakeServer, name: str, extra: str) -> str:
    async def handler(request: web.Request, n: int) -> web.StreamResponse:
        chunks = good_stream(n)
        return await raw_stream(request, [*chunks[:n], _chunk_with(extra), b"data: [DONE]\n\n"])

    return fake.script(name, handler)


BAD_NUMBERS = [
    ('"timings":{"prompt_ms":NaN,"predicted_ms":3.0}', "timings.prompt_ms"),
    ('"timings":{"prompt_ms":1.0,"predicted_ms":Infinity}', "timings.predicted_ms"),
    ('"timings":{"prompt_ms":1e999}', "timings.prompt_ms"),
    ('"timings":{"prompt_ms":-4.0}', "timings.prompt_ms"),
    ('"timings":{"prompt_ms":"12"}', "timings.prompt_ms"),
    ('"timings":{"prompt_ms":null}', "timings.prompt_ms"),
    ('"timings":{"predicted_n":2.5}', "timings.predicted_n"),
    ('"timings":[1,2]', "timings is not an object"),
    ('"usage":{"completion_tokens":NaN}', "usage.completion_tokens"),
    ('"usage":{"completion_tokens":-3}', "usage.completion_tokens"),
    ('"usage":{"completion_tokens":"4"}', "usage.completion_tokens"),
    ('"usage":{"prompt_tokens":null,"completion_tokens":4}', "usage.prompt_tokens"),
    ('"usage":"lots"', "usage is not an object"),
]


@pytest.mark.parametrize(("extra", "field"), BAD_NUMBERS)
def test_a_bad_number_in_timings_or_usage_fails_that_request_only(
    fake: FakeServer, tmp_path: Path, extra: str, field: str
):
    url = _script_last_chunk(fake, f"bad-{BAD_NUMBERS.index((extra, field))}", extra)
    run = run_bench(_config(url, tmp_path / "run"))
    assert [r.error_kind for r in run.records] == ["malformed_stream"] * 4
    assert all(field in (r.error_message or "") for r in run.records), run.records[0]
    on_disk = read_run(tmp_path / "run")  # every record written, and the summary
    assert len(on_disk.records) == 4 and on_disk.warnings == []
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["errors"] == {"malformed_stream": 4}


def test_usage_null_and_good_timings_are_read(fake: FakeServer):
    extra = '"usage":{"completion_tokens":4,"prompt_tokens":3},"timings":{"prompt_ms":2.0}'

    async def handler(request: web.Request, n: int) -> web.StreamResponse:
        text = [b'data: {"choices":[{"text":" w"}],"usage":null}\n\n'] * n
        return await raw_stream(request, [*text, _chunk_with(extra), b"data: [DONE]\n\n"])

    r = _send(fake.script("usage-null", handler))
    assert r.ok and r.output_tokens == 4 and r.token_count_source == "usage"
    assert r.extra["server_prompt_s"] == pytest.approx(0.002)


@pytest.mark.parametrize(
    ("name", "body", "words"),
    [
        ("bad-json", b"data: {not json\n\n", "not JSON"),
        ("not-object", b"data: [1, 2]\n\n", "not a JSON object"),
        ("choices-dict", b'data: {"choices": {"text": "x"}}\n\n', "no 'choices' list"),
        ("choice-str", b'data: {"choices": ["x"]}\n\n', "choice is not an object"),
        ("not-utf8", b"data: \xff\xfe{}\n\n", "not JSON"),
        ("deep", b"data: " + b"[" * 100_000 + b"\n\n", "not JSON"),
    ],
)
def test_malformed_data_lines_are_malformed_stream_failures(
    fake: FakeServer, name: str, body: bytes, words: str
):
    async def handler(request: web.Request, n: int) -> web.StreamResponse:
        return await raw_stream(request, [*good_stream(n)[:2], body, *good_stream(n)[n:]])

    r = _send(fake.script(name, handler))
    assert r.error_kind == "malformed_stream" and words in (r.error_message or ""), r
    assert len(r.token_times_s) == 2  # what came before the bad line is kept


def test_a_line_without_end_past_the_bound_is_malformed_not_memory(fake: FakeServer):
    async def handler(request: web.Request, n: int) -> web.StreamResponse:
        return await raw_stream(request, [b"data: " + b"x" * (3 * MiB)])

    r = _send(fake.script("endless-line", handler), max_line_bytes=MiB)
    assert r.error_kind == "malformed_stream" and "without a line end" in (r.error_message or "")


def test_an_html_error_page_is_one_line_of_http_error(fake: FakeServer):
    page = "<html>\n<head><title>502 Bad Gateway</title></head>\n<body>nginx</body>\n</html>\n"

    async def handler(request: web.Request, n: int) -> web.StreamResponse:
        return web.Response(status=502, text=page, content_type="text/html")

    r = _send(fake.script("html-502", handler))
    assert r.error_kind == "http_502"
    assert r.error_message == "HTTP 502: " + " ".join(page.split())


def test_headers_then_silence_is_a_timeout_and_the_run_ends(fake: FakeServer, tmp_path: Path):
    async def handler(request: web.Request, n: int) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(good_stream(n)[0])
        while request.transport is not None and not request.transport.is_closing():
            await asyncio.sleep(0.05)  # silent until the client gives up and closes
        return resp

    run = run_bench(_config(fake.script("stall", handler), tmp_path / "run", timeout_s=0.5))
    assert [r.error_kind for r in run.records] == ["timeout"] * 4
    assert all(len(r.token_times_s) == 1 for r in run.records)  # the chunk before the stall
    assert (tmp_path / "run" / "summary.json").exists()


def test_a_close_mid_stream_is_connection_closed(fake: FakeServer):
    async def handler(request: web.Request, n: int) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(good_stream(n)[0])
        assert request.transport is not None
        request.transport.close()
        return resp

    r = _send(fake.script("close-mid", handler))
    assert r.error_kind == "connection_closed" and r.extra.get("retries") is None


def _drop_before_response(request: web.Request) -> web.StreamResponse:
    assert request.transport is not None
    request.transport.abort()  # the request was read, no response byte is sent
    return web.StreamResponse()


def test_a_drop_before_any_response_on_a_fresh_connection_is_never_re_sent(fake: FakeServer):
    async def handler(request: web.Request, n: int) -> web.StreamResponse:
        return _drop_before_response(request)

    url = fake.script("drop-fresh", handler)
    r = _send(url)
    assert r.error_kind == "connection_closed" and "retries" not in r.extra
    assert fake.requests["drop-fresh"] == 1  # the server saw it once: no re-send


def test_a_re_send_after_a_pooled_connection_dropped_is_recorded(fake: FakeServer):
    """The second request on a keep-alive connection is dropped before any response byte: the
    one re-send (fresh connection) is in the record, and the client stops reusing connections."""
    seen: dict[object, int] = {}

    async def handler(request: web.Request, n: int) -> web.StreamResponse:
        conn = request.transport
        seen[conn] = seen.get(conn, 0) + 1
        if seen[conn] == 2:
            return _drop_before_response(request)
        return await raw_stream(request, good_stream(n))

    url = fake.script("drop-pooled", handler)

    async def go() -> list[RequestRecord]:
        async with StreamClient(Target(base_url=url, model="m", timeout_s=5.0), now_s()) as c:
            records = [await c.send(WireRequest(str(i), "hi", 3), 0.0) for i in range(3)]
            assert c.keep_alive is False
            return records

    first, second, third = asyncio.run(go())
    assert first.ok and second.ok and third.ok
    assert "retries" not in first.extra and second.extra["retries"] == 1
    assert "retries" not in third.extra  # a fresh connection: nothing to race
    assert fake.requests["drop-pooled"] == 4  # 3 requests, one of them sent twice


def test_a_run_counts_every_send_the_server_saw(fake: FakeServer, tmp_path: Path):
    async def handler(request: web.Request, n: int) -> web.StreamResponse:
        if fake.requests["drop-every-other"] % 2:
            return _drop_before_response(request)
        return await raw_stream(request, good_stream(n))

    url = fake.script("drop-every-other", handler)
    run = run_bench(_config(url, tmp_path / "run", concurrency=1, num_requests=6))
    retries = sum(int(r.extra.get("retries", 0)) for r in run.records)
    preflight = 2
    assert fake.requests["drop-every-other"] == preflight + len(run.records) + retries
    kinds = [r.error_kind for r in run.records]
    assert kinds.count("connection_closed") >= 1 and kinds.count(None) >= 1
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["client"]["retried_requests"] == sum(
        1 for r in run.records if "retries" in r.extra
    )
