"""`tokenprobe import-telemetry`: the seeds' nvidia-smi logs (with and without header and units)
and a real dcgm-exporter scrape become run folders that `diagnose` and `report` take."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tokenprobe.cli import app
from tokenprobe.records import read_run

DATA = Path(__file__).parent.parent / "data" / "telemetry"
SEED_FIELDS = "timestamp,power.draw,utilization.gpu"  # seed 003's noheader,nounits script
runner = CliRunner()


def _import(tmp_path: Path, name: str, *extra: str) -> tuple[int, str, Path]:
    out = tmp_path / "run"
    result = runner.invoke(
        app, ["import-telemetry", str(DATA / name), "--out", str(out), "--json", *extra]
    )
    return result.exit_code, result.output, out


@pytest.mark.parametrize(
    ("name", "extra", "fmt"),
    [
        ("nvidia_smi_units_header.csv", (), "nvidia-smi"),
        ("nvidia_smi_nounits_header.csv", (), "nvidia-smi"),
        ("nvidia_smi_noheader_nounits.csv", ("--fields", SEED_FIELDS), "nvidia-smi"),
        ("real_public_nvidia_smi_h100_gpuburn.csv", ("--gpu", "h100-sxm"), "nvidia-smi"),
        ("real_public_dcgm_exporter_t4_busy.txt", ("--gpu", "t4"), "dcgm"),
    ],
)
def test_a_log_becomes_a_run_that_diagnose_and_report_take(
    tmp_path: Path, name: str, extra: tuple[str, ...], fmt: str
) -> None:
    code, output, out = _import(tmp_path, name, *extra)
    assert code == 0, output
    summary = json.loads(output)
    run = read_run(out)
    assert summary["format"] == fmt and summary["samples"] == len(run.telemetry) > 0
    assert run.kind == "imported" and run.records == []
    if "--gpu" in extra:
        assert run.config["gpu"] == extra[extra.index("--gpu") + 1]
    power = [s.power_w for s in run.telemetry if s.power_w is not None]
    assert power and all(0 < p < 1000 for p in power)
    diagnosed = runner.invoke(app, ["diagnose", str(out), "--json"])
    assert diagnosed.exit_code == 0, diagnosed.output
    assert json.loads(diagnosed.stdout)["rules"]
    report = runner.invoke(app, ["report", str(out), "--out", str(tmp_path / "r.html")])
    assert report.exit_code == 0, report.output


def test_the_seed_script_log_reads_its_power_column(tmp_path: Path) -> None:
    code, output, out = _import(tmp_path, "nvidia_smi_noheader_nounits.csv", "--fields",
                                SEED_FIELDS)  # fmt: skip
    assert code == 0, output
    first = (DATA / "nvidia_smi_noheader_nounits.csv").read_text().splitlines()[0].split(",")
    run = read_run(out)
    assert run.telemetry[0].power_w == pytest.approx(float(first[1]))
    assert run.telemetry[0].t_s == 0.0 and run.telemetry[1].t_s == pytest.approx(1.001)


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("nvidia_smi_noheader_nounits.csv", "--fields"),  # no header: the columns are asked for
        ("real_public_vllm_v1_metrics_qwen25_05b_idle.txt", "without DCGM"),
    ],
)
def test_what_cannot_be_read_is_one_line_and_exit_2(tmp_path: Path, name: str, needle: str):
    code, output, out = _import(tmp_path, name)
    assert code == 2 and needle in output and "Traceback" not in output
    assert len([line for line in output.splitlines() if line.strip()]) == 1
    assert not (out / "config.json").exists()


def test_an_existing_run_is_kept_unless_overwrite(tmp_path: Path) -> None:
    assert _import(tmp_path, "nvidia_smi_units_header.csv")[0] == 0
    code, output, _ = _import(tmp_path, "nvidia_smi_units_header.csv")
    assert code == 2 and "--overwrite" in output
    assert _import(tmp_path, "nvidia_smi_units_header.csv", "--overwrite")[0] == 0
