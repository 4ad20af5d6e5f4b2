"""The page itself: self-contained (plotly.js inlined, nothing fetched), data escaped."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import tokenprobe
from tokenprobe.report import Section, Table, estimate_sections, render_html, write_report
from tokenprobe.report.html import figures_json, plotly_js


def test_report_is_self_contained(tmp_path: Path) -> None:
    est = tokenprobe.estimate("llama-3.1-8b", "h100-sxm", input_tokens=512, output_tokens=128)
    path = write_report(tmp_path / "sub" / "r.html", estimate_sections(est.to_dict()), "t")
    text = path.read_text(encoding="utf-8")
    assert plotly_js() in text  # the library itself, inlined
    assert not re.search(r"<script[^>]+src=", text)  # no external script
    assert not re.search(r"<link[^>]+href=", text)  # no external stylesheet
    assert "cdn." not in text.lower().split("<script>", 2)[0]  # head has no CDN reference
    figures = json.loads(re.search(r'id="figures">(.*?)</script>', text, re.S).group(1))
    assert {"roofline", "shares", "tpot", "throughput", "memory", "kv", "energy"} <= set(figures)


def test_text_from_data_is_escaped() -> None:
    evil = "</script><script>alert(1)</script>"
    page = render_html(
        evil,
        [Section(evil, tables=[Table(evil, ("a", evil), [(evil, evil)])], notes=[evil])],
    )
    assert "<script>alert(1)" not in page
    assert "&lt;/script&gt;" in page


def test_figure_json_cannot_close_its_script_element() -> None:
    text = figures_json({"f": {"data": [{"name": "</script><!--"}], "layout": {}}})
    assert "<" not in text
    assert json.loads(text)["f"]["data"][0]["name"] == "</script><!--"


def test_duplicate_figure_ids_are_refused() -> None:
    fig = {"data": [], "layout": {}}
    with pytest.raises(ValueError, match="used twice"):
        render_html("t", [Section("a", figures={"x": fig}), Section("b", figures={"x": fig})])
