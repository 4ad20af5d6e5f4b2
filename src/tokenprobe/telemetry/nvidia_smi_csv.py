"""Import `nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits] -l 1` logs (seeds 000, 003).

Accepted, all in one parser:
- with a header line (`timestamp, power.draw [W], utilization.gpu [%], ...`) or without one, when
  the caller passes the `--query-gpu` field list;
- with units in the cells (`250.00 W`, `45 %`, `1234 MiB`, `1410 MHz`) or without (`nounits`);
  a cell's own unit wins over the header's;
- `[N/A]`, `[Not Supported]`, `[Unknown Error]`, `[GPU is lost]` and empty cells: the field is None
  and the line is counted in `CsvImport.missing` for that field, unless another column for the
  same field (below) had a value on that line;
- seed 003's hand-written header `timestamp,power_w,gpu_util` (its script's own names);
- several columns for one quantity (a full `--query-gpu` list has `power.draw`,
  `power.draw.average` and `power.draw.instant`): the first of them, in header order, that has a
  value wins, so `power.draw` is not overwritten by the instantaneous reading after it, except
  that `enforced.power.limit` (the ceiling the power controller applies: the lowest of all
  limiters) wins over `power.limit` (the limit set by software such as `nvidia-smi -pl`), which
  comes before it in nvidia-smi's field order;
- repeated headers (concatenated logs) are skipped; a line with the wrong number of cells, or an
  unreadable timestamp, is skipped and counted in `skipped_lines` with the first few reasons kept;
- a cell that is not a number nvidia-smi could print (garbage, `inf`, `nan`, `1e999`, a negative
  reading, an unknown unit, a bit mask or GPU index out of range) is left out of its sample and
  counted in `CsvImport.bad_values` for that field: the sample keeps its other fields, as for a
  missing cell (the convention of measurement logs here: a bad reading is a gap, not an error).

The file is read by `tokenprobe.files` (a folder, FIFO, binary or non-UTF-8 file is a
SchemaError naming it).

Times: nvidia-smi prints local wall-clock `YYYY/MM/DD HH:MM:SS.mmm`; `t_s` is seconds since the
first line's timestamp (or since `wall_start_s`, when given, as an epoch in the same local time),
and `wall_start_s` of the result is the epoch of that origin. Without a timestamp column, line k of
a GPU gets `t_s = k * period_s` (`period_s` is then required: `-l 1` means 1.0).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from tokenprobe.errors import ConfigError, SchemaError
from tokenprobe.files import finite, read_text
from tokenprobe.records import Run, TelemetrySample
from tokenprobe.units import GIGA, KILO, MEGA, GiB, KiB, MiB

MISSING_CELLS = frozenset(
    {
        "",
        "n/a",
        "[n/a]",
        "[not supported]",
        "[unknown error]",
        "[gpu is lost]",
        "[insufficient permissions]",
    }
)
MAX_REASONS = 10
MAX_GPU_INDEX = 4096
MAX_BIT_MASK = 2**64 - 1

# nvidia-smi field (and aliases) -> TelemetrySample field
FIELDS: dict[str, str] = {
    "index": "gpu_index",
    "power.draw": "power_w",
    "power.draw.average": "power_w",
    "power.draw.instant": "power_w",
    "utilization.gpu": "gpu_util",
    "utilization.memory": "mem_util",
    "memory.used": "mem_used_bytes",
    "temperature.gpu": "temp_c",
    "clocks.sm": "sm_clock_hz",
    "clocks.current.sm": "sm_clock_hz",
    "clocks.mem": "mem_clock_hz",
    "clocks.current.memory": "mem_clock_hz",
    "clocks_throttle_reasons.active": "throttle_reasons",
    "clocks_event_reasons.active": "throttle_reasons",
    "enforced.power.limit": "power_limit_w",
    "power.limit": "power_limit_w",
    # seed 003's own script writes this header over noheader,nounits output
    "power_w": "power_w",
    "gpu_util": "gpu_util",
}
# Columns whose value replaces one already taken from an earlier column for the same field.
PREFERRED_COLUMNS = frozenset({"enforced.power.limit"})
# The unit nvidia-smi uses for a field when neither the cell nor the header names one.
DEFAULT_UNITS: dict[str, str] = {
    "power_w": "W",
    "power_limit_w": "W",
    "gpu_util": "%",
    "mem_util": "%",
    "mem_used_bytes": "MiB",
    "temp_c": "C",
    "sm_clock_hz": "MHz",
    "mem_clock_hz": "MHz",
}
UNIT_FACTORS: dict[str, float] = {
    "W": 1.0,
    "%": 0.01,
    "B": 1.0,
    "KiB": KiB,
    "MiB": MiB,
    "GiB": GiB,
    "Hz": 1.0,
    "kHz": KILO,
    "MHz": MEGA,
    "GHz": GIGA,
    "C": 1.0,
}
_CELL = re.compile(r"^\s*([-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)\s*([A-Za-z%]*)\s*$")
_HEADER_UNIT = re.compile(r"^(.*?)\s*\[([^\]]*)\]\s*$")
_TIME_FORMATS = ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S", "%Y-%m-%d %H:%M:%S.%f")


@dataclass(slots=True)
class CsvImport:
    """What an import produced, and what it had to leave out."""

    samples: list[TelemetrySample] = field(default_factory=list)
    wall_start_s: float | None = None
    lines_read: int = 0
    skipped_lines: int = 0
    skip_reasons: list[str] = field(default_factory=list)
    missing: Counter[str] = field(default_factory=Counter)  # field -> lines with no value for it
    bad_values: Counter[str] = field(default_factory=Counter)  # field -> unparseable cells
    ignored_columns: list[str] = field(default_factory=list)

    def to_run(self, config: dict[str, Any] | None = None) -> Run:
        """An imported Run holding the samples; what was skipped becomes its warnings."""
        warnings = [f"nvidia-smi csv: {self.skipped_lines} lines skipped", *self.skip_reasons]
        warnings += [
            f"nvidia-smi csv: {n} cells of {f} unreadable" for f, n in self.bad_values.items()
        ]
        return Run(
            kind="imported",
            config=dict(config or {"source": "nvidia-smi csv"}),
            wall_start_s=self.wall_start_s or 0.0,
            telemetry=list(self.samples),
            warnings=warnings if self.skipped_lines or self.bad_values else [],
        )

    def skip(self, line_number: int, reason: str) -> None:
        self.skipped_lines += 1
        if len(self.skip_reasons) < MAX_REASONS:
            self.skip_reasons.append(f"line {line_number}: {reason}")


@dataclass(frozen=True, slots=True)
class _Column:
    name: str  # the nvidia-smi field name as written
    target: str | None  # TelemetrySample field, None when not imported
    unit: str | None  # from the header's [unit]


def _column(raw: str) -> _Column:
    text = raw.strip()
    unit: str | None = None
    match = _HEADER_UNIT.match(text)
    if match:
        text, unit = match.group(1).strip(), match.group(2).strip()
    name = text.lower()
    return _Column(name, FIELDS.get(name) or ("timestamp" if name == "timestamp" else None), unit)


def _is_header(cells: list[str]) -> bool:
    return any(c.strip().lower().split(" [")[0] == "timestamp" for c in cells) or all(
        c.strip().split(" [")[0].lower() in FIELDS for c in cells
    )


def _wall_time(cell: str) -> float | None:
    text = cell.strip()
    for fmt in _TIME_FORMATS:
        try:
            return datetime.strptime(text, fmt).timestamp()
        except (ValueError, OverflowError, OSError):  # not this format, or a year out of range
            continue
    return None


def _value(cell: str, column: _Column) -> float | int:
    """A cell as an SI number; ValueError when it is not one."""
    target = column.target or ""
    if target in ("throttle_reasons", "gpu_index"):
        text = cell.strip()
        if len(text) > 24:  # int() of a long digit string is slow and never a real cell
            raise ValueError("too long")
        number = int(text, 0) if target == "throttle_reasons" else int(text)  # "0x...04"
        if not 0 <= number <= (MAX_BIT_MASK if target == "throttle_reasons" else MAX_GPU_INDEX):
            raise ValueError(f"out of range: {number}")
        return number
    match = _CELL.match(cell)
    if match is None:
        raise ValueError(cell)
    unit = match.group(2) or column.unit or DEFAULT_UNITS.get(target, "")
    if unit not in UNIT_FACTORS:
        raise ValueError(f"unknown unit {unit!r}")
    value = float(match.group(1)) * UNIT_FACTORS[unit]
    if not math.isfinite(value) or value < 0:  # 1e999 parses as inf; no reading is negative
        raise ValueError(f"not a reading: {value}")
    return value


def parse_nvidia_smi_csv(
    text: str,
    fields: str | list[str] | None = None,
    *,
    period_s: float | None = None,
    wall_start_s: float | None = None,
) -> CsvImport:
    """Parse an nvidia-smi CSV log (see the module docstring); never raises for a bad line.

    `fields` is the `--query-gpu` list (comma-separated or a list) for logs without a header;
    a log that has neither raises SchemaError, as does a log without timestamps and `period_s`.
    """
    if period_s is not None:
        period_s = finite("period_s", period_s, lo=0.0, lo_open=True)
    if wall_start_s is not None:
        wall_start_s = finite("wall_start_s", wall_start_s)
    result = CsvImport()
    columns = [_column(f) for f in _split(fields)] if fields else None
    per_gpu_lines: Counter[int | None] = Counter()
    text = text.removeprefix("\ufeff")  # a byte-order mark from Windows redirection
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        cells = raw.split(",")
        if _is_header(cells):
            columns = [_column(c) for c in cells]
            continue
        if columns is None:
            raise SchemaError("nvidia-smi csv", "no header line: pass the --query-gpu field list")
        _check_time_source(columns, period_s)
        result.lines_read += 1
        sample = _parse_line(cells, columns, number, result, per_gpu_lines, period_s)
        if sample is not None:
            result.samples.append(sample)
    result.ignored_columns = [c.name for c in columns or [] if c.target is None]
    has_clock = any(c.target == "timestamp" for c in columns or [])
    _to_run_relative(result, wall_start_s, has_clock)
    return result


def _split(fields: str | list[str]) -> list[str]:
    return fields.split(",") if isinstance(fields, str) else list(fields)


def _check_time_source(columns: list[_Column], period_s: float | None) -> None:
    if all(c.target != "timestamp" for c in columns) and not (period_s and period_s > 0):
        raise ConfigError("period_s", period_s, "needed (e.g. 1.0 for -l 1): no timestamp column")


def _parse_line(
    cells: list[str],
    columns: list[_Column],
    number: int,
    result: CsvImport,
    per_gpu_lines: Counter[int | None],
    period_s: float | None,
) -> TelemetrySample | None:
    if len(cells) != len(columns):
        result.skip(number, f"{len(cells)} cells, expected {len(columns)}")
        return None
    values: dict[str, float | int] = {}
    missing: set[str] = set()  # fields with a missing-value cell on this line
    t_s: float | None = None
    for cell, column in zip(cells, columns, strict=True):
        if column.target == "timestamp":
            t_s = _wall_time(cell)
            if t_s is None:
                result.skip(number, f"unreadable timestamp {cell.strip()!r}")
                return None
        elif column.target is not None and (
            column.target not in values or column.name in PREFERRED_COLUMNS
        ):
            _take(cell, column, values, missing, result)  # an earlier alias with a value wins
    for target in missing - values.keys():  # missing only if no column for it had a value
        result.missing[target] += 1
    gpu = values.get("gpu_index")
    gpu_index = int(gpu) if gpu is not None else None
    if t_s is None:  # no timestamp column: the line's position in its GPU's series
        t_s = per_gpu_lines[gpu_index] * (period_s or 0.0)
    per_gpu_lines[gpu_index] += 1
    values.pop("gpu_index", None)
    return TelemetrySample(t_s=t_s, gpu_index=gpu_index, **values)  # type: ignore[arg-type]


def _take(
    cell: str,
    column: _Column,
    values: dict[str, float | int],
    missing: set[str],
    result: CsvImport,
) -> None:
    assert column.target is not None
    if cell.strip().lower() in MISSING_CELLS:
        missing.add(column.target)
        return
    try:
        values[column.target] = _value(cell, column)
    except ValueError:
        result.bad_values[column.target] += 1


def _to_run_relative(result: CsvImport, wall_start_s: float | None, has_clock: bool) -> None:
    """Timestamps were epochs (or line positions); make them seconds since the origin."""
    if not has_clock or not result.samples:
        result.wall_start_s = wall_start_s
        return
    origin = wall_start_s if wall_start_s is not None else min(s.t_s for s in result.samples)
    result.wall_start_s = origin
    result.samples = [
        TelemetrySample(**{**s.to_dict(), "t_s": s.t_s - origin}) for s in result.samples
    ]


def read_nvidia_smi_csv(
    path: str | Path,
    fields: str | list[str] | None = None,
    *,
    period_s: float | None = None,
    wall_start_s: float | None = None,
) -> CsvImport:
    """`parse_nvidia_smi_csv` over a file; SchemaError when the file cannot be read (module
    docstring), or has no header and no `fields` (then naming the file)."""
    text = read_text(Path(path))
    try:
        return parse_nvidia_smi_csv(text, fields, period_s=period_s, wall_start_s=wall_start_s)
    except SchemaError as exc:
        raise SchemaError(str(path), exc.allowed) from None
