"""AIPerf's per-request export (profile_export.jsonl) imported, and bench-import telling vLLM,
GuideLLM and AIPerf files apart by itself.

data/aiperf_profile_export.jsonl is constructed in the documented shape (ai-dynamo/aiperf
docs/tutorials/working-with-profile-exports.md): one warm-up record (skipped), two successful
profiling records and one cancelled one (code 499). The expected values below are read from
the file itself, so the test checks the conversion (ns epochs, ms metrics, chunk gaps), not
numbers copied from the importer.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import tokenprobe.cli.bench  # noqa: F401  (registers the commands)
from tokenprobe.cli.app import app
from tokenprobe.errors import SchemaError
from tokenprobe.loadgen.importers import detect_format, import_runs
from tokenprobe.records import read_run

DATA = Path(__file__).parent / "data"
AIPERF = DATA / "aiperf_profile_export.jsonl"
GUIDELLM = DATA / "guidellm_0.8.1_report.json"
VLLM = {"input_lens": [3], "output_lens": [2], "ttfts": [0.1], "itls": [[0.02]], "errors": [""]}
runner = CliRunner()


def _lines() -> list[dict[str, Any]]:
    return [json.loads(line) for line in AIPERF.read_text().splitlines() if line.strip()]


def test_aiperf_records_keep_aiperf_timings():
    (run,) = import_runs(AIPERF)
    profiling = [x for x in _lines() if x["metadata"]["benchmark_phase"] == "profiling"]
    assert run.kind == "imported" and run.config["source"] == "aiperf"
    assert len(run.records) == len(profiling) == 3  # the warm-up record is not measured
    t0_ns = min(x["metadata"]["request_start_ns"] for x in profiling)
    for record, line in zip(run.records, profiling, strict=True):
        meta, metrics = line["metadata"], line["metrics"]
        assert record.request_id == meta["x_request_id"]
        assert record.sent_s == pytest.approx((meta["request_start_ns"] - t0_ns) / 1e9, abs=1e-9)
        if line["error"] is not None:
            assert record.error_kind == "http_499" and not record.ok
            assert "RequestCancellationError" in (record.error_message or "")
            assert record.input_tokens == metrics["error_isl"]["value"]
            continue
        assert record.ttft_s == pytest.approx(metrics["time_to_first_token"]["value"] / 1e3)
        gaps_ms = [(b - a) * 1e3 for a, b in itertools.pairwise(record.token_times_s)]
        assert gaps_ms == pytest.approx(metrics["inter_chunk_latency"]["value"])
        e2e_ns = meta["request_end_ns"] - meta["request_start_ns"]
        assert record.e2e_s == pytest.approx(e2e_ns / 1e9, abs=1e-9)
        assert record.e2e_s * 1e3 == pytest.approx(metrics["request_latency"]["value"])
        assert record.input_tokens == metrics["input_sequence_length"]["value"]
        assert record.output_tokens == metrics["output_sequence_length"]["value"]


def test_bench_import_detects_each_format(tmp_path: Path):
    vllm = tmp_path / "vllm.json"
    vllm.write_text(json.dumps(VLLM))
    for path, source in ((AIPERF, "aiperf"), (GUIDELLM, "guidellm"), (vllm, "vllm")):
        assert detect_format(path.read_text(), str(path))[0] == source
        out = tmp_path / source
        result = runner.invoke(app, ["bench-import", str(path), "--out", str(out), "--json"])
        assert result.exit_code == 0, result.output
        first = out if (out / "config.json").exists() else out / "benchmark_0"
        assert read_run(first).kind == "imported"
        assert read_run(first).config["source"].startswith(source if source != "vllm" else "v")


@pytest.mark.parametrize(("given", "actual"), [("vllm", "guidellm"), ("guidellm", "aiperf")])
def test_a_wrong_from_names_what_the_file_is(tmp_path: Path, given: str, actual: str):
    path = {"guidellm": GUIDELLM, "aiperf": AIPERF}[actual]
    result = runner.invoke(
        app, ["bench-import", str(path), "--from", given, "--out", str(tmp_path / "r")]
    )
    assert result.exit_code == 2, result.output
    flat = " ".join(result.output.split())
    assert f"this is a {actual} result" in flat and f"--from {actual}" in flat


def test_aiperf_aggregate_file_points_at_the_per_request_export(tmp_path: Path):
    path = tmp_path / "profile_export_aiperf.json"
    path.write_text(json.dumps({"input_config": {}, "time_to_first_token": {"avg": 12.0}}))
    result = runner.invoke(app, ["bench-import", str(path), "--out", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert "profile_export.jsonl" in " ".join(result.output.split())


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (lambda x: x["metrics"]["time_to_first_token"].update(unit="furlongs"), "not a time unit"),
        (lambda x: x["metrics"]["time_to_first_token"].update(value=-1), "time_to_first_token"),
        (lambda x: x["metadata"].update(request_start_ns="soon"), "request_start_ns"),
        (lambda x: x["metrics"]["inter_chunk_latency"].update(value=[1, "x"]), "inter_chunk"),
        (lambda x: x["metrics"]["output_sequence_length"].update(value=1.5), "token count"),
    ],
)
def test_a_bad_aiperf_line_is_a_schema_error_naming_the_line(
    tmp_path: Path, change: Any, needle: str
):
    lines = _lines()
    change(lines[1])
    path = tmp_path / "profile_export.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    with pytest.raises(SchemaError) as info:
        import_runs(path)
    assert f"{path}:2" in str(info.value) and needle in str(info.value)
