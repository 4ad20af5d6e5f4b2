"""Trace replay files: (arrival_s, input_tokens, output_tokens) rows from CSV or JSONL."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tokenprobe.errors import SchemaError
from tokenprobe.files import parse_json, read_text
from tokenprobe.workload.arrivals import Arrival
from tokenprobe.workload.checks import MAX_LENGTH_TOKENS, MAX_REQUESTS, MAX_TRACE_BYTES
from tokenprobe.workload.request import RequestSpec

_TRACE_KEYS = ("arrival_s", "input_tokens", "output_tokens")
_TRACE_SUFFIXES_JSON = (".jsonl", ".json", ".ndjson")


def _trace_tokens(value: object, key: str, where: str) -> int:
    """A token count of a trace row: an int (or its text, or an integral float) in range."""
    if isinstance(value, str):
        text = value
        try:
            value = int(text.strip())
        except ValueError:
            raise SchemaError(where, f"{key}={text[:40]!r} is not an integer") from None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise SchemaError(where, f"{key}={value!r} is not an integer")
    if not 1 <= value <= MAX_LENGTH_TOKENS:
        raise SchemaError(where, f"{key}={value}: token counts must be >= 1 and <= 2^24")
    return value


def _trace_time(value: object, where: str) -> float:
    if isinstance(value, str):
        text = value
        try:
            value = float(text)
        except ValueError:
            raise SchemaError(where, f"arrival_s={text[:40]!r} is not a number") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SchemaError(where, f"arrival_s={value!r:.60} is not a number")
    t = float(value) if isinstance(value, float) or abs(value) < 2**1000 else math.inf
    if not (math.isfinite(t) and t >= 0):
        raise SchemaError(where, f"arrival_s={t} must be a finite time >= 0")
    return t


def _trace_row(row: Mapping[str, Any], where: str, index: int) -> RequestSpec:
    missing = [k for k in _TRACE_KEYS if k not in row or row[k] in (None, "")]
    if missing:
        raise SchemaError(where, f"missing {', '.join(missing)}")
    t = _trace_time(row["arrival_s"], where)
    i_len = _trace_tokens(row["input_tokens"], "input_tokens", where)
    o_len = _trace_tokens(row["output_tokens"], "output_tokens", where)
    rid = row.get("request_id")
    return RequestSpec(str(rid)[:200] if rid not in (None, "") else str(index), t, i_len, o_len)


def _jsonl_rows(text: str, path: Path) -> list[tuple[int, Mapping[str, Any]]]:
    rows: list[tuple[int, Mapping[str, Any]]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        obj = parse_json(line, f"{path}:{number}")
        if not isinstance(obj, dict):
            raise SchemaError(f"{path}:{number}", "expected a JSON object")
        rows.append((number, obj))
        if len(rows) > MAX_REQUESTS:
            break
    return rows


def _csv_rows(text: str, path: Path) -> list[tuple[int, Mapping[str, Any]]]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        if reader.fieldnames is None or not set(_TRACE_KEYS) <= set(reader.fieldnames):
            raise SchemaError(f"{path}:1", f"CSV header must name {', '.join(_TRACE_KEYS)}")
        rows: list[tuple[int, Mapping[str, Any]]] = []
        for row in reader:
            rows.append((reader.line_num, row))
            if len(rows) > MAX_REQUESTS:
                break
    except csv.Error as exc:  # e.g. a field over csv's 128 KiB field limit
        raise SchemaError(f"{path}:{reader.line_num}", f"not valid CSV: {exc}") from None
    return rows


def read_trace(path: str | Path) -> Arrival:
    """Replay of a CSV (with a header) or JSONL trace of arrival_s, input_tokens, output_tokens.

    A bad line raises SchemaError naming the file and line number. Rows are sorted by arrival.
    At most `MAX_TRACE_BYTES` are read and `MAX_REQUESTS` rows kept (module docstring).
    """
    p = Path(path)
    text = read_text(p, max_bytes=MAX_TRACE_BYTES)
    json_lines = p.suffix.lower() in _TRACE_SUFFIXES_JSON
    rows = _jsonl_rows(text, p) if json_lines else _csv_rows(text, p)
    if len(rows) > MAX_REQUESTS:
        raise SchemaError(str(p), f"holds more than {MAX_REQUESTS:,} requests; at most that many")
    specs = [_trace_row(row, f"{p}:{number}", i) for i, (number, row) in enumerate(rows)]
    if not specs:
        raise SchemaError(str(p), "the trace holds no request")
    return Arrival("trace", trace=tuple(sorted(specs, key=lambda s: s.arrival_s)))
