"""The run folder on disk: append-only writer, whole-run writer, tolerant reader.

Writing: `prepare_run_folder` refuses a folder that already holds a run (unless told to
overwrite it, and then it removes that run's files first, so nothing old is mixed into the new
run), a path that is a file, and a folder it cannot write in, before anything is measured. Lines
are appended and flushed as they arrive; a write that fails (disk full) raises
`RunFolderWriteError`, and the lines written before it stay on disk. Every writer takes the run's
`secrets` and writes `***` in their place in every string (`redact`).
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, TypeVar

from tokenprobe.errors import ConfigError, SchemaError, TokenprobeError
from tokenprobe.files import names_a_file, parse_json, read_json, read_text
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
RUN_FILES: tuple[str, ...] = (
    CONFIG_FILE,
    RECORDS_FILE,
    TELEMETRY_FILE,
    TIMELINE_FILE,
    HOST_FILE,
    SERVER_FILE,
    NOTES_FILE,
    SUMMARY_FILE,
)
# any of these present means the folder holds a run (the others come and go with telemetry)
RUN_MARKERS: tuple[str, ...] = (CONFIG_FILE, RECORDS_FILE, SUMMARY_FILE)
REDACTED = "***"


class RunFolderWriteError(TokenprobeError):
    """A run folder that could not be written mid-run (disk full, I/O error): a runtime failure;
    the lines written before it are kept."""


def redact(obj: Any, secrets: Sequence[str]) -> Any:
    """`obj` (JSON-ready: dicts, lists, scalars) with each secret replaced by "***" in every
    string, keys included; numbers and the structure are untouched, so the JSON stays valid."""
    if not secrets:
        return obj
    ordered = sorted(set(secrets), key=len, reverse=True)  # a secret inside another one
    return _redact(obj, ordered)


def _redact(obj: Any, secrets: list[str]) -> Any:
    if isinstance(obj, str):
        for secret in secrets:
            if secret in obj:
                obj = obj.replace(secret, REDACTED)
        return obj
    if isinstance(obj, Mapping):
        return {_redact(k, secrets): _redact(v, secrets) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        if obj and all(type(x) is float for x in obj):  # token times: nothing to redact
            return obj
        return [_redact(x, secrets) for x in obj]
    return obj


def prepare_run_folder(directory: str | Path, overwrite: bool = False) -> Path:
    """Check `directory` can take a new run, before anything is measured; ConfigError if not.

    Refused: a path that is a file, a folder that cannot be created or written in, and a folder
    that already holds a run (any of RUN_MARKERS) unless `overwrite`; with `overwrite` that
    run's files (RUN_FILES, nothing else) are removed first, so no old summary, telemetry or
    notes are mixed into the new run.
    """
    root = Path(directory)
    if root.exists() and not root.is_dir():
        raise ConfigError("out", str(root), "is a file, not a folder")
    try:
        root.mkdir(parents=True, exist_ok=True)
        held = [name for name in RUN_MARKERS if (root / name).exists()]
        if held and not overwrite:
            raise ConfigError(
                "out",
                str(root),
                f"already holds a run ({', '.join(held)}); pass --overwrite to replace it, "
                "or choose another folder",
            )
        for name in RUN_FILES if overwrite else ():
            (root / name).unlink(missing_ok=True)
        probe = root / ".tokenprobe-write-check"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ConfigError("out", str(root), f"cannot write there: {_describe(exc)}") from None
    return root


def _describe(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _dumps(obj: Mapping[str, Any]) -> str:
    """One compact JSON line; NaN/inf are refused because they are not JSON."""
    return json.dumps(obj, separators=(",", ":"), allow_nan=False)


def _write_json(path: Path, obj: Mapping[str, Any], secrets: Sequence[str] = ()) -> None:
    text = json.dumps(redact(obj, secrets), indent=2, allow_nan=False) + "\n"
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise RunFolderWriteError(f"cannot write {path}: {_describe(exc)}") from None


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

    `secrets` are replaced by "***" in every string written (`redact`). A folder that cannot be
    created or written raises RunFolderWriteError; after a failed write (disk full) the writer
    is failed: `add_record` raises, the `add_*` of samples return False, the lines written
    before stay on disk.
    """

    def __init__(
        self,
        directory: str | Path,
        kind: RunKind,
        config: Mapping[str, Any],
        wall_start_s: float,
        secrets: Sequence[str] = (),
    ) -> None:
        self.directory = Path(directory)
        self.secrets = tuple(secrets)
        self._files: dict[str, IO[str]] = {}
        self._lock = threading.Lock()
        self._closed = False
        self.failure: RunFolderWriteError | None = None
        self.records_written = 0
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            doc = _config_doc(kind, config, wall_start_s)
            _write_json(self.directory / CONFIG_FILE, doc, self.secrets)
            for name in (RECORDS_FILE, TELEMETRY_FILE, TIMELINE_FILE):
                self._files[name] = (self.directory / name).open("w", encoding="utf-8")
        except OSError as exc:
            self._close_files()
            raise RunFolderWriteError(f"cannot write {self.directory}: {_describe(exc)}") from None

    def _append(self, name: str, obj: Mapping[str, Any]) -> bool:
        """Write one line; False (nothing written) once the writer is closed or failed, so a
        sampler thread that outlives the run drops its late samples instead of failing."""
        line = _dumps(redact(obj, self.secrets)) + "\n"
        with self._lock:
            if self._closed or self.failure is not None:
                return False
            try:
                handle = self._files.get(name)
                if handle is None:  # the optional files appear with their first line
                    path = self.directory / name
                    handle = self._files[name] = path.open("w", encoding="utf-8")
                handle.write(line)
                handle.flush()
            except OSError as exc:
                where = self.directory / name
                self.failure = RunFolderWriteError(f"cannot write {where}: {_describe(exc)}")
                return False
            return True

    def add_record(self, record: RequestRecord) -> None:
        """Append one record (flushed); RunFolderWriteError if it could not be written."""
        if not self._append(RECORDS_FILE, record.to_dict()):
            if self.failure is not None:
                raise self.failure
            raise ValueError("I/O operation on a closed RunWriter")
        self.records_written += 1

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
        _write_json(self.directory / NOTES_FILE, notes, self.secrets)

    def close(self, summary: Mapping[str, Any] | None = None) -> None:
        """Close the files, then write summary.json (RunFolderWriteError if it cannot be)."""
        with self._lock:
            self._closed = True
            self._close_files()
        if summary is not None:
            _write_json(self.directory / SUMMARY_FILE, summary, self.secrets)

    def _close_files(self) -> None:
        for handle in self._files.values():
            # a flush that fails again (disk still full): the lines before it stay
            with contextlib.suppress(OSError):
                handle.close()

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._closed = True
            self._close_files()


def write_run(
    run: Run,
    directory: str | Path,
    summary: Mapping[str, Any] | None = None,
    secrets: Sequence[str] = (),
) -> Path:
    """Write a finished run as a run folder; summary.json only when `summary` is given."""
    with RunWriter(directory, run.kind, run.config, run.wall_start_s, secrets) as writer:
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
    directory: str | Path,
    run: Run,
    summary: Mapping[str, Any] | None = None,
    secrets: Sequence[str] = (),
) -> Path:
    """Rewrite config.json (from `run.config`), telemetry_notes.json (when `run` has notes) and
    summary.json (when given) of a folder whose lines were written live by a RunWriter."""
    root = Path(directory)
    doc = _config_doc(run.kind, run.config, run.wall_start_s)
    _write_json(root / CONFIG_FILE, doc, secrets)
    if run.telemetry_notes:
        _write_json(root / NOTES_FILE, run.telemetry_notes, secrets)
    if summary is not None:
        _write_json(root / SUMMARY_FILE, summary, secrets)
    return root


def replace_telemetry(directory: str | Path, samples: Sequence[TelemetrySample]) -> Path:
    """Write telemetry.jsonl of an existing run folder anew, leaving its other files as they
    are: written to a temporary file first and renamed over the old one, so a failed write
    (disk full) keeps the old file whole."""
    path = Path(directory) / TELEMETRY_FILE
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text("".join(_dumps(s.to_dict()) + "\n" for s in samples), encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise RunFolderWriteError(f"cannot write {path}: {_describe(exc)}") from None
    return path


# ---------------------------------------------------------------- reading
#
# Every file is read by tokenprobe.files: a folder, FIFO, dangling link, binary or non-UTF-8
# file in place of one of a run's files is a SchemaError naming it, never a hang or a traceback.
# JSON's NaN/Infinity are refused by files.parse_json; a number that overflows to inf (1e999)
# and a value of the wrong type by the record types' from_dict (records/types.py).


def _present(path: Path) -> bool:
    """True when something is at `path` (a dangling link too, so that it is reported)."""
    return names_a_file(path)


def _read_jsonl(
    path: Path, parse: Callable[[Mapping[str, Any], str], _T], warnings: list[str]
) -> list[_T]:
    """Parse every line; a truncated *last* line (no newline, bad JSON) is skipped, with a note."""
    if not _present(path):
        return []
    text = read_text(path)
    lines = text.split("\n")
    out: list[_T] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            obj = parse_json(line, where)
        except SchemaError:
            is_last = number == len(lines) and not text.endswith("\n")
            if is_last:
                warnings.append(f"{where}: truncated last line skipped (writer killed?)")
                continue
            raise
        out.append(parse(obj, where))
    return out


def _read_object(path: Path) -> dict[str, Any]:
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise SchemaError(str(path), f"expected a JSON object, got {type(doc).__name__}")
    return doc


def _read_config(directory: Path) -> dict[str, Any]:
    path = directory / CONFIG_FILE
    if not _present(path):
        raise SchemaError(str(path), "missing: not a tokenprobe run folder")
    doc = _read_object(path)
    if doc.get("format") != FORMAT_NAME:
        raise SchemaError(str(path), f"not a {FORMAT_NAME} config (no format={FORMAT_NAME!r})")
    if doc.get("kind") not in RUN_KINDS:
        raise SchemaError(str(path), f"kind={doc.get('kind')!r:.60} not in {RUN_KINDS}")
    if not isinstance(doc.get("config") or {}, dict):
        raise SchemaError(str(path), f"config={doc.get('config')!r:.60} is not a JSON object")
    wall = doc.get("wall_start_s") or 0.0
    if isinstance(wall, bool) or not isinstance(wall, int | float) or not _finite(wall):
        raise SchemaError(str(path), f"wall_start_s={wall!r:.60} is not a finite number")
    return doc


def _finite(value: float) -> bool:
    return (isinstance(value, float) and math.isfinite(value)) or (
        isinstance(value, int) and (abs(value) <= 2**64)
    )


# summary.json entries whose shape readers rely on: {mean, p50, ...} tables of numbers or null
_SUMMARY_TABLES = ("ttft_s", "tpot_s", "itl_s", "e2e_s", "queue_s")


def _check_summary(doc: Mapping[str, Any], path: Path, depth: int = 0) -> None:
    """Every number finite (1e999 parses as inf); the latency tables objects of numbers/null."""
    for key, value in doc.items():
        if depth == 0 and key in _SUMMARY_TABLES and value is not None:
            ok = isinstance(value, dict) and all(
                v is None or (not isinstance(v, bool) and isinstance(v, int | float))
                for v in value.values()
            )
            if not ok:
                raise SchemaError(str(path), f"{key}={value!r:.60} is not a table of numbers")
        if isinstance(value, dict):
            _check_summary(value, path, depth + 1)
        elif isinstance(value, int | float) and not (isinstance(value, bool) or _finite(value)):
            raise SchemaError(str(path), f"{key}={value!r:.60} is not a finite number")
    duration = doc.get("duration_s") if depth == 0 else None
    if duration is not None and not (isinstance(duration, int | float) and duration >= 0):
        raise SchemaError(str(path), f"duration_s={duration!r:.60} is not a time >= 0")


def read_summary(directory: str | Path) -> dict[str, Any] | None:
    """The summary.json of a run folder, or None when the run was not closed."""
    path = Path(directory) / SUMMARY_FILE
    if not _present(path):
        return None
    doc = _read_object(path)
    _check_summary(doc, path)
    return doc


def _read_notes(directory: Path, warnings: list[str]) -> dict[str, Any]:
    """telemetry_notes.json, or {} when absent; an unreadable one is a warning, not an error
    (the notes describe the run, they are not the run)."""
    path = directory / NOTES_FILE
    if not _present(path):
        return {}
    try:
        return _read_object(path)
    except SchemaError as exc:
        warnings.append(f"{path}: unreadable ({exc}); telemetry notes ignored")
        return {}


def read_run(directory: str | Path) -> Run:
    """Read a run folder back into a Run (see the module docstring for what is tolerated).

    SchemaError, naming the file (and line), for a file that cannot be read or a record that is
    not valid: bad JSON, NaN/inf, a wrong type, a negative time or count (records/types.py).
    """
    root = Path(directory)
    if not names_a_file(root):
        raise SchemaError(str(root), "does not exist (give a run folder: config.json, ...)")
    if not root.is_dir():
        raise SchemaError(str(root), "is not a folder (a run folder holds config.json, ...)")
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
