"""A run's records as a table: CSV (standard library) or Parquet (pyarrow, an optional extra).

One row per RequestRecord, in records.jsonl order; the columns are the record's fields, in
declaration order (`EXPORT_COLUMNS`), in the record's SI units (seconds, tokens):
- CSV: an absent value (None) is an empty cell; floats are written with `repr` (the shortest
  text that reads back to the same float); `token_times_s` and `extra` are JSON text.
- Parquet: `token_times_s` is a list<double> column, times and counts are nullable double /
  int64 columns, `extra` (a mapping of numbers and strings, mixed) is JSON text.
`read_csv_records` reads a CSV written here back into RequestRecords (the round trip the tests
hold: rows equal records.jsonl).
"""

from __future__ import annotations

import csv
import importlib
import io
import json
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from tokenprobe.errors import ConfigError
from tokenprobe.records.types import RequestRecord

EXPORT_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(RequestRecord))
EXPORT_FORMATS: tuple[str, ...] = ("csv", "parquet")
JSON_COLUMNS = ("token_times_s", "extra")
FLOAT_COLUMNS = ("scheduled_s", "sent_s", "first_token_s", "finish_s", "queue_s")
INT_COLUMNS = ("input_tokens", "output_tokens")
PARQUET_EXTRA = "parquet"  # pyproject optional-dependencies: pyarrow


def _cell(name: str, value: Any) -> str:
    if value is None:
        return ""
    if name in JSON_COLUMNS:
        return json.dumps(value, separators=(",", ":"))
    if isinstance(value, float):
        return repr(value)
    return str(value)


def records_csv(records: Sequence[RequestRecord]) -> str:
    """The records as CSV text (header row first)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(EXPORT_COLUMNS)
    for record in records:
        row = record.to_dict()
        writer.writerow([_cell(name, row[name]) for name in EXPORT_COLUMNS])
    return buffer.getvalue()


def read_csv_records(text: str) -> list[RequestRecord]:
    """CSV text written by `records_csv` -> the records (SchemaError on a bad row)."""
    rows = csv.DictReader(io.StringIO(text))
    return [RequestRecord.from_dict(_parsed(row), f"csv row {i}") for i, row in enumerate(rows, 2)]


def _parsed(row: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, text in row.items():
        if text == "" and name not in ("request_id",):
            out[name] = [] if name == "token_times_s" else {} if name == "extra" else None
        elif name in JSON_COLUMNS:
            out[name] = json.loads(text)
        elif name in FLOAT_COLUMNS:
            out[name] = float(text)
        elif name in INT_COLUMNS:
            out[name] = int(text)
        else:
            out[name] = text
    return out


def pyarrow_module() -> Any:
    """pyarrow, or ConfigError naming the extra that installs it."""
    try:
        return importlib.import_module("pyarrow")
    except ImportError:
        raise ConfigError(
            "format",
            "parquet",
            # no square brackets: the CLI prints errors with rich markup, which would eat them
            f"needs pyarrow, the '{PARQUET_EXTRA}' extra of tokenprobe (pip install pyarrow); "
            "or use --format csv",
        ) from None


def records_table(records: Sequence[RequestRecord]) -> Any:
    """The records as a pyarrow Table with typed columns (module docstring)."""
    pa = pyarrow_module()
    rows = [r.to_dict() for r in records]
    types = {
        **dict.fromkeys(FLOAT_COLUMNS, pa.float64()),
        **dict.fromkeys(INT_COLUMNS, pa.int64()),
        "token_times_s": pa.list_(pa.float64()),
    }
    columns = {}
    for name in EXPORT_COLUMNS:
        values = [row[name] for row in rows]
        if name == "extra":
            values = [json.dumps(v, separators=(",", ":")) for v in values]
        columns[name] = pa.array(values, type=types.get(name, pa.string()))
    return pa.table(columns)


def write_records(records: Sequence[RequestRecord], path: Path, fmt: str) -> None:
    """Write the records to `path` as `fmt` ("csv" or "parquet")."""
    if fmt not in EXPORT_FORMATS:
        raise ConfigError("format", fmt, f"one of {', '.join(EXPORT_FORMATS)}")
    if fmt == "csv":
        path.write_text(records_csv(records), encoding="utf-8")
        return
    table = records_table(records)
    importlib.import_module("pyarrow.parquet").write_table(table, str(path))
