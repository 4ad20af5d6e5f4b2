"""The real app under load: a fixed number of requests, 50 in flight, a mix of the page, API
calculations, the run list, run files and bad requests. The server must answer every one with
the status its kind calls for (never a 5xx, never a dropped connection) and end within 50 MB of
the memory it held idle (RSS, after one warm-up request of each kind: imports, plotly.js and
the cached run report are loaded by then). Counts, not times, bound it: no timing assertion.

The default run sends 400 requests; the `slow` one the full 2,000 (about 40 s on a loaded
2-core box), run when TOKENPROBE_SLOW=1 (nothing in the suite deselects `slow` by itself).
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from tokenprobe.hardware import gpu_names
from tokenprobe.web.app import MAX_BODY_BYTES

from .conftest import Server, start_server, write_small_run

IN_FLIGHT = 50
MAX_GROWTH_BYTES = 50 * 10**6
GOOD, BAD = "load-run", "fifo-run"


@dataclass(frozen=True)
class Kind:
    """One kind of request: method, path, JSON body or raw content, and the status it wants."""

    name: str
    weight: int
    method: str
    path: str
    status: int
    json: Any = None
    content: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)


def _kinds() -> list[Kind]:
    gpus = gpu_names()
    json_header = {"Content-Type": "application/json"}
    estimates = [
        Kind(f"estimate-{g}", 2, "POST", "/api/estimate", 200, {"gpu": g, "batch": 1 + i % 64})
        for i, g in enumerate(gpus)
    ]
    return [
        Kind("page", 10, "GET", "/", 200),
        Kind("catalog", 5, "GET", "/api/catalog", 200),
        *estimates,
        Kind("whatif", 2, "POST", "/api/whatif", 200, {"model": "qwen3-8b", "batch": 8}),
        Kind("run-list", 10, "GET", "/api/runs", 200),
        Kind("run-summary", 10, "GET", f"/api/runs/{GOOD}", 200),
        Kind("run-report", 2, "GET", f"/runs/{GOOD}", 200),
        Kind("bad-run", 5, "GET", f"/runs/{BAD}", 400),
        Kind("unknown-run", 5, "GET", "/runs/no-such-run", 404),
        Kind("traversal", 5, "GET", "/api/runs/..%2F..%2Fetc%2Fpasswd", 400),
        Kind("bad-value", 8, "POST", "/api/estimate", 422, {"batch": -1}),
        Kind("unknown-gpu", 5, "POST", "/api/estimate", 400, {"gpu": "h900"}),
        Kind("broken-json", 5, "POST", "/api/estimate", 422, None, b'{"batch": ', json_header),
        Kind("nan", 5, "POST", "/api/estimate", 422, None, b'{"power_limit_w": NaN}', json_header),
        Kind(
            "too-large",
            1,
            "POST",
            "/api/estimate",
            413,
            None,
            b" " * (MAX_BODY_BYTES + 1),
            json_header,
        ),
    ]


def _plan(count: int, seed: int = 0) -> list[Kind]:
    """`count` requests drawn by weight (seeded), each kind at least once."""
    kinds = _kinds()
    rng = random.Random(seed)
    drawn = rng.choices(kinds, weights=[k.weight for k in kinds], k=count - len(kinds))
    plan = kinds + drawn
    rng.shuffle(plan)
    return plan


async def _send(client: httpx.AsyncClient, kind: Kind) -> tuple[str, int | str]:
    try:
        r = await client.request(
            kind.method, kind.path, json=kind.json, content=kind.content, headers=kind.headers
        )
        await r.aread()
    except httpx.HTTPError as exc:
        return kind.name, f"{type(exc).__name__}: {exc}"
    return kind.name, r.status_code


async def _drive(url: str, plan: list[Kind]) -> list[tuple[str, int | str]]:
    """Send `plan` with at most IN_FLIGHT requests open at a time; every answer, in order."""
    gate = asyncio.Semaphore(IN_FLIGHT)
    limits = httpx.Limits(max_connections=IN_FLIGHT, max_keepalive_connections=IN_FLIGHT)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as client:

        async def one(kind: Kind) -> tuple[str, int | str]:
            async with gate:
                return await _send(client, kind)

        return await asyncio.gather(*(one(k) for k in plan))


@pytest.fixture(scope="module")
def load_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    base = tmp_path_factory.mktemp("load")
    runs_dir = base / "runs"
    runs_dir.mkdir()
    write_small_run(runs_dir / GOOD, num_requests=100)
    write_small_run(runs_dir / BAD, num_requests=5)
    (runs_dir / BAD / "records.jsonl").unlink()
    os.mkfifo(runs_dir / BAD / "records.jsonl")  # would block a reader that opened it
    with start_server(runs_dir, Path(os.devnull)) as running:
        yield running


def _rss_bytes(server: Server) -> int:
    return int(psutil.Process(server.process.pid).memory_info().rss)


def _check_under_load(server: Server, count: int) -> None:
    warm_up = asyncio.run(_drive(server.url, _kinds()))  # one of each, loads what is lazy
    assert all(isinstance(status, int) for _, status in warm_up), warm_up
    idle = _rss_bytes(server)
    plan = _plan(count)
    answers = asyncio.run(asyncio.wait_for(_drive(server.url, plan), timeout=900))
    grown = _rss_bytes(server) - idle
    wrong = [
        (kind.name, status)
        for kind, (_, status) in zip(plan, answers, strict=True)
        if status != kind.status
    ]
    assert wrong == [], wrong[:20]
    assert server.alive()
    assert grown < MAX_GROWTH_BYTES, f"RSS grew by {grown / 1e6:.1f} MB over {count} requests"


def test_the_app_stays_up_and_bounded_under_load(load_server: Server) -> None:
    _check_under_load(load_server, 400)


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("TOKENPROBE_SLOW"), reason="set TOKENPROBE_SLOW=1")
def test_the_app_stays_up_and_bounded_under_2000_requests(load_server: Server) -> None:
    _check_under_load(load_server, 2000)
