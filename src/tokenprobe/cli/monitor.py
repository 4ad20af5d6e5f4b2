"""`tokenprobe monitor`: sample GPUs (NVML) and the host on their own, with a live terminal view.

`--out DIR` writes a run folder as it goes (config.json, telemetry.jsonl) plus `host.jsonl` (one
HostSample per line) and, at the end, `telemetry_notes.json` (gaps and notes). `--prometheus PORT`
serves the GPU gauges and the derived J/token on 127.0.0.1:PORT/metrics; `--run DIR` names a run
folder being written by `tokenprobe bench` whose new records give the token counts. `--json`
prints one summary document at the end instead of the live view. Ctrl+C ends it cleanly.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.live import Live
from rich.table import Table

from tokenprobe.cli.app import app, err_console, guarded, print_json
from tokenprobe.errors import ConfigError
from tokenprobe.records import RunWriter, TelemetrySample, prepare_run_folder
from tokenprobe.telemetry import (
    EnergyMeter,
    Exporter,
    HostLog,
    HostSample,
    RecordsTail,
    Sampler,
    make_sampler,
    write_notes,
)
from tokenprobe.units import MEGA, GiB, now_s, wall_s

REFRESH_S = 0.5


class Monitor:
    """Glue between the sampler thread and the outputs, polled from the main thread."""

    def __init__(self, sampler: Sampler, exporter: Exporter | None, tail: RecordsTail | None):
        self.sampler = sampler
        self.exporter = exporter
        self.tail = tail
        self.meter = EnergyMeter()
        self._seen_gpu = 0
        self._seen_host = 0
        self.latest: dict[int | None, TelemetrySample] = {}
        self.latest_host: HostSample | None = None

    def poll(self) -> None:
        samples, host = self.sampler.snapshot()
        for sample in samples[self._seen_gpu :]:
            self.meter.add(sample)
            self.latest[sample.gpu_index] = sample
        for host_sample in host[self._seen_host :]:
            self.latest_host = host_sample
        self._seen_gpu, self._seen_host = len(samples), len(host)
        if self.tail is not None:
            self.tail.poll()
        if self.exporter is not None:
            self.exporter.update(self.latest.values(), self.latest_host)
            tokens = (
                (self.tail.input_tokens, self.tail.output_tokens) if self.tail else (None, None)
            )
            self.exporter.set_energy(self.meter.energy_j, *tokens)

    def __rich__(self) -> Table:
        table = Table(title="tokenprobe monitor", title_justify="left")
        for column in ("GPU", "power W", "util", "mem util", "mem GiB", "SM MHz", "°C", "throttle"):
            table.add_column(column, justify="right")
        for index, s in sorted(self.latest.items(), key=lambda kv: kv[0] or 0):
            table.add_row(
                str(index),
                _fmt(s.power_w, "{:.1f}"),
                _fmt(s.gpu_util, "{:.0%}"),
                _fmt(s.mem_util, "{:.0%}"),
                _fmt(None if s.mem_used_bytes is None else s.mem_used_bytes / GiB, "{:.1f}"),
                _fmt(None if s.sm_clock_hz is None else s.sm_clock_hz / MEGA, "{:.0f}"),
                _fmt(s.temp_c, "{:.0f}"),
                _fmt(s.throttle_reasons, "{:#x}"),
            )
        host = self.latest_host
        cpu = host.cpu_util if host is not None else None
        table.caption = f"host CPU {_fmt(cpu, '{:.0%}')}  GPU energy {self.meter.energy_j:.0f} J"
        if self.tail is not None and self.tail.output_tokens > 0:
            j_per_token = self.meter.energy_j / self.tail.output_tokens
            table.caption += f"  {j_per_token:.3f} J/output token"
        if not self.latest:
            table.caption += "  (no GPU: host only)"
        return table

    def summary(self) -> dict[str, Any]:
        samples, host = self.sampler.snapshot()
        return {
            "period_s": self.sampler.period_s,
            "gpu_samples": len(samples),
            "host_samples": len(host),
            "gpus": sorted(i for i in self.latest if i is not None),
            "energy_j": self.meter.energy_j,
            "missed_ticks": self.sampler.missed_ticks,
            "gaps": [g.to_dict() for g in self.sampler.gaps],
            "notes": list(self.sampler.notes),
            "output_tokens": self.tail.output_tokens if self.tail else None,
        }


def _fmt(value: float | int | None, pattern: str) -> str:
    return "-" if value is None else pattern.format(value)


def _check(period_s: float, duration_s: float | None, port: int | None) -> None:
    if not period_s > 0:
        raise ConfigError("period-s", period_s, "a positive number of seconds, e.g. 0.1")
    if duration_s is not None and not duration_s > 0:
        raise ConfigError("duration-s", duration_s, "a positive number of seconds")
    if port is not None and not 0 < port < 65536:
        raise ConfigError("prometheus", port, "a TCP port, 1..65535")


def _wait(monitor: Monitor, end_s: float | None, live: Live | None) -> None:
    try:
        while end_s is None or now_s() < end_s:
            remaining = REFRESH_S if end_s is None else min(REFRESH_S, end_s - now_s())
            time.sleep(max(remaining, 0.0))
            monitor.poll()
            if live is not None:
                live.refresh()
    except KeyboardInterrupt:
        err_console.print("monitor: interrupted, stopping")


def run_monitor(
    period_s: float,
    duration_s: float | None,
    out: Path | None,
    port: int | None,
    run_dir: Path | None,
    pid: int | None,
    as_json: bool,
) -> dict[str, Any]:
    _check(period_s, duration_s, port)
    if out is not None:  # a file or unwritable path: refused before sampling starts
        prepare_run_folder(out, overwrite=True)
    if run_dir is not None and run_dir.exists() and not run_dir.is_dir():
        raise ConfigError("run", str(run_dir), "is not a folder (the run folder being written)")
    config = {"command": "monitor", "period_s": period_s, "pid": pid}
    writer = RunWriter(out, "measured", config, wall_s()) if out is not None else None
    on_sample = writer.add_telemetry if writer is not None else None
    host_log = HostLog(out) if out is not None else None
    sampler = make_sampler(period_s, pid=pid, on_sample=on_sample, on_host_sample=host_log)
    sampler.t0_s = t0 = now_s()  # after NVML and psutil are open: the first tick is at 0
    exporter = Exporter() if port is not None else None
    monitor = Monitor(sampler, exporter, RecordsTail(run_dir) if run_dir is not None else None)
    try:
        if exporter is not None and port is not None:
            exporter.serve(port)
        sampler.start()
        end_s = None if duration_s is None else t0 + duration_s
        if as_json:
            _wait(monitor, end_s, None)
        else:
            with Live(monitor, console=err_console, auto_refresh=False) as live:
                _wait(monitor, end_s, live)
    finally:
        sampler.stop()
        monitor.poll()
        if exporter is not None:
            exporter.close()
        if host_log is not None:
            host_log.close()
        if writer is not None:
            writer.close({"duration_s": now_s() - t0})
    summary = monitor.summary()
    if out is not None:
        write_notes(out, sampler, summary)
    return summary


@app.command("monitor")
def monitor_cmd(
    period_s: Annotated[float, typer.Option(help="Sampling period in seconds")] = 0.1,
    duration_s: Annotated[
        float | None, typer.Option(help="Stop after this many seconds (default: Ctrl+C)")
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Write a run folder here as it goes")] = None,
    prometheus: Annotated[int | None, typer.Option(help="Serve /metrics on 127.0.0.1:PORT")] = None,
    run: Annotated[
        Path | None, typer.Option(help="Run folder being written: its tokens give J/token")
    ] = None,
    pid: Annotated[int | None, typer.Option(help="Also sample this process's CPU")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a JSON summary at the end")
    ] = False,
) -> None:
    """Sample GPU power, utilization, memory, clocks, temperature, PCIe and the host, live."""
    summary = guarded(lambda: run_monitor(period_s, duration_s, out, prometheus, run, pid, as_json))
    if as_json:
        print_json(summary)
    else:
        for note in summary["notes"]:
            err_console.print(f"note: {note}", highlight=False)
        err_console.print(
            f"{summary['gpu_samples']} GPU and {summary['host_samples']} host samples, "
            f"{summary['energy_j']:.1f} J" + (f", written to {out}" if out else "")
        )
