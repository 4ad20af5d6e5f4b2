"""The run folder on disk: append-only writer, whole-run writer, tolerant reader."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any, TypeVar

from tokenprobe.errors import SchemaError
from tokenprobe.records.types import (
    RUN_KINDS,
    HostSample,
    RequestRecord,
    Run,
    RunKind,
    ServerSample,
    TelemetrySample,
    TimelinePoint,
)

_T = TypeVar("_T")

FORMAT_NAME = "tokenprobe-run"
FORMAT_VERSION = 1

CONFIG_FILE = "config.json"
RECORDS_FILE = "records.jsonl"
TELEMETRY_FILE = "telemetry.jsonl"
TIMELINE_FILE = "timeline.jsonl"
HOST_FILE = "host.jsonl"
SERVER_FILE = "server_metrics.jsonl"
NOTES_FILE = "telemetry_notes.json"
SUMMARY_FILE = "summary.json"


def _dumps(obj: Mapping[str, Any]) -> str:
    """One compact JSON line; NaN/inf are refused because they are not JSON."""
    return json.dumps(obj, separators=(",", ":"), allow_nan=False)


def _write_json(path: Path, obj: Mapping[str, Any]) -> None:
    path.write_text(json.dumps(obj, indent=2, allow_nan=False) + "\n", encoding="utf-8")


def _config_doc(run_kind: str, config: Mapping[str, Any], wall_start_s: float) -> dict[str, Any]:
    return {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "kind": run_kind,
        "wall_start_s": wall_start_s,
        "config": dict(config),
    }


# ---------------------------------------------------------------- writing


class RunWriter:
    """Append-only writer of a run folder, for runs that are still going.

    config.json is written at construction; `add_record` / `add_telemetry` / `add_timeline` /
    `add_host` / `add_server` append one JSON line each and flush it, so a killed process keeps
    every finished request (host.jsonl and server_metrics.jsonl are created at their first line;
    `add_*` may be called from another thread than the records', one line is written at a time);
    `close(summary)` writes summary.json. The summary comes from the caller
    (`tokenprobe.metrics.summarize`), because records sit below metrics in the layering.
    Use as a context manager to close the files even on error (summary.json is then not written).
    """

    def __init__(
        self,
        directory: str | Path,
        kind: RunKind,
        config: Mapping[str, Any],
        wall_start_s: float,
    ) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        _write_json(self.directory / CONFIG_FILE, _config_doc(kind, config, wall_start_s))
        self._files: dict[str, IO[str]] = {}
        self._lock = threading.Lock()
        self._closed = False
        for name in (RECORDS_FILE, TELEMETRY_FILE, TIMELINE_FILE):
            self._files[name] = (self.directory / name).open("w", encoding="utf-8")

    def _append(self, name: str, obj: Mapping[str, Any]) -> bool:
        """Write one line; False (nothing written) once the writer is closed, so a sampler
        thread that outlives the run drops its late samples instead of failing."""
        line = _dumps(obj) + "\n"
        with self._lock:
            if self._closed:
                return False
            handle = self._files.get(name)
            if handle is None:  # the optional files appear with their first line
                handle = self._files[name] = (self.directory / name).open("w", encoding="utf-8")
            handle.write(line)
            handle.flush()
            return True

    def add_record(self, record: RequestRecord) -> None:
        if not self._append(RECORDS_FILE, record.to_dict()):
            raise ValueError("I/O operation on a closed RunWriter")

    def add_telemetry(self, sample: TelemetrySample) -> bool:
        return self._append(TELEMETRY_FILE, sample.to_dict())

    def add_timeline(self, point: TimelinePoint) -> None:
        self._append(TIMELINE_FILE, point.to_dict())

    def add_host(self, sample: HostSample) -> bool:
        return self._append(HOST_FILE, sample.to_dict())

    def add_server(self, sample: ServerSample) -> bool:
        return self._append(SERVER_FILE, sample.to_dict())

    def write_notes(self, notes: Mapping[str, Any]) -> None:
        """telemetry_notes.json: the sampler's period, missed ticks, gaps and notes."""
        _write_json(self.directory / NOTES_FILE, notes)

    def close(self, summary: Mapping[str, Any] | None = None) -> None:
        with self._lock:
            self._closed = True
            for handle in self._files.values():
                handle.close()
        if summary is not None:
            _write_json(self.directory / SUMMARY_FILE, summary)

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._closed = True
            for handle in self._files.values():
                if not handle.closed:
                    handle.close()


def write_run(run: Run, directory: str | Path, summary: Mapping[str, Any] | None = None) -> Path:
    """Write a finished run as a run folder; summary.json only when `summary` is given."""
    with RunWriter(directory, run.kind, run.config, run.wall_start_s) as writer:
        for record in run.records:
            writer.add_record(record)
        for sample in run.telemetry:
            writer.add_telemetry(sample)
        for point in run.timeline:
            writer.add_timeline(point)
        for host in run.host:
            writer.add_host(host)
        for server in run.server:
            writer.add_server(server)
        if run.telemetry_notes:
            writer.write_notes(run.telemetry_notes)
        writer.close(summary)
    return Path(directory)


def update_run_folder(
    directory: str | Path, run: Run, summary: Mapping[str, Any] | None = None
) -> Path:
    """Rewrite config.json (from `run.config`), telemetry_notes.json (when `run` has notes) and
    summary.json (when given) of a folder whose lines were written live by a RunWriter."""
    root = Path(directory)
    _write_json(root / CONFIG_FILE, _config_doc(run.kind, run.config, run.wall_start_s))
    if run.telemetry_notes:
        _write_json(root / NOTES_FILE, run.telemetry_notes)
    if summary is not None:
        _write_json(root / SUMMARY_FILE, summary)
    return root


# ---------------------------------------------------------------- reading


def _read_jsonl(
    path: Path, parse: Callable[[Mapping[str, Any], str], _T], warnings: list[str]
) -> list[_T]:
    """Parse every line; a truncated *last* line (no newline, bad JSON) is skipped, with a note."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    out: list[_T] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            is_last = number == len(lines) and not text.endswith("\n")
            if is_last:
                warnings.append(f"{where}: truncated last line skipped (writer killed?)")
                continue
            raise SchemaError(where, f"not valid JSON: {exc.msg}") from None
        out.append(parse(obj, where))
    return out


def _read_config(directory: Path) -> dict[str, Any]:
    path = directory / CONFIG_FILE
    if not path.exists():
        raise SchemaError(str(path), "missing: not a tokenprobe run folder")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise SchemaError(str(path), f"not valid JSON: {exc.msg}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
        raise SchemaError(str(path), f"not a {FORMAT_NAME} config (no format={FORMAT_NAME!r})")
    if doc.get("kind") not in RUN_KINDS:
        raise SchemaError(str(path), f"kind={doc.get('kind')!r} not in {RUN_KINDS}")
    return doc


def read_summary(directory: str | Path) -> dict[str, Any] | None:
    """The summary.json of a run folder, or None when the run was not closed."""
    path = Path(directory) / SUMMARY_FILE
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise SchemaError(str(path), f"not valid JSON: {exc.msg}") from None
    if not isinstance(doc, dict):
        raise SchemaError(str(path), "expected a JSON object")
    return doc


def _read_notes(directory: Path, warnings: list[str]) -> dict[str, Any]:
    """telemetry_notes.json, or {} when absent; an unreadable one is a warning, not an error
    (the notes describe the run, they are not the run)."""
    path = directory / NOTES_FILE
    if not path.exists():
        return {}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        warnings.append(f"{path}: unreadable ({exc}); telemetry notes ignored")
        return {}
    if not isinstance(doc, dict):
        warnings.append(f"{path}: not a JSON object; telemetry notes ignored")
        return {}
    return doc


def read_run(directory: str | Path) -> Run:
    """Read a run folder back into a Run (see the module docstring for what is tolerated)."""
    root = Path(directory)
    doc = _read_config(root)
    warnings: list[str] = []
    records = _read_jsonl(root / RECORDS_FILE, RequestRecord.from_dict, warnings)
    telemetry = _read_jsonl(root / TELEMETRY_FILE, TelemetrySample.from_dict, warnings)
    timeline = _read_jsonl(root / TIMELINE_FILE, TimelinePoint.from_dict, warnings)
    host = _read_jsonl(root / HOST_FILE, HostSample.from_dict, warnings)
    server = _read_jsonl(root / SERVER_FILE, ServerSample.from_dict, warnings)
    notes = _read_notes(root, warnings)
    summary = read_summary(root)
    duration = summary.get("duration_s") if summary else None
    if summary is None:
        warnings.append(f"{root / SUMMARY_FILE}: missing (run not closed)")
    return Run(
        kind=doc["kind"],
        config=dict(doc.get("config") or {}),
        wall_start_s=float(doc.get("wall_start_s") or 0.0),
        records=records,
        telemetry=telemetry,
        timeline=timeline,
        duration_s=float(duration) if isinstance(duration, int | float) else None,
        warnings=warnings,
        host=host,
        server=server,
        telemetry_notes=notes,
    )
