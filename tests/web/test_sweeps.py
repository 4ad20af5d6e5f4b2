"""The run browser over measured runs and a sweep (REAL llama.cpp recordings from tests/data and
tests/report/data): what ran for every run kind, sweeps listed with their points, each point and
the sweep's own report opened, and no way out of the runs folder through a sweep."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tokenprobe.records import read_summary

from .conftest import Server, start_server, write_small_run

DATA = Path(__file__).resolve().parents[1] / "data" / "runs" / "llamacpp_cpu_pid"
SWEEP = Path(__file__).resolve().parents[1] / "report" / "data" / "sweep_llamacpp"
POINTS = ("concurrency_1", "concurrency_2", "concurrency_4")


@pytest.fixture(scope="module")
def sweep_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    base = tmp_path_factory.mktemp("sweeps")
    runs = base / "runs"
    runs.mkdir()
    secret = base / "secret.txt"
    secret.write_text("top secret\n")
    outside = base / "outside-run"  # a run folder outside the runs folder
    write_small_run(outside, num_requests=5)
    shutil.copytree(DATA, runs / "measured")
    shutil.copytree(SWEEP, runs / "sweep")
    (runs / "sweep" / "escape").symlink_to(outside)  # a point that links out: never served
    write_small_run(runs / "sim", num_requests=20)
    with start_server(runs, secret) as running:
        yield running


def _runs(server: Server) -> dict[str, dict[str, Any]]:
    rows = httpx.get(f"{server.url}/api/runs", timeout=30).json()["runs"]
    return {r["name"]: r for r in rows}


def test_every_run_kind_lists_model_gpu_engine_and_load(sweep_server: Server) -> None:
    rows = _runs(sweep_server)
    measured, sim = rows["measured"], rows["sim"]
    assert measured["kind"] == "measured" and measured["model"] == "smollm2"
    assert measured["load"].startswith("concurrency 2, 12 requests")
    assert measured["server"].startswith("http://127.0.0.1:")
    assert sim["kind"] == "simulated"
    assert (sim["model"], sim["gpu"]) == ("llama-3.1-8b", "h100-sxm")
    # the typed run config records the engine preset the simulation ran (vllm by default)
    assert sim["engine"] == "vllm" and sim["load"].startswith("10 req/s, 20 requests")
    for row in rows.values():
        assert all(isinstance(row[k], str) and row[k] for k in ("model", "gpu", "engine", "load"))


def test_a_sweep_is_listed_with_its_points(sweep_server: Server) -> None:
    sweep = _runs(sweep_server)["sweep"]
    assert sweep["kind"] == "sweep"
    assert [p["name"] for p in sweep["points"]] == [f"sweep/{p}" for p in POINTS]
    assert sweep["load"] == "3 points: concurrency 1, 2, 4"
    summaries = [read_summary(SWEEP / p) or {} for p in POINTS]
    assert [p["completed"] for p in sweep["points"]] == [s["completed"] for s in summaries]
    assert sweep["completed"] == sum(s["completed"] for s in summaries)
    assert all(p["model"] == "smollm2" for p in sweep["points"])


def test_sweep_points_and_the_sweep_open(sweep_server: Server) -> None:
    url = sweep_server.url
    for point in POINTS:
        summary = httpx.get(f"{url}/api/runs/sweep/{point}", timeout=30).json()["summary"]
        assert summary == read_summary(SWEEP / point)
        page = httpx.get(f"{url}/runs/sweep/{point}", timeout=60)
        assert page.status_code == 200 and f"At a glance: sweep/{point}" in page.text
    doc = httpx.get(f"{url}/api/runs/sweep", timeout=30).json()
    assert doc["sweep"] is True and [p["name"] for p in doc["points"]] == [
        f"sweep/{p}" for p in POINTS
    ]
    report = httpx.get(f"{url}/runs/sweep", timeout=60)
    assert report.status_code == 200
    assert "sweep_throughput_latency" in report.text and "Knee rule" in report.text


@pytest.mark.parametrize(
    "target",
    [
        "/runs/sweep/escape",
        "/api/runs/sweep/escape",
        "/runs/sweep/../measured",
        "/runs/sweep/%2e%2e/measured",
        "/runs/sweep/concurrency_1/config.json",
        "/runs/sweep/no-such-point",
        "/runs/measured/concurrency_1",
        "/api/runs/sweep/concurrency_1/x",
    ],
)
def test_no_way_out_through_a_sweep(sweep_server: Server, target: str) -> None:
    status, text = sweep_server.raw_get(target)
    assert 400 <= status < 500, (target, status, text[:200])
    assert "top secret" not in text and "outside-run" not in text
    listed = [p["name"] for p in _runs(sweep_server)["sweep"]["points"]]
    assert "sweep/escape" not in listed


def test_the_page_lists_sweep_points_that_open(browser: Any, sweep_server: Server) -> None:
    page = browser.new_page()
    page.goto(sweep_server.url + "/")
    page.wait_for_function("document.body.dataset.ready === '1'", timeout=60_000)
    hrefs = [a.get_attribute("href") for a in page.locator("#runs-table a").all()]
    assert {"/runs/sweep", *(f"/runs/sweep/{p}" for p in POINTS)} <= set(hrefs)
    row = page.locator("#runs-table tr", has=page.locator('a[href="/runs/measured"]'))
    cells = row.locator("td").all_inner_texts()
    assert cells[1:3] == ["measured", "smollm2"] and cells[5].startswith("concurrency 2")
    report = browser.new_page()
    report.goto(sweep_server.url + "/runs/sweep/concurrency_4")
    report.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 2")
    assert report.locator("section.headline").count() == 1
    report.close()
    page.close()
