"""An nvidia-smi log recorded beside a run, joined to it (`import-telemetry LOG --into RUN`,
`bench --telemetry-file LOG`): its local wall-clock timestamps put on the run's clock, samples
far outside the run left out, records and the rest of the folder kept; logs that cannot be
joined refused with one message (exit 2)."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tokenprobe.cli import app
from tokenprobe.cli.import_telemetry import JOIN_MARGIN_S
from tokenprobe.records import RequestRecord, Run, read_run, read_summary, write_run

runner = CliRunner()
WIDE = {"COLUMNS": "300"}
HEADER = "timestamp, index, power.draw [W], utilization.gpu [%], memory.used [MiB]\n"


def _flat(text: str) -> str:
    return "".join(text.split())


def _log(path: Path, start_epoch_s: float, seconds: range) -> Path:
    """One sample a second at start + k s, in nvidia-smi's local-time format; power = 100 + k."""
    lines = [HEADER]
    for k in seconds:
        stamp = datetime.fromtimestamp(start_epoch_s + k).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
        lines.append(f"{stamp}, 0, {100 + k:.2f} W, 90 %, 40000 MiB\n")
    path.write_text("".join(lines))
    return path


def _measured_run(tmp_path: Path, wall_start_s: float) -> Path:
    """Ten requests sent at 2..11 s of the run, each taking 1 s."""
    records = [
        RequestRecord(f"r{i}", 2.0 + i, 2.0 + i, 2.2 + i, 3.0 + i, 100, 50) for i in range(10)
    ]
    run = Run(kind="measured", config={"model": "m"}, wall_start_s=wall_start_s, records=records)
    return write_run(run, tmp_path / "run", summary={"completed": 10})


def test_a_log_recorded_beside_a_run_is_joined_on_its_clock(tmp_path: Path) -> None:
    """The run starts at T0; the log runs from T0 - 20 s to T0 + 40 s. Requests span 2..12 s
    of the run (sent at 2..11 s, 1 s each), so samples from 2 - 5 = -3 s to 12 + 5 = 17 s are
    kept: 21 of 61."""
    t0 = float(int(time.time()) - 3600)
    run_dir = _measured_run(tmp_path, t0)
    records_before = (run_dir / "records.jsonl").read_bytes()
    log = _log(tmp_path / "gpu.csv", t0, range(-20, 41))
    result = runner.invoke(app, ["import-telemetry", str(log), "--into", str(run_dir), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["samples"] == 21 and doc["left_out"] == 40
    run = read_run(run_dir)
    assert [s.t_s for s in run.telemetry] == pytest.approx(
        [float(k) for k in range(-3, 18)], abs=1e-3
    )
    assert [s.power_w for s in run.telemetry][:2] == pytest.approx([97.0, 98.0])
    assert min(s.t_s for s in run.telemetry) >= -JOIN_MARGIN_S
    assert (run_dir / "records.jsonl").read_bytes() == records_before
    assert run.config["telemetry_file"] == "gpu.csv" and run.config["model"] == "m"
    summary = read_summary(run_dir)
    assert summary is not None and summary["telemetry"]["gpu_samples"] == 21
    assert summary["energy"]["energy_j"] > 0
    assert runner.invoke(app, ["diagnose", str(run_dir)]).exit_code == 0

    again = runner.invoke(app, ["import-telemetry", str(log), "--into", str(run_dir)], env=WIDE)
    assert again.exit_code == 2 and "--overwrite" in _flat(again.output), again.output


@pytest.mark.parametrize(
    ("shift_s", "needle"),
    [(-86_400.0, "donotoverlap"), (7 * 3600.0, "donotoverlap")],  # another day; time zone
)
def test_a_log_that_misses_the_run_is_refused_saying_both_spans(
    tmp_path: Path, shift_s: float, needle: str
) -> None:
    t0 = float(int(time.time()) - 3600)
    run_dir = _measured_run(tmp_path, t0)
    log = _log(tmp_path / "gpu.csv", t0 + shift_s, range(0, 20))
    result = runner.invoke(app, ["import-telemetry", str(log), "--into", str(run_dir)], env=WIDE)
    assert result.exit_code == 2 and needle in _flat(result.output), result.output
    assert "gpu.csv" in result.output and read_run(run_dir).telemetry == []


def test_out_or_into_one_of_them(tmp_path: Path) -> None:
    log = _log(tmp_path / "gpu.csv", time.time(), range(0, 3))
    both = ["import-telemetry", str(log), "--out", str(tmp_path / "a"), "--into", str(tmp_path)]
    for args in (both, ["import-telemetry", str(log)]):
        result = runner.invoke(app, args, env=WIDE)
        assert result.exit_code == 2 and "--into" in result.output, result.output
