"""The ONE record format of simulation and measurement, and the run folder on disk.

Every time is in seconds on one monotonic clock (`tokenprobe.units.now_s` for measurements, the
simulated clock for simulations) *relative to the run's start*; `Run.wall_start_s` is the single
epoch anchor for humans. Metrics, diagnosis and reports never care where a `Run` came from.

Run folder (written by `write_run` or, as the run goes, by `RunWriter`):

    config.json      {"format": "tokenprobe-run", "version": 1, "kind", "wall_start_s", "config"}
    records.jsonl    one RequestRecord per line, appended and flushed as each request ends
    telemetry.jsonl  one TelemetrySample per line
    timeline.jsonl   one TimelinePoint per line (the simulator's server-side timeline)
    host.jsonl       one HostSample per line (CPU per core, RAM, network, server process, RAPL)
    server_metrics.jsonl  one ServerSample per line (the server's own /metrics: queue, KV use)
    telemetry_notes.json  the sampler's period, missed ticks, gaps and notes (NVML missing...)
    summary.json     `tokenprobe.metrics.summarize(run)` (plus anything the writer adds), at close

`RunConfig` (records.runconfig) is config.json's "config" object, typed: what ran, declared once.

`write_records` exports a run's records as CSV or Parquet (`tokenprobe export`; records.export).

host.jsonl, server_metrics.jsonl and telemetry_notes.json exist only for runs that sampled them
(`bench --telemetry`, `monitor`); a folder without them reads back with empty lists.

`read_run` tolerates a truncated last line of a JSONL file (a killed writer): the line is skipped
and a note is put in `Run.warnings`. Any other unreadable line raises `SchemaError` naming the
file and the line number.
"""

from __future__ import annotations

from tokenprobe.records.export import (
    EXPORT_COLUMNS,
    EXPORT_FORMATS,
    pyarrow_module,
    read_csv_records,
    records_csv,
    records_table,
    write_records,
)
from tokenprobe.records.folder import (
    CONFIG_FILE,
    FORMAT_NAME,
    FORMAT_VERSION,
    HOST_FILE,
    NOTES_FILE,
    RECORDS_FILE,
    REDACTED,
    RUN_FILES,
    RUN_MARKERS,
    SERVER_FILE,
    SUMMARY_FILE,
    TELEMETRY_FILE,
    TIMELINE_FILE,
    RunFolderWriteError,
    RunWriter,
    prepare_run_folder,
    read_run,
    read_summary,
    redact,
    replace_telemetry,
    update_run_folder,
    write_run,
)
from tokenprobe.records.runconfig import DeploymentConfig, RunConfig
from tokenprobe.records.types import (
    RUN_KINDS,
    TOKEN_COUNT_SOURCES,
    HostSample,
    RequestRecord,
    Run,
    ServerSample,
    TelemetrySample,
    TimelinePoint,
)

__all__ = [
    "CONFIG_FILE",
    "EXPORT_COLUMNS",
    "EXPORT_FORMATS",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "HOST_FILE",
    "NOTES_FILE",
    "RECORDS_FILE",
    "REDACTED",
    "RUN_FILES",
    "RUN_KINDS",
    "RUN_MARKERS",
    "SERVER_FILE",
    "SUMMARY_FILE",
    "TELEMETRY_FILE",
    "TIMELINE_FILE",
    "TOKEN_COUNT_SOURCES",
    "DeploymentConfig",
    "HostSample",
    "RequestRecord",
    "Run",
    "RunConfig",
    "RunFolderWriteError",
    "RunWriter",
    "ServerSample",
    "TelemetrySample",
    "TimelinePoint",
    "prepare_run_folder",
    "pyarrow_module",
    "read_csv_records",
    "read_run",
    "read_summary",
    "records_csv",
    "records_table",
    "redact",
    "replace_telemetry",
    "update_run_folder",
    "write_records",
    "write_run",
]
