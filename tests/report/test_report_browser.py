"""Reports open in a real Chromium without console errors; a 10,000-request simulated run's report
stays under 10 MB. Screenshots go to test-artifacts/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import tokenprobe
from tokenprobe.report import compare_sections, estimate_sections, run_sections, write_report
from tokenprobe.sim import simulate

from .conftest import open_collecting_errors

MAX_REPORT_BYTES = 10 * 1000 * 1000


@pytest.fixture(scope="module")
def sim_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    result = simulate(
        "llama-3.1-8b",
        "h100-sxm",
        input_tokens=512,
        output_tokens=256,
        rate_per_s=20,
        num_requests=10_000,
        seed=1,
    )
    assert len(result.records) == 10_000
    out = tmp_path_factory.mktemp("sim") / "sim10k.html"
    return write_report(out, run_sections(result.run(), result.to_dict(), "sim10k"), "sim10k")


def _plots_drawn(page: Any) -> int:
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length > 0")
    return int(page.evaluate("document.querySelectorAll('.js-plotly-plot .main-svg').length"))


def test_simulated_10k_run_report_is_small_and_clean(
    browser: Any, sim_report: Path, artifacts: Path
) -> None:
    assert sim_report.stat().st_size < MAX_REPORT_BYTES
    page, errors = open_collecting_errors(browser, sim_report.as_uri())
    assert _plots_drawn(page) >= 3
    n_plots = page.evaluate("document.querySelectorAll('.js-plotly-plot').length")
    assert n_plots == 3  # latency CDFs, timeline, energy
    page.locator("#fig-timeline").screenshot(path=str(artifacts / "report-sim10k-timeline.png"))
    page.screenshot(path=str(artifacts / "report-sim10k.png"), full_page=True)
    page.close()
    assert errors == []


def test_estimate_report_is_clean(browser: Any, tmp_path: Path, artifacts: Path) -> None:
    est = tokenprobe.estimate(
        "llama-3.1-70b", "h100-sxm", tp=2, input_tokens=2048, output_tokens=512, batch=16
    ).to_dict()
    path = write_report(tmp_path / "e.html", estimate_sections(est), "estimate")
    page, errors = open_collecting_errors(browser, path.as_uri())
    _plots_drawn(page)
    assert page.evaluate("document.querySelectorAll('.js-plotly-plot').length") == 7
    # the roofline drew its operator markers (points in the SVG), not an empty frame
    assert page.locator("#fig-roofline .scatterlayer .point").count() >= 8
    page.screenshot(path=str(artifacts / "report-estimate.png"), full_page=True)
    page.close()
    assert errors == []


def test_compare_report_is_clean(browser: Any, tmp_path: Path) -> None:
    labelled = [
        (g, tokenprobe.estimate("llama-3.1-8b", g, input_tokens=1024, output_tokens=256).to_dict())
        for g in ("a100-sxm-80gb", "h100-sxm", "h200")
    ]
    path = write_report(tmp_path / "c.html", compare_sections(labelled), "compare")
    page, errors = open_collecting_errors(browser, path.as_uri())
    _plots_drawn(page)
    assert page.locator("#fig-compare .bars .point").count() == 12  # 4 panels x 3 GPUs
    page.close()
    assert errors == []
