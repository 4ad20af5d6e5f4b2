"""Import of `vllm bench serve` and GuideLLM results into imported Runs.

The documents are small hand-written files in the shapes those tools save (vLLM's
`--save-result --save-detailed` keys; GuideLLM's benchmarks report with info.timings).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import tokenprobe.cli.bench  # noqa: F401  (registers the commands)
from tokenprobe.cli.app import app
from tokenprobe.errors import SchemaError
from tokenprobe.loadgen.importers import import_guidellm, import_runs, import_vllm
from tokenprobe.metrics import summarize
from tokenprobe.records import read_run

VLLM = {
    "backend": "vllm",
    "model_id": "m",
    "duration": 2.0,
    "completed": 2,
    "request_rate": 1.0,
    "input_lens": [10, 12, 11],
    "output_lens": [3, 2, 0],
    "ttfts": [0.1, 0.2, 0.0],
    "itls": [[0.02, 0.03], [0.05], []],
    "start_times": [100.0, 100.5, 101.0],
    "errors": ["", "", "Server disconnected"],
}


def test_vllm_result_rebuilds_token_times_and_vllm_metrics():
    run = import_vllm(VLLM)
    first, second, failed = run.records
    assert run.kind == "imported" and run.duration_s == 2.0
    assert first.token_times_s == pytest.approx([0.1, 0.12, 0.15])
    assert second.sent_s == 0.5 and second.ttft_s == pytest.approx(0.2)
    assert second.e2e_s == pytest.approx(0.25)
    assert failed.error_kind == "imported_error" and failed.error_message == "Server disconnected"
    summary = summarize(run)
    assert summary["completed"] == 2 and summary["errors"] == {"imported_error": 1}
    assert summary["requests_per_s"] == 1.0  # vLLM's: completed / duration
    assert summary["itl_s"]["mean"] == pytest.approx((0.02 + 0.03 + 0.05) / 3)
    assert summary["tpot_s"]["mean"] == pytest.approx((0.05 / 2 + 0.05 / 1) / 2)


def test_vllm_result_without_detail_is_a_clear_schema_error():
    with pytest.raises(SchemaError, match="--save-detailed"):
        import_vllm({"duration": 1.0, "completed": 3})
    bad = {**VLLM, "ttfts": [0.1]}
    with pytest.raises(SchemaError, match="different lengths"):
        import_vllm(bad)


def _guidellm_request(rid: str, start: float, ttft: float, end: float, out: int, error=None):
    timings = {
        "targeted_start": start - 0.001,
        "request_start": start,
        "first_token_iteration": start + ttft,
        "last_token_iteration": end,
        "request_end": end,
    }
    return {
        "request_id": rid,
        "info": {"timings": timings, "error": error},
        "prompt_tokens": 16,
        "output_tokens": out,
    }


GUIDELLM = {
    "benchmarks": [
        {
            "id": "b0",
            "requests": {
                "successful": [
                    _guidellm_request("a", 1_700_000_000.0, 0.05, 1_700_000_000.5, 11),
                    _guidellm_request("b", 1_700_000_000.2, 0.07, 1_700_000_000.9, 11),
                ],
                "incomplete": [],
                "errored": [
                    _guidellm_request(
                        "c", 1_700_000_000.3, 0.0, 1_700_000_000.31, 0, error="HTTP 500"
                    )
                ],
            },
        }
    ]
}


def test_guidellm_report_maps_timings_relative_to_the_first_request():
    (run,) = import_guidellm(GUIDELLM)
    a, b, c = run.records
    # the clock starts at the earliest targeted start (1 ms before a's request_start): no
    # run-relative time is negative, so the written run reads back (records._check_record)
    assert run.wall_start_s == pytest.approx(1_700_000_000.0 - 0.001)
    assert a.scheduled_s == 0.0 and a.sent_s == pytest.approx(0.001, abs=1e-6)
    assert a.ttft_s == pytest.approx(0.05)
    assert b.tpot_s == pytest.approx((0.7 - 0.07) / 10, abs=1e-6)
    assert c.error_kind == "imported_error" and c.error_message == "HTTP 500"
    assert summarize(run)["itl_s"]["mean"] is None  # GuideLLM keeps no per-token times


def test_cli_bench_import_writes_a_run_folder(tmp_path: Path):
    src = tmp_path / "vllm.json"
    src.write_text(json.dumps(VLLM))
    result = CliRunner().invoke(
        app, ["bench-import", str(src), "--from", "vllm", "--out", str(tmp_path / "r"), "--json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["runs"][0]["completed"] == 2
    assert read_run(tmp_path / "r").kind == "imported"


@pytest.mark.parametrize(
    ("content", "source", "needle"),
    [
        ("{not json", "vllm", "not valid JSON"),
        ("{}", "guidellm", "not a GuideLLM report"),
        ("{}", "sglang", "one of auto, vllm, guidellm, aiperf"),
    ],
)
def test_cli_bench_import_bad_files_are_one_line(
    tmp_path: Path, content: str, source: str, needle: str
):
    src = tmp_path / "x.json"
    src.write_text(content)
    result = CliRunner().invoke(
        app, ["bench-import", str(src), "--from", source, "--out", str(tmp_path / "r")]
    )
    assert result.exit_code == 2 and needle in " ".join(result.output.split())
    assert "Traceback" not in result.output


def test_import_runs_reads_a_file(tmp_path: Path):
    src = tmp_path / "g.json"
    src.write_text(json.dumps(GUIDELLM))
    assert len(import_runs(src, "guidellm")[0].records) == 3


def test_real_guidellm_report_agrees_with_guidellm_per_request_figures():
    """A report GuideLLM 0.8.1 wrote (trimmed to 6 requests): its own computed TTFT, latency
    and TPOT per request must come out of the imported records."""
    path = Path(__file__).parent / "data" / "guidellm_0.8.1_report.json"
    doc = json.loads(path.read_text())
    (run,) = import_runs(path, "guidellm")
    wanted = doc["benchmarks"][0]["requests"]["successful"]
    assert len(run.records) == len(wanted) == 6
    for record, req in zip(run.records, wanted, strict=True):
        assert record.ok and record.request_id == req["request_id"]
        assert record.ttft_s * 1000 == pytest.approx(req["time_to_first_token_ms"], abs=1e-3)
        assert record.e2e_s == pytest.approx(req["request_latency"], abs=1e-6)
        assert record.output_tokens == req["output_tokens"] == 16
        assert record.input_tokens == req["prompt_tokens"]
