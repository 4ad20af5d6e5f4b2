"""The calculator page in a real headless Chromium against the real server: it loads, changing the
GPU and the batch changes the numbers and the plots, bad input shows the server's message, the
what-if panel fills, the run browser links to a report. Screenshots go to test-artifacts/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .conftest import RUN_NAME, Server


@pytest.fixture(scope="module")
def page(server: Server, browser: Any) -> Any:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    page.errors = errors
    page.goto(server.url + "/")
    page.wait_for_function("document.body.dataset.ready === '1'", timeout=60_000)
    yield page
    page.close()


def _updates(page: Any) -> int:
    return int(page.evaluate("Number(document.body.dataset.updates || 0)"))


def _wait_for_update(page: Any, before: int) -> None:
    page.wait_for_function(f"Number(document.body.dataset.updates || 0) > {before}", timeout=60_000)


def _numbers(page: Any) -> dict[str, str]:
    ids = ("ttft", "tpot", "tps", "fits", "maxconc", "cbb")
    return {i: page.inner_text(f"#out-{i}") for i in ids}


def _plot_y(page: Any, fig: str, trace: int) -> list[float]:
    """The y values Plotly holds for a drawn trace (the div's `data`, set by Plotly.react)."""
    return list(page.evaluate(f"document.getElementById('fig-{fig}').data[{trace}].y"))


def _svg(page: Any, fig: str) -> str:
    return str(page.inner_html(f"#fig-{fig} .main-svg"))


def test_page_loads_with_numbers_and_plots(page: Any, artifacts: Path) -> None:
    nums = _numbers(page)
    assert nums["ttft"].endswith("ms") and nums["tpot"].endswith("ms")
    assert nums["fits"] == "yes"
    assert page.locator(".js-plotly-plot").count() >= 7
    assert page.locator("#fig-roofline .scatterlayer .point").count() >= 8
    page.screenshot(path=str(artifacts / "web-initial.png"), full_page=True)
    assert page.errors == []


def test_changing_the_gpu_changes_numbers_and_roofline(page: Any, artifacts: Path) -> None:
    before_nums, before_roof = _numbers(page), _plot_y(page, "roofline", 0)
    before_svg = _svg(page, "roofline")
    n = _updates(page)
    page.select_option("#in-gpu", "a100-sxm-80gb")
    _wait_for_update(page, n)
    after = _numbers(page)
    assert after["tpot"] != before_nums["tpot"]
    assert after["ttft"] != before_nums["ttft"]
    # the compute roof is the A100's 312 TFLOP/s bf16 now, not the H100's 989
    assert _plot_y(page, "roofline", 0)[1] == pytest.approx(312.0)
    assert before_roof[1] == pytest.approx(989.0, rel=0.01)
    assert _svg(page, "roofline") != before_svg  # redrawn, not just new data
    page.screenshot(path=str(artifacts / "web-a100.png"), full_page=True)
    assert page.errors == []


def test_changing_the_batch_changes_numbers_and_plots(page: Any, artifacts: Path) -> None:
    before_nums = _numbers(page)
    before_tpot = _plot_y(page, "tpot", 0)
    before_kv = _plot_y(page, "kv", 1)  # the marker of this estimate's batch
    n = _updates(page)
    page.fill("#in-batch", "64")
    _wait_for_update(page, n)
    after = _numbers(page)
    assert after["tps"] != before_nums["tps"]
    assert after["tpot"] != before_nums["tpot"]
    tpot = _plot_y(page, "tpot", 0)
    assert min(tpot) > max(before_tpot)  # 64 sequences per step: every step is slower
    assert _plot_y(page, "kv", 1)[0] == pytest.approx(64 * before_kv[0])
    title = page.text_content("#fig-tpot .gtitle")  # SVG text: textContent, not innerText
    assert title is not None and title.endswith("(batch 64)")
    page.screenshot(path=str(artifacts / "web-a100-batch64.png"), full_page=True)
    assert page.errors == []


def test_choosing_an_engine_profile_changes_the_numbers(page: Any, artifacts: Path) -> None:
    options = page.eval_on_selector_all("#in-profile option", "os => os.map(o => o.value)")
    assert options[0] == "" and "vllm" in options and "sglang" in options
    before = _numbers(page)
    n = _updates(page)
    page.select_option("#in-profile", "vllm")
    _wait_for_update(page, n)
    after = _numbers(page)
    assert after["ttft"] != before["ttft"] and after["tpot"] != before["tpot"]
    page.screenshot(path=str(artifacts / "web-profile-vllm.png"), full_page=True)
    n = _updates(page)
    page.select_option("#in-profile", "")
    _wait_for_update(page, n)
    assert _numbers(page) == before
    assert page.errors == []


def test_bad_input_shows_the_server_message_and_recovers(page: Any) -> None:
    page.fill("#in-batch", "-5")
    page.wait_for_function("document.getElementById('error').textContent.includes('batch')")
    assert "greater than or equal to 1" in page.inner_text("#error")
    n = _updates(page)
    page.fill("#in-batch", "8")
    _wait_for_update(page, n)
    assert page.inner_text("#error") == ""


def test_whatif_panel_fills(page: Any, artifacts: Path) -> None:
    page.click("#whatif-run")
    page.wait_for_function("Number(document.body.dataset.whatif || 0) > 0", timeout=60_000)
    rows = page.locator("#whatif-table tr").count()
    catalog = page.evaluate("document.getElementById('in-gpu').options.length")
    assert rows == catalog + 1  # header + one row per GPU
    assert page.locator("#fig-whatif .bars .point").count() > 0
    page.locator("#fig-whatif").screenshot(path=str(artifacts / "web-whatif.png"))


def test_run_browser_links_to_the_report(page: Any, browser: Any, server: Server) -> None:
    link = page.locator("#runs-table a")
    assert link.inner_text() == RUN_NAME
    href = link.get_attribute("href")
    assert href == f"/runs/{RUN_NAME}"
    report = browser.new_page()
    errors: list[str] = []
    report.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    report.goto(server.url + href)
    report.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 2")
    report.close()
    assert errors == []
