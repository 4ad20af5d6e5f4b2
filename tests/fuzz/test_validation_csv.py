"""Validation-schema CSVs (calibrate.load_csv): rows whose measured figures and predictions are
finite, skipped rows counted, or ConfigError; never an exception at load or at prediction."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from tokenprobe.calibrate import load_csv
from tokenprobe.calibrate.observations import LoadResult
from tokenprobe.cli import app
from tokenprobe.cost import DEFAULT_EFFICIENCY, DEFAULT_POWER

from .conftest import (
    FUZZ,
    NOT_FILE_KINDS,
    assert_schema_error_naming,
    file_contents,
    not_a_file,
    parse_or_config_error,
)

ROWS = [
    {"source_id": "argonne_llm_inference_bench_ttft", "engine": "vLLM", "engine_version": "0.5.0",
     "model": "Llama-3.1-8B", "model_hf_id": "llama-3.1-8b", "gpu": "H100", "tp": "1",
     "batch_size": "8", "isl": "128", "osl": "128", "ttft_ms_mean": "25.0"},
    {"source_id": "trtllm_v0.9.0_static_batch", "engine": "TensorRT-LLM", "model": "LLaMA v3.1 8B",
     "gpu": "H100 SXM", "tp": "1", "batch_size": "64", "isl": "128", "osl": "128",
     "output_tok_s_per_gpu": "5000", "weight_precision": "FP8"},
    {"source_id": "mlenergy_leaderboard_v3", "engine": "vLLM", "engine_version": "0.11.1",
     "model": "Llama-3.1-8B", "model_hf_id": "llama-3.1-8b", "gpu": "H100", "gpu_count": "1",
     "tp": "1", "avg_batch_size": "64", "osl_mean": "300", "notes": "task=lm-arena-chat",
     "itl_ms_median": "20", "output_tok_s": "3000", "power_W_total": "600"},
    {"source_id": "tokenprobe_profile", "engine": "pytorch", "model": "llama-3.1-8b",
     "model_hf_id": "llama-3.1-8b", "gpu": "h100-sxm", "workload_type": "decode_step",
     "batch_size": "8", "isl": "512", "itl_ms_mean": "10", "power_W_total": "400"},
]  # fmt: skip
COLUMNS = sorted({k for row in ROWS for k in row})
HOSTILE_CELLS = ["nan", "inf", "-inf", "1e999", "-1", "0", "1e30", "abc", "", "9" * 400, "1.5"]


def _csv(rows: list[dict[str, str]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def _check(result: LoadResult | None) -> None:
    if result is None:
        return
    for row in result.rows:
        assert all(math.isfinite(v) and v > 0 for v in row.measured.values()), row.measured
        if row.simulated:  # a serving simulation per row: too slow for a fuzz example
            continue
        predicted = row.predictions(DEFAULT_EFFICIENCY, DEFAULT_POWER)
        for metric in row.measured:
            assert math.isfinite(predicted[metric]), (row.label, metric, predicted[metric])


def _load(tmp_path: Path, data: bytes) -> LoadResult | None:
    path = tmp_path / "v.csv"
    path.write_bytes(data)
    return parse_or_config_error(load_csv, path)


def test_the_example_rows_all_map(tmp_path: Path) -> None:
    # the fuzzing below starts from rows that load: each source's mapper is reached
    path = tmp_path / "v.csv"
    path.write_text(_csv(ROWS))
    result = load_csv(path)
    assert len(result.rows) == len(ROWS), result.skipped
    _check(result)


@st.composite
def hostile_rows(draw: st.DrawFn) -> list[dict[str, str]]:
    rows = [dict(row) for row in ROWS]
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        row = draw(st.sampled_from(rows))
        key = draw(st.sampled_from(COLUMNS))
        # a line break ends a CSV record and a NUL byte makes the file binary (refused whole):
        # both are other tests' cases; here the header and the row count must hold
        cell_text = st.text(st.characters(exclude_characters="\r\n\x00"), max_size=8)
        row[key] = draw(st.one_of(st.sampled_from(HOSTILE_CELLS), cell_text))
    return rows


@FUZZ
@given(rows=hostile_rows())
def test_hostile_cells(tmp_path: Path, rows: list[dict[str, str]]) -> None:
    result = _load(tmp_path, _csv(rows).encode())
    assert result is not None  # the header is intact: rows are kept or skipped, not refused
    assert len(result.rows) + sum(result.skipped.values()) == len(rows)
    _check(result)


@FUZZ
@given(data=file_contents(_csv(ROWS).encode()))
def test_random_and_mutated_bytes(tmp_path: Path, data: bytes) -> None:
    _check(_load(tmp_path, data))


def test_a_cell_over_the_csv_field_limit_is_a_schema_error(tmp_path: Path) -> None:
    path = tmp_path / "v.csv"
    path.write_text(_csv(ROWS) + '"' + "x" * 200_000 + '"\n')
    with pytest.raises(Exception, match=r"v\.csv") as info:
        load_csv(path)
    assert info.type.__name__ == "SchemaError"


def test_a_model_name_too_long_for_a_path_is_a_skipped_row(tmp_path: Path) -> None:
    rows = [{**ROWS[0], "model_hf_id": "9" * 400}]
    result = _load(tmp_path, _csv(rows).encode())
    assert result is not None and not result.rows and sum(result.skipped.values()) == 1


@pytest.mark.parametrize("kind", NOT_FILE_KINDS)
def test_paths_that_are_not_files(tmp_path: Path, kind: str) -> None:
    path = not_a_file(tmp_path, kind, "v.csv")
    assert_schema_error_naming(lambda: load_csv(path), path)


@pytest.mark.parametrize("kind", ["fifo", "binary", "dangling"])
def test_cli_calibrate_with_a_bad_csv_exits_2(tmp_path: Path, kind: str) -> None:
    path = not_a_file(tmp_path, kind, "X.csv")
    result = CliRunner().invoke(app, ["calibrate", str(path)])
    assert result.exit_code == 2, result.output
    assert "X.csv" in "".join(result.output.split())
