"""A measured run with telemetry: the load generator, the GPU/host sampler and the server's own
`/metrics`, all on one clock, into one Run (requirement M2; issue 5 item 3).

    from tokenprobe.bench import TelemetryConfig, run_measured
    run = run_measured(BenchConfig(...), TelemetryConfig(period_s=0.1))

The sampler and the scraper are opened before the run (NVML and psutil initialise outside the
measurement) and started at the instant the load generator restarts its clock (`on_start` of
`loadgen.run_bench`), with that instant as their `t0_s`: a request's `sent_s`, a GPU sample's and
a server sample's `t_s` are all `units.now_s() - t0_s`. Samples are appended to the run folder as
they are taken (telemetry.jsonl, host.jsonl, server_metrics.jsonl) and stop with the run: those
the writer refused after it closed are dropped from the Run too, so the folder and the Run agree.
At the end config.json gains a "telemetry" block and telemetry_notes.json says what was missing
(NVML absent, a GPU that stopped answering, a /metrics that failed). The run's secrets (API key,
URL credentials) are masked in the notes and in everything written (`records.redact`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Any

from tokenprobe.energy_join import join_energy
from tokenprobe.errors import ConfigError, TokenprobeError
from tokenprobe.hardware import get_gpu
from tokenprobe.loadgen import (
    BenchConfig,
    OnRecord,
    bench_summary,
    mask_url,
    metrics_urls,
    run_bench,
    url_secrets,
)
from tokenprobe.model import get_model
from tokenprobe.records import (
    HostSample,
    Run,
    RunConfig,
    RunWriter,
    ServerSample,
    TelemetrySample,
    redact,
    update_run_folder,
)
from tokenprobe.telemetry import DEFAULT_PERIOD_S, Sampler, ServerScraper, make_sampler, notes_doc


@dataclass(frozen=True, slots=True)
class TelemetryConfig:
    """What to sample beside the load: every `period_s` the GPUs (NVML) and the host (psutil);
    the server's Prometheus text at `server_metrics_url` ("" = do not scrape; None = the
    `/metrics` beside the API URL) every max(period_s, scrape.MIN_PERIOD_S); `server_pid`, when
    given, adds the server process's CPU share (a share of one core). `server_load_s`, when the
    caller knows it (launch to ready, from its orchestrator), is recorded in the run config so
    that `tokenprobe diagnose` reports loading apart from generation. `gpu` and `catalog_model`
    (catalog names: what the server runs on, and the model when the served name is not a catalog
    name or HF id) are recorded so that `diagnose --predict` can price the same deployment."""

    period_s: float = DEFAULT_PERIOD_S
    server_metrics_url: str | None = None
    server_pid: int | None = None
    server_load_s: float | None = None
    gpu: str | None = None
    catalog_model: str | None = None

    def __post_init__(self) -> None:
        if not self.period_s > 0:
            raise ConfigError("telemetry_period_s", self.period_s, "a positive number of seconds")
        if self.server_pid is not None and self.server_pid <= 0:
            raise ConfigError("server_pid", self.server_pid, "a process id (> 0)")
        if self.server_load_s is not None and not self.server_load_s >= 0:
            raise ConfigError("server_load_s", self.server_load_s, "seconds, >= 0")
        if self.gpu is not None:
            get_gpu(self.gpu)  # an unknown name is refused here, with the closest known names
        if self.catalog_model is not None:
            get_model(self.catalog_model)


class _Sink:
    """Where the sampling threads put their samples: the Run's lists and the run folder."""

    def __init__(self) -> None:
        self.run: Run | None = None
        self.writer: RunWriter | None = None
        self._lock = threading.Lock()

    def attach(self, run: Run, writer: RunWriter | None) -> None:
        with self._lock:
            self.run, self.writer = run, writer

    def detach(self) -> None:
        with self._lock:
            self.run = None

    def gpu(self, sample: TelemetrySample) -> None:
        with self._lock:
            if self.run is not None and (self.writer is None or self.writer.add_telemetry(sample)):
                self.run.telemetry.append(sample)

    def host(self, sample: HostSample) -> None:
        with self._lock:
            if self.run is not None and (self.writer is None or self.writer.add_host(sample)):
                self.run.host.append(sample)

    def server(self, sample: ServerSample) -> None:
        with self._lock:
            if self.run is not None and (self.writer is None or self.writer.add_server(sample)):
                self.run.server.append(sample)


def run_measured(
    config: BenchConfig,
    telemetry: TelemetryConfig | None = None,
    on_record: OnRecord | None = None,
) -> Run:
    """`loadgen.run_bench`, plus telemetry on the same clock when `telemetry` is given."""
    if telemetry is None:
        return run_bench(config, on_record)
    url = (
        metrics_urls(config.url)[0]
        if telemetry.server_metrics_url is None
        else telemetry.server_metrics_url
    )
    scraper = ServerScraper(url, telemetry.period_s) if url else None
    sampler = make_sampler(telemetry.period_s, pid=telemetry.server_pid)
    sink = _Sink()

    def on_start(t0_s: float, run: Run, writer: RunWriter | None) -> None:
        sink.attach(run, writer)
        sampler.t0_s = t0_s
        sampler.on_sample, sampler.on_host_sample = sink.gpu, sink.host
        sampler.start()
        if scraper is not None:
            scraper.on_sample = sink.server
            scraper.start(t0_s)

    try:
        run = run_bench(config, on_record, on_start, url_secrets(url))
    finally:
        sink.detach()
        sampler.stop()
        if scraper is not None:
            scraper.stop()
    _finish(run, config, telemetry, sampler, scraper, url)
    return run


def _finish(
    run: Run,
    config: BenchConfig,
    telemetry: TelemetryConfig,
    sampler: Sampler,
    scraper: ServerScraper | None,
    url: str,
) -> None:
    """Notes and the telemetry block into the Run; config, notes and summary into its folder."""
    secrets = (*config.secrets(), *url_secrets(url))
    shown = mask_url(url) if url else None
    notes = notes_doc(sampler)
    notes["server_metrics_url"] = shown
    notes["server_scrape_period_s"] = scraper.period_s if scraper else None
    notes["server_scrape_failures"] = scraper.failures if scraper else 0
    notes["notes"] = [*notes["notes"], *(scraper.notes if scraper else [])]
    run.telemetry_notes = redact(notes, secrets)
    run.config = _with_telemetry(RunConfig.of(run), telemetry, run, shown).to_dict()
    if config.out:
        update_run_folder(config.out, run, telemetry_summary(run), secrets)


def _with_telemetry(
    rc: RunConfig, telemetry: TelemetryConfig, run: Run, shown_url: str | None
) -> RunConfig:
    """The run's config with what the telemetry flags say: the GPU and catalog model that
    price the deployment, the server's load time and the sampling block."""
    deployment = replace(
        rc.deployment,
        gpu=telemetry.gpu or rc.deployment.gpu,
        catalog_model=telemetry.catalog_model or rc.deployment.catalog_model,
    )
    block = {
        "period_s": telemetry.period_s,
        "server_metrics_url": shown_url,
        "server_pid": telemetry.server_pid,
        "gpus": sorted({s.gpu_index for s in run.telemetry if s.gpu_index is not None}),
    }
    extra = {**rc.extra, "telemetry": block}
    if telemetry.server_load_s is not None:
        extra["server_load_s"] = telemetry.server_load_s
    return replace(rc, deployment=deployment, extra=extra)


def telemetry_summary(run: Run) -> dict[str, Any]:
    """`bench_summary` plus what was sampled and, when the GPUs gave power, the energy join."""
    summary = bench_summary(run)
    summary["telemetry"] = {
        "gpu_samples": len(run.telemetry),
        "host_samples": len(run.host),
        "server_samples": len(run.server),
        "server_scrape_errors": sum(1 for s in run.server if s.error is not None),
        "notes": list(run.telemetry_notes.get("notes", [])),
    }
    if any(s.power_w is not None or s.energy_j is not None for s in run.telemetry):
        try:
            summary["energy"] = join_energy(run).to_dict()
        except TokenprobeError as exc:
            summary["telemetry"]["notes"].append(f"energy join skipped: {exc}")
    return summary


__all__ = ["TelemetryConfig", "run_measured", "telemetry_summary"]
