"""A run's report opens with what ran, its key figures and the findings that fired, formats
numbers for people and keeps config.json for the end (the REAL llama.cpp run of tests/data)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tokenprobe.records import read_run, read_summary
from tokenprobe.report import fmt, run_facts, run_sections
from tokenprobe.report.html import Section

MEASURED = Path(__file__).resolve().parents[1] / "data" / "runs" / "llamacpp_cpu_pid"


@pytest.fixture(scope="module")
def measured() -> tuple[Any, dict[str, Any], list[Section]]:
    run = read_run(MEASURED)
    summary = read_summary(MEASURED)
    assert summary is not None
    return run, summary, run_sections(run, summary, MEASURED.name)


def _table(section: Section, caption: str) -> dict[str, tuple[str, ...]]:
    table = next(t for t in section.tables if t.caption == caption)
    return {row[0]: row[1:] for row in table.rows}


def test_the_headline_comes_first_and_the_config_last(measured: Any) -> None:
    _, _, sections = measured
    assert sections[0].css_class == "headline"
    assert sections[-1].title == "Configuration"
    assert [t.caption for t in sections[0].tables][:2] == ["What was run", "Key figures"]


def test_the_headline_says_what_ran(measured: Any) -> None:
    run, _, sections = measured
    what = _table(sections[0], "What was run")
    assert what["kind"] == ("measured",)
    assert what["model"] == (run.config["model"],)
    assert what["server"] == (run.config["url"],)
    assert what["load"][0].startswith(f"concurrency {run.config['concurrency']}")
    assert f"{run.config['num_requests']} requests" in what["load"][0]


def test_the_key_figures_are_the_summary_formatted_for_people(measured: Any) -> None:
    _, summary, sections = measured
    figures = _table(sections[0], "Key figures")
    assert figures["requests completed / failed"] == (
        f"{summary['completed']} / {summary['failed']}",
    )
    for key, label in (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("itl_s", "ITL")):
        p50, p99 = summary[key]["p50"], summary[key]["p99"]
        assert figures[f"{label} p50 / p99"] == (f"{fmt.ms(p50)} / {fmt.ms(p99)} ms",)
    assert figures["output tokens/s"] == (fmt.num(summary["output_tokens_per_s"]),)


def test_the_findings_that_fired_are_in_the_headline(measured: Any) -> None:
    _, _, sections = measured
    diagnosis = next(s for s in sections if s.title == "Diagnosis")
    findings = next(t for t in diagnosis.tables if t.caption == "Findings")
    fired = next(t for t in sections[0].tables if t.caption == "Findings that fired")
    assert findings.rows, "the recording is CPU-bound: a rule fires"
    assert [r[1] for r in fired.rows] == [r[2] for r in findings.rows]  # the same "what"


def test_no_table_cell_is_in_e_notation(measured: Any) -> None:
    _, _, sections = measured
    for section in sections[:-1]:  # the config shows the values as written
        for table in section.tables:
            for row in table.rows:
                for cell in row:
                    assert not re.search(r"\d[eE][+-]\d", cell), (table.caption, row)


def test_goodput_shows_with_its_slos() -> None:
    run = read_run(MEASURED)
    summary = {**(read_summary(MEASURED) or {}), "slo_ttft_s": 0.5, "slo_tpot_s": 0.04}
    sent = summary["completed"] + summary["failed"]
    summary["goodput_requests_per_s"] = 3 / summary["duration_s"]  # 3 requests met the SLOs
    figures = _table(run_sections(run, summary)[0], "Key figures")
    share = fmt.pct(3 / sent)
    assert figures["goodput (requests/s within TTFT <= 500 ms, TPOT <= 40.0 ms)"] == (
        f"{fmt.num(3 / summary['duration_s'])} ({share} of requests)",
    )
    plain = _table(run_sections(run, read_summary(MEASURED) or {})[0], "Key figures")
    assert not any(k.startswith("goodput") for k in plain)  # no SLOs: no goodput row


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"model": 3, "gpu": ["x"], "concurrency": "many", "workload": "?", "deployment": None},
        {"deployment": {"model": "m", "gpu": {"name": "h100-sxm"}, "tp": 2}},
    ],
)
def test_run_facts_take_any_config(config: dict[str, Any]) -> None:
    facts = run_facts("measured", config)
    assert set(facts) == {"model", "gpu", "engine", "load", "server"}
    assert all(isinstance(v, str) and v for v in facts.values())


def test_run_facts_read_a_nested_deployment_and_the_catalog_model() -> None:
    facts = run_facts(
        "measured",
        {
            "model": "served-id",
            "catalog_model": "llama-3.1-8b",
            "deployment": {"gpu": {"name": "h100-sxm"}, "tp": 2},
            "engine": "vllm",
            "rate_per_s": 2.5,
            "num_requests": 1000,
        },
    )
    assert facts["model"] == "served-id (priced as llama-3.1-8b)"
    assert facts["gpu"] == "h100-sxm (tp=2)"
    assert facts["engine"] == "vllm"
    assert facts["load"] == "2.50 req/s, 1,000 requests"


def test_run_facts_of_an_imported_vllm_run() -> None:
    config = {
        "model_id": "meta-llama/Llama-3.1-8B",
        "backend": "vllm",
        "request_rate": 4.0,
        "max_concurrency": None,
        "source": "vllm bench serve",
    }
    facts = run_facts("imported", config)
    assert facts["model"] == "meta-llama/Llama-3.1-8B"
    assert facts["engine"] == "vllm"
    assert facts["load"] == "4.00 req/s"
    assert facts["server"] == "imported from vllm bench serve"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://user:s3cret@host:8000/v1?api_key=s3cret", "http://host:8000/v1"),
        ("http://127.0.0.1:42407/v1", "http://127.0.0.1:42407/v1"),
        ("http://[::1]:8000/v1", "http://[::1]:8000/v1"),
        ("http://host:99999999/v1", "-"),
    ],
)
def test_the_server_url_is_shown_without_credentials(url: str, shown: str) -> None:
    assert run_facts("measured", {"url": url})["server"] == shown
