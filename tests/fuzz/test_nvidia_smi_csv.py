"""nvidia-smi CSV logs (telemetry.read_nvidia_smi_csv / parse_nvidia_smi_csv): samples whose
every figure is a finite reading >= 0, or ConfigError; bad cells are counted, never fatal."""

from __future__ import annotations

import math
from dataclasses import fields
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenprobe.records import TelemetrySample
from tokenprobe.telemetry import CsvImport, parse_nvidia_smi_csv, read_nvidia_smi_csv

from .conftest import (
    FUZZ,
    NOT_FILE_KINDS,
    assert_schema_error_naming,
    file_contents,
    not_a_file,
    parse_or_config_error,
)

DATA = Path(__file__).parents[1] / "data" / "telemetry"
EXAMPLE = (DATA / "nvidia_smi_units_header.csv").read_text()
HEADER, *LINES = EXAMPLE.splitlines()
HOSTILE_CELLS = [
    *("[N/A]", "inf", "-inf", "nan", "1e999", "-5 W", "garbage", "", "0x", "0x1" + "0" * 30),
    *("9" * 5000, "12 parsecs", "\x00", "2024/13/45 99:99:99", "0001/01/01 00:00:00"),
]


def _check(result: CsvImport | None) -> None:
    if result is None:
        return
    for sample in result.samples:
        assert math.isfinite(sample.t_s)
        for f in fields(TelemetrySample):
            value = getattr(sample, f.name)
            if value is not None and f.name != "t_s":
                assert math.isfinite(value) and value >= 0, (f.name, value)
    assert result.lines_read == len(result.samples) + result.skipped_lines  # each line counted


@st.composite
def hostile_logs(draw: st.DrawFn) -> str:
    lines = [HEADER, *LINES]
    for _ in range(draw(st.integers(min_value=1, max_value=5))):
        i = draw(st.integers(min_value=1, max_value=len(lines) - 1))
        cells = lines[i].split(",")
        j = draw(st.integers(min_value=0, max_value=len(cells) - 1))
        cells[j] = draw(st.one_of(st.sampled_from(HOSTILE_CELLS), st.text(max_size=8)))
        lines[i] = ",".join(cells)
    return "\n".join(lines) + "\n"


@FUZZ
@given(text=hostile_logs())
def test_hostile_cells_are_counted_not_fatal(text: str) -> None:
    result = parse_nvidia_smi_csv(text)  # a header is there: this must never raise
    _check(result)


@FUZZ
@given(data=file_contents(EXAMPLE.encode()), period=st.sampled_from([None, 1.0]))
def test_random_and_mutated_bytes(tmp_path: Path, data: bytes, period: float | None) -> None:
    path = tmp_path / "smi.csv"
    path.write_bytes(data)
    _check(parse_or_config_error(read_nvidia_smi_csv, path, period_s=period))


@FUZZ
@given(
    period=st.sampled_from([math.nan, math.inf, -1.0, 0.0]),
    wall=st.sampled_from([None, math.nan, math.inf]),
)
def test_hostile_arguments_are_config_errors(period: float, wall: float | None) -> None:
    text = "\n".join(EXAMPLE.splitlines()[1:3])
    fields_ = [c.split(" [")[0] for c in HEADER.split(", ")]
    assert (
        parse_or_config_error(
            parse_nvidia_smi_csv, text, fields_, period_s=period, wall_start_s=wall
        )
        is None
    )


def test_na_cell_is_missing_and_inf_cell_is_a_bad_value() -> None:
    line = LINES[0].split(",")
    line[2], line[6] = " [N/A]", " inf"  # power.draw, temperature.gpu
    result = parse_nvidia_smi_csv(f"{HEADER}\n{','.join(line)}\n")
    assert result.samples[0].power_w is None and result.missing["power_w"] == 1
    assert result.samples[0].temp_c is None and result.bad_values["temp_c"] == 1
    assert result.samples[0].sm_clock_hz == 1410e6  # the rest of the line is kept


@pytest.mark.parametrize("kind", NOT_FILE_KINDS)
def test_paths_that_are_not_files(tmp_path: Path, kind: str) -> None:
    path = not_a_file(tmp_path, kind, "smi.csv")
    assert_schema_error_naming(lambda: read_nvidia_smi_csv(path, period_s=1.0), path)
