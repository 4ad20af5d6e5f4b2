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


MEASURED = Path(__file__).resolve().parents[1] / "data" / "runs" / "llamacpp_cpu_pid"
SWEEP = Path(__file__).resolve().parent / "data" / "sweep_llamacpp"

# every title plotly draws (figure, x/y axes of every subplot) is a <text> in .infolayer
TITLE_BOXES = """() => {
  const out = [];
  for (const plot of document.querySelectorAll('.js-plotly-plot')) {
    const boxes = [];
    for (const t of plot.querySelectorAll('.infolayer [class*="title"] text')) {
      const r = t.getBoundingClientRect();
      if (r.width > 0 && t.textContent.trim()) {
        boxes.push({text: t.textContent, l: r.left, r: r.right, t: r.top, b: r.bottom});
      }
    }
    out.push({id: plot.id, boxes});
  }
  return out;
}"""


def _overlaps(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a["l"] < b["r"] and b["l"] < a["r"] and a["t"] < b["b"] and b["t"] < a["b"]


def _title_clashes(page: Any) -> list[tuple[str, str, str]]:
    clashes = []
    plots = page.evaluate(TITLE_BOXES)
    assert plots and all(p["boxes"] for p in plots)
    for plot in plots:
        boxes = plot["boxes"]
        for i, a in enumerate(boxes):
            clashes += [
                (plot["id"], a["text"], b["text"]) for b in boxes[i + 1 :] if _overlaps(a, b)
            ]
    return clashes


def _report_page(browser: Any, path: Path) -> tuple[Any, list[str]]:
    page, errors = open_collecting_errors(browser, path.as_uri())
    _plots_drawn(page)
    page.wait_for_timeout(300)  # responsive relayout settles
    return page, errors


def test_measured_run_report_opens_with_the_headline_and_no_title_overlaps(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    from tokenprobe.records import read_run, read_summary

    run = read_run(MEASURED)
    sections = run_sections(run, read_summary(MEASURED) or {}, MEASURED.name)
    path = write_report(tmp_path / "m.html", sections, f"Run {MEASURED.name}")
    page, errors = _report_page(browser, path)
    first = page.locator("section").first
    assert first.get_attribute("class") == "headline"
    assert "What was run" in first.inner_text() and "Key figures" in first.inner_text()
    # the headline sits above every figure, the configuration below all of them
    tops = page.evaluate(
        "[...document.querySelectorAll('section')].map(s => s.getBoundingClientRect().top)"
    )
    figs = page.evaluate(
        "[...document.querySelectorAll('.js-plotly-plot')].map(p => p.getBoundingClientRect().top)"
    )
    assert tops[0] < min(figs) and tops[-1] > max(figs)
    assert page.locator("section").last.locator("h2").inner_text() == "Configuration"
    assert _title_clashes(page) == []
    page.screenshot(path=str(artifacts / "report-measured.png"), full_page=True)
    page.close()
    assert errors == []


def test_sweep_report_draws_its_curves_without_title_overlaps(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    from tokenprobe.report import read_sweep, sweep_sections

    path = write_report(tmp_path / "s.html", sweep_sections(read_sweep(SWEEP), "s"), "sweep")
    page, errors = _report_page(browser, path)
    assert page.evaluate("document.querySelectorAll('.js-plotly-plot').length") == 2
    assert page.locator("#fig-sweep_throughput_latency .scatterlayer .point").count() >= 7
    assert _title_clashes(page) == []
    page.screenshot(path=str(artifacts / "report-sweep.png"), full_page=True)
    page.close()
    assert errors == []
