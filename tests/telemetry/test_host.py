"""Host counters: real psutil on this machine; RAPL from a powercap tree written in tmp_path."""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest

from tokenprobe.telemetry.host import HostReader, RaplReader


def _zone(root, name, label, energy_uj, range_uj=262143328850):
    zone = root / name
    zone.mkdir(parents=True)
    (zone / "name").write_text(label + "\n")
    (zone / "energy_uj").write_text(f"{energy_uj}\n")
    (zone / "max_energy_range_uj").write_text(f"{range_uj}\n")
    return zone


def test_host_reader_reports_this_machine(tmp_path):
    reader = HostReader(pid=os.getpid(), powercap_root=tmp_path)
    sum(i * i for i in range(200_000))  # some CPU for this process to show
    sample = reader.read(t_s=2.0)
    assert sample.t_s == 2.0
    assert len(sample.cpu_util_per_core) == psutil.cpu_count()
    assert all(0.0 <= c <= 1.0 for c in sample.cpu_util_per_core)
    assert 0 < sample.ram_used_bytes < sample.ram_total_bytes
    assert sample.net_recv_bytes >= 0
    assert sample.process_cpu_util is not None and sample.process_cpu_util > 0
    assert sample.rapl_energy_j == {}
    assert any("RAPL: no readable energy_uj" in n for n in reader.notes)
    assert set(sample.to_dict()) >= {"t_s", "cpu_util_per_core", "ram_used_bytes"}


def test_a_process_that_exits_gives_none_and_a_note(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    reader = HostReader(pid=child.pid, powercap_root=tmp_path)
    child.wait()
    sample = reader.read(0.0)
    assert sample.process_cpu_util is None
    assert any(f"process {child.pid}" in n for n in reader.notes)


def test_rapl_energy_is_cumulative_joules_across_a_wraparound(tmp_path):
    package = _zone(tmp_path, "intel-rapl:0", "package-0", 1_000_000, range_uj=10_000_000)
    dram = _zone(tmp_path, "intel-rapl:0:0", "dram", 500)
    rapl = RaplReader(tmp_path)
    assert rapl.zones == ["package-0:0", "dram:0:0"]
    (package / "energy_uj").write_text("9000000\n")  # +8 J
    (dram / "energy_uj").write_text("2500500\n")  # +2.5 J
    assert rapl.read() == pytest.approx({"package-0:0": 8.0, "dram:0:0": 2.5})
    (package / "energy_uj").write_text("1000000\n")  # wrapped: 10 000 001 - 8 000 000 µJ
    assert rapl.read()["package-0:0"] == pytest.approx(8.0 + 2.000001)


def test_unreadable_rapl_zone_is_left_out(tmp_path):
    zone = _zone(tmp_path, "intel-rapl:0", "package-0", 10)
    (zone / "energy_uj").write_text("not a number\n")
    rapl = RaplReader(tmp_path)
    assert rapl.zones == []
    assert rapl.read() == {}
