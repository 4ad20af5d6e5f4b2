"""`tokenprobe monitor` end to end: fake NVML (vendor seam), no NVML, a run folder, /metrics."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
import urllib.request

import pytest
from typer.testing import CliRunner

import tokenprobe.cli.monitor  # noqa: F401  registers the command until cli/__init__ imports it
from telemetry.fake_nvml import FakeGpu
from tokenprobe.cli.app import app
from tokenprobe.records import RECORDS_FILE, RequestRecord, read_run
from tokenprobe.telemetry.prometheus_text import gpu_samples, parse_exposition


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_monitor_runs_for_a_duration_and_writes_a_run_fake_nvml(fake_nvml, tmp_path):
    fake_nvml([FakeGpu(), FakeGpu(power_mw=100_000)])
    out = tmp_path / "run"
    args = ["monitor", "--duration-s", "0.5", "--period-s", "0.05", "--out", str(out), "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["gpus"] == [0, 1]
    assert summary["gpu_samples"] % 2 == 0  # both GPUs at every tick
    ticks = summary["gpu_samples"] // 2 + summary["missed_ticks"]  # a busy CI skips ticks
    assert 9 <= ticks <= 12, summary  # 0.5 s / 0.05 s, plus the tick at 0
    assert summary["energy_j"] > 0
    run = read_run(out)
    assert len(run.telemetry) == summary["gpu_samples"]
    assert {s.gpu_index for s in run.telemetry} == {0, 1}
    assert 0.5 <= run.duration_s < 2.0
    assert len((out / "host.jsonl").read_text().splitlines()) == summary["host_samples"]
    assert json.loads((out / "telemetry_notes.json").read_text())["gaps"] == []


def test_monitor_without_nvml_samples_the_host_and_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    result = CliRunner().invoke(app, ["monitor", "--duration-s", "0.3", "--period-s", "0.05"])
    assert result.exit_code == 0, result.output
    assert "NVML unavailable" in result.output
    assert "0 GPU and" in result.output


def test_monitor_rejects_a_bad_period_with_exit_2():
    result = CliRunner().invoke(app, ["monitor", "--period-s", "0", "--duration-s", "1"])
    assert result.exit_code == 2
    assert "period-s" in result.output


def test_prometheus_serves_gpu_metrics_and_joules_per_token_fake_nvml(fake_nvml, tmp_path):
    fake_nvml([FakeGpu()])
    port = _free_port()
    run_dir = tmp_path / "bench"
    run_dir.mkdir()
    records = run_dir / RECORDS_FILE
    records.write_text("")
    args = ["monitor", "--duration-s", "3", "--period-s", "0.05", "--prometheus", str(port)]
    args += ["--run", str(run_dir), "--json"]
    outcome = {}
    thread = threading.Thread(target=lambda: outcome.update(r=CliRunner().invoke(app, args)))
    thread.start()
    try:
        record = RequestRecord("r0", 0.0, 0.0, 0.1, 0.5, 200, 100)
        time.sleep(0.8)
        with records.open("a") as handle:
            handle.write(json.dumps(record.to_dict()) + "\n")
        text = _scrape_until(port, "tokenprobe_run_output_tokens 100.0")
    finally:
        thread.join()
    assert outcome["r"].exit_code == 0, outcome["r"].output
    (gpu0,) = gpu_samples(text, t_s=0.0)  # our own metrics read back by our own parser
    assert gpu0.power_w == pytest.approx(250.0)
    assert gpu0.sm_clock_hz == pytest.approx(1.98e9)
    values = {m.name: m.value for m in parse_exposition(text).metrics}
    energy_j = values["tokenprobe_monitor_energy_joules"]
    assert energy_j > 0
    assert values["tokenprobe_joules_per_output_token"] == pytest.approx(energy_j / 100, rel=0.05)
    assert values["tokenprobe_run_input_tokens"] == 200


def _scrape_until(port: int, wanted: str, timeout_s: float = 2.0) -> str:
    deadline = time.monotonic() + timeout_s
    text = ""
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1) as reply:
                text = reply.read().decode()
        except OSError:
            text = ""
        if wanted in text:
            return text
        time.sleep(0.1)
    raise AssertionError(f"{wanted!r} never appeared; last scrape:\n{text[:2000]}")
