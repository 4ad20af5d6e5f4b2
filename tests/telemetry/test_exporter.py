"""The exporter's gauges, its derived J/token, and the Grafana dashboard that reads them."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from tokenprobe.errors import ConfigError
from tokenprobe.records import RECORDS_FILE, RequestRecord, TelemetrySample
from tokenprobe.telemetry.exporter import EnergyMeter, Exporter, RecordsTail
from tokenprobe.telemetry.prometheus_text import gpu_samples, parse_exposition

DASHBOARD = Path(__file__).parents[2] / "dashboards" / "grafana-tokenprobe.json"


def _scrape(exporter: Exporter) -> dict[str, float]:
    text = generate_latest(exporter.registry).decode()
    return {m.name: m.value for m in parse_exposition(text).metrics if not m.labels}


def test_gpu_gauges_round_trip_through_our_own_parser():
    exporter = Exporter()
    sample = TelemetrySample(1.0, 3, power_w=300.5, energy_j=12.0, gpu_util=0.5, temp_c=70.0)
    exporter.update([sample])
    (back,) = gpu_samples(generate_latest(exporter.registry).decode(), t_s=1.0)
    assert back == sample


def test_joules_per_token_is_nan_until_tokens_are_known():
    exporter = Exporter()
    exporter.set_energy(500.0, None, None)
    assert math.isnan(_scrape(exporter)["tokenprobe_joules_per_output_token"])
    exporter.set_energy(500.0, 1000, 250)
    values = _scrape(exporter)
    assert values["tokenprobe_joules_per_output_token"] == pytest.approx(2.0)
    assert values["tokenprobe_output_tokens_per_joule"] == pytest.approx(0.5)


def test_energy_meter_prefers_the_counter_and_falls_back_to_power():
    meter = EnergyMeter()
    meter.add(TelemetrySample(0.0, 0, power_w=100.0, energy_j=1000.0))
    meter.add(TelemetrySample(1.0, 0, power_w=100.0, energy_j=1150.0))  # counter: 150 J
    meter.add(TelemetrySample(0.0, 1, power_w=200.0))
    meter.add(TelemetrySample(2.0, 1, power_w=300.0))  # trapezoid: 500 J
    meter.add(TelemetrySample(3.0, 0, power_w=100.0, energy_j=5.0))  # counter reset: skipped
    assert meter.energy_j == pytest.approx(650.0)


def test_records_tail_counts_only_new_complete_lines(tmp_path):
    path = tmp_path / RECORDS_FILE
    old = RequestRecord("old", 0, 0, 0.1, 1, 999, 999)
    path.write_text(json.dumps(old.to_dict()) + "\n")
    tail = RecordsTail(tmp_path)
    new = json.dumps(RequestRecord("new", 0, 0, 0.1, 1, 10, 20).to_dict())
    with path.open("a") as handle:
        handle.write(new + "\n" + new[:15])  # one whole record, one being written
    tail.poll()
    assert (tail.requests, tail.input_tokens, tail.output_tokens) == (1, 10, 20)
    with path.open("a") as handle:
        handle.write(new[15:] + "\n")
    tail.poll()
    assert (tail.requests, tail.output_tokens) == (2, 40)


def test_port_in_use_is_a_config_error():
    first, second = Exporter(), Exporter()
    first.serve(0)  # any free port
    port = first._server.server_port
    try:
        with pytest.raises(ConfigError, match="prometheus"):
            second.serve(port)
    finally:
        first.close()


def test_dashboard_queries_only_metrics_the_exporter_serves():
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    used = {name for expr in exprs for name in re.findall(r"tokenprobe_\w+", expr)}
    exporter = Exporter()
    served = {m.name for m in exporter.registry.collect()}
    assert used <= served, used - served
    assert {"tokenprobe_gpu_power_watts", "tokenprobe_joules_per_output_token"} <= used
