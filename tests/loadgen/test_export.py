"""`tokenprobe export`: a run's records as CSV and Parquet, read back and compared with
records.jsonl row by row (a run measured on the real llama.cpp server, and an imported AIPerf
run with a failed request, so absent values are exported too)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import tokenprobe.cli  # noqa: F401  (registers every command)
from loadgen.conftest import LlamaServer
from tokenprobe.cli.app import app
from tokenprobe.records import EXPORT_COLUMNS, RECORDS_FILE, read_csv_records

DATA = Path(__file__).parent / "data"
runner = CliRunner()


def _jsonl(run_dir: Path) -> list[dict[str, Any]]:
    text = (run_dir / RECORDS_FILE).read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def runs(llama: LlamaServer, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("export")
    measured, imported = root / "measured", root / "imported"
    args = ["bench", "--url", llama.url, "--model", "smollm2", "--input-tokens", "16"]
    args += ["--output-tokens", "5", "--concurrency", "2", "--num-requests", "4"]
    assert runner.invoke(app, [*args, "--out", str(measured)]).exit_code == 0
    source = str(DATA / "aiperf_profile_export.jsonl")
    assert runner.invoke(app, ["bench-import", source, "--out", str(imported)]).exit_code == 0
    return [measured, imported]


def test_csv_rows_equal_records_jsonl(runs: list[Path], tmp_path: Path):
    for run_dir in runs:
        out = tmp_path / f"{run_dir.name}.csv"
        result = runner.invoke(app, ["export", str(run_dir), "--format", "csv", "--out", str(out)])
        assert result.exit_code == 0, result.output
        text = out.read_text()
        assert text.splitlines()[0].split(",") == list(EXPORT_COLUMNS)
        back = [r.to_dict() for r in read_csv_records(text)]
        assert back == _jsonl(run_dir)
        assert len(back) == len(_jsonl(run_dir)) > 0


def test_parquet_rows_equal_records_jsonl_with_list_columns(runs: list[Path], tmp_path: Path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    for run_dir in runs:
        out = tmp_path / f"{run_dir.name}.parquet"
        args = ["export", str(run_dir), "--format", "parquet", "--out", str(out), "--json"]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["rows"] == len(_jsonl(run_dir))
        table = pq.read_table(out)
        assert table.column_names == list(EXPORT_COLUMNS)
        assert table.schema.field("token_times_s").type == pa.list_(pa.float64())
        assert table.schema.field("input_tokens").type == pa.int64()
        rows = table.to_pylist()
        for row in rows:
            row["extra"] = json.loads(row["extra"])
        assert rows == _jsonl(run_dir)


def test_parquet_without_pyarrow_is_one_line_naming_the_extra(
    runs: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if not installed: import fails
    out = tmp_path / "x.parquet"
    result = runner.invoke(app, ["export", str(runs[0]), "--format", "parquet", "--out", str(out)])
    assert result.exit_code == 2, result.output
    flat = " ".join(result.output.split())
    assert "'parquet' extra" in flat and "pyarrow" in flat and "Traceback" not in result.output
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "needle"),
    [(["--format", "xlsx"], "one of csv, parquet"), ([], "not a tokenprobe run folder")],
)
def test_bad_export_input_is_one_clear_line(tmp_path: Path, args: list[str], needle: str):
    empty = tmp_path / "not_a_run"
    empty.mkdir()
    result = runner.invoke(app, ["export", str(empty), "--out", str(tmp_path / "o.csv"), *args])
    assert result.exit_code == 2, result.output
    assert needle in " ".join(result.output.split()) and "Traceback" not in result.output


def test_a_sweep_folder_names_its_points(runs: list[Path], tmp_path: Path):
    sweep = runs[0].parent
    result = runner.invoke(app, ["export", str(sweep), "--out", str(tmp_path / "o.csv")])
    assert result.exit_code == 2
    flat = " ".join(result.output.split())
    assert "is a sweep" in flat and "measured" in flat and "imported" in flat
