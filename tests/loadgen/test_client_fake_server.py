"""Error accounting against a FAKE misbehaving server (cases llama.cpp cannot be made to produce).

Each case must end as one record with the right error kind, or one clear ServerError at
preflight, and never hang (every test is bounded by the client's own timeouts).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator

import pytest

from loadgen.fake_server import FakeServer
from tokenprobe.errors import ServerError
from tokenprobe.loadgen import BenchConfig, StreamClient, Target, WireRequest, run_bench
from tokenprobe.records import RequestRecord
from tokenprobe.units import now_s


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def _send(url: str, max_tokens: int = 4) -> RequestRecord:
    async def go() -> RequestRecord:
        target = Target(base_url=url, model="m", timeout_s=5.0)
        async with StreamClient(target, now_s()) as client:
            return await client.send(WireRequest("r", "hello", max_tokens), 0.0)

    return asyncio.run(go())


def test_fake_server_well_formed_stream_is_counted_from_usage(fake: FakeServer):
    r = _send(fake.url("ok"), 4)
    assert r.ok and r.output_tokens == 4 and r.token_count_source == "usage"
    assert len(r.token_times_s) == 4 and r.input_tokens == 3


@pytest.mark.parametrize(
    ("mode", "kind", "words"),
    [
        ("malformed", "malformed_stream", "not JSON"),
        ("not_sse", "malformed_stream", "not an SSE line"),
        ("html", "malformed_stream", "text/html"),
        ("json_body", "malformed_stream", "application/json"),
        ("error_event", "stream_error", "slot died"),
        ("http500", "http_500", "boom"),
        ("drop", "connection_closed", ""),
    ],
)
def test_fake_server_misbehaviour_is_one_error_record(
    fake: FakeServer, mode: str, kind: str, words: str
):
    r = _send(fake.url(mode))
    assert r.error_kind == kind, r.error_message
    assert words in (r.error_message or "")


def test_fake_server_without_usage_falls_back_to_tokenizer_then_chunks(fake: FakeServer):
    with_tokenizer = _send(fake.url("no_usage_tokenize"), 5)
    assert with_tokenizer.ok and with_tokenizer.token_count_source == "tokenizer"
    assert with_tokenizer.output_tokens == 5  # " w" * 5 -> 5 words -> the fake tokenizer's count
    without = _send(fake.url("no_usage"), 5)
    assert without.ok and without.token_count_source == "chunks" and without.output_tokens == 5


def test_fake_server_errors_mid_run_are_counted_per_request(fake: FakeServer):
    for mode, kind in (("malformed", "malformed_stream"), ("drop", "connection_closed")):
        config = BenchConfig(
            url=fake.url(mode),
            model="m",
            concurrency=2,
            num_requests=5,
            input_tokens=4,
            output_tokens=4,
            verify_input_tokens=False,
            timeout_s=5.0,
        )
        run = run_bench(config)
        assert [r.error_kind for r in run.records] == [kind] * 5


def test_fake_html_server_fails_preflight_with_one_clear_error(fake: FakeServer):
    config = BenchConfig(
        url=fake.url("html"), model="m", concurrency=1, num_requests=2, input_tokens=4
    )
    with pytest.raises(ServerError, match="not an OpenAI-compatible streaming endpoint"):
        run_bench(config)


def test_unreachable_url_fails_preflight_with_one_clear_error():
    config = BenchConfig(
        url="http://127.0.0.1:9/v1", model="m", concurrency=1, num_requests=2, input_tokens=4
    )
    with pytest.raises(ServerError, match="cannot reach"):
        run_bench(config)


def test_fake_server_huge_chunk_is_read_whole_and_fast(fake: FakeServer):
    r = _send(fake.url("huge"), 1)
    assert r.ok and r.extra["chunks"] == 1
    assert r.e2e_s is not None and r.e2e_s < 2.0  # 8 MB over loopback; small buffers crawl


def test_fake_server_rate_mode_with_max_concurrency_keeps_one_in_flight(fake: FakeServer):
    config = BenchConfig(
        url=fake.url("ok"),
        model="m",
        rate_per_s=400.0,
        max_concurrency=1,
        num_requests=20,
        input_tokens=4,
        output_tokens=3,
        verify_input_tokens=False,
        seed=3,
    )
    records = sorted(run_bench(config).records, key=lambda r: r.sent_s)
    assert all(r.ok for r in records) and len(records) == 20
    for before, after in itertools.pairwise(records):
        assert after.sent_s >= (before.finish_s or 0.0)  # the cap: one request at a time
