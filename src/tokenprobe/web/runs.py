"""The run browser's file access, confined to the runs folder.

A run name is a plain folder name (letters, digits, '.', '_', '-'; no "..", no separator), so a
request can only name a folder directly under the runs folder. Before anything of a run is read,
every file a run folder may hold (`RUN_FILES`) is checked: if present, it must be a regular file
whose *resolved* path lies inside the resolved runs folder. A symlink out of the runs folder, a
folder or a FIFO in a file's place, a dangling or looping link make the run unreadable, with
that reason, instead of being followed, read, or blocked on (opening a FIFO blocks until a writer
comes). The files themselves are read by `tokenprobe.records` (read_summary, read_run) and, for
config.json in the list, `tokenprobe.files.read_json`.

What is wrong with a run's files is a SchemaError naming the file: the run list shows it as that
run's `error` (the other runs are listed as usual); a run's own routes answer it as a 400.
The check and the read are two steps, so a local user who swaps a file in between can still
race it; the app serves loopback by default and the runs folder is the user's own.

A sweep (`bench --sweep`) is a folder directly under the runs folder without a config.json
whose sub-folders are run folders, one per load point. Its name opens the sweep's report
(curves and knee); `<sweep>/<point>` opens a point like any run (both parts plain folder names,
the point's real folder directly inside the sweep's real folder, which is directly inside the
runs folder).
"""

from __future__ import annotations

import math
import os
import re
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tokenprobe.errors import ConfigError, SchemaError
from tokenprobe.files import read_json
from tokenprobe.metrics import summarize
from tokenprobe.records import (
    CONFIG_FILE,
    RUN_FILES,
    SUMMARY_FILE,
    read_run,
    read_summary,
)
from tokenprobe.report import (
    load_text,
    make_point,
    point_load,
    render_html,
    run_facts,
    run_sections,
    sweep_point_dirs,
    sweep_sections,
)

RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")

Fingerprint = tuple[tuple[str, int, int], ...]


class RunNotFoundError(LookupError):
    """No run folder of that (valid) name."""


def valid_run_name(name: str) -> bool:
    """A plain folder name: no separator, no "..", not hidden, at most 128 characters."""
    return RUN_NAME.fullmatch(name) is not None and ".." not in name


def _check_names(name: str) -> list[str]:
    """The parts of a run name ("run" or "sweep/point"), each a plain folder name."""
    parts = name.split("/")
    if len(parts) > 2 or not all(valid_run_name(p) for p in parts):
        raise ConfigError(
            "run",
            name,
            "a run folder name (or sweep/point): letters, digits, '.', '_', '-'; no '..'",
        )
    return parts


def _real_dir(parent: Path, part: str, name: str) -> Path:
    """The real folder `parent/part`, which must lie directly in `parent` (RunNotFoundError)."""
    try:
        real = (parent / part).resolve(strict=True)
        is_dir = stat.S_ISDIR(real.stat().st_mode)
    except (OSError, RuntimeError):  # absent, a dangling link, a link loop (RuntimeError < 3.13)
        raise RunNotFoundError(name) from None
    if real.parent != parent or not is_dir:
        raise RunNotFoundError(name)
    return real


def run_dir(runs_root: Path, name: str) -> Path:
    """The folder of run `name` ("run", or "sweep/point" for a sweep's point) under
    `runs_root`: ConfigError for a name that is not made of plain folder names,
    RunNotFoundError when there is no such run (no folder, or no config.json)."""
    parts = _check_names(name)
    real = runs_root.resolve()
    for part in parts:
        real = _real_dir(real, part, name)
    if not os.path.lexists(real / CONFIG_FILE):
        raise RunNotFoundError(name)
    return real


def sweep_dir(runs_root: Path, name: str) -> Path | None:
    """The folder of sweep `name` directly under `runs_root` (no config.json, at least one
    run folder inside), or None when `name` is no sweep; ConfigError for a bad name."""
    parts = _check_names(name)
    if len(parts) != 1:
        return None
    try:
        real = _real_dir(runs_root.resolve(), parts[0], name)
    except RunNotFoundError:
        return None
    if os.path.lexists(real / CONFIG_FILE) or not _point_dirs(real):
        return None
    return real


def _point_dirs(sweep: Path) -> list[Path]:
    """A sweep's point folders: valid names, real folders directly inside it."""
    found = []
    for p in sweep_point_dirs(sweep):
        if not valid_run_name(p.name):
            continue
        try:
            _real_dir(sweep, p.name, p.name)
        except RunNotFoundError:
            continue
        found.append(p)
    return found


def _check_file(root: Path, path: Path) -> tuple[int, int] | None:
    """(mtime_ns, size) of a run file that is a regular file inside `root`; None if absent;
    SchemaError for anything else."""
    if not os.path.lexists(path):
        return None
    try:
        real = path.resolve(strict=True)
        st = real.stat()
    except (OSError, RuntimeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "a link loop"
        raise SchemaError(str(path), f"cannot be read: {why}") from None
    if not real.is_relative_to(root):
        raise SchemaError(str(path), "links outside the runs folder; not read")
    if stat.S_ISDIR(st.st_mode):
        raise SchemaError(str(path), "is a folder, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise SchemaError(str(path), "is not a regular file (a FIFO, socket or device)")
    return st.st_mtime_ns, st.st_size


def check_run_files(root: Path, path: Path) -> Fingerprint:
    """SchemaError unless every file of run folder `path` that exists is a regular file inside
    `root`; returns (name, mtime_ns, size) of each, which changes when any file changes."""
    found = ((name, _check_file(root, path / name)) for name in RUN_FILES)
    return tuple((name, *st) for name, st in found if st is not None)


def check_run(root: Path, path: Path) -> tuple[Fingerprint, dict[str, Any]]:
    """The checks every route makes before reading a run: its files (check_run_files), and its
    config.json, which must be a UTF-8 JSON object (it is small; read with tokenprobe.files, which
    also refuses NaN). Returns the fingerprint and the config document."""
    fingerprint = check_run_files(root, path)
    doc = read_json(path / CONFIG_FILE)
    if not isinstance(doc, dict):
        raise SchemaError(str(path / CONFIG_FILE), "expected a JSON object")
    return fingerprint, doc


# What tokenprobe.records and tokenprobe.report still let out for some bad run files (reported
# to their owners), instead of a SchemaError naming the file: a binary config.json or a
# records.jsonl that is not UTF-8 (UnicodeDecodeError), an unreadable file (OSError), a
# `wall_start_s` or `config` of the wrong type in config.json (ValueError, TypeError), record
# times of 1e308 whose figures are infinite (ValueError from the report's JSON writer), JSON
# nested too deeply (RecursionError).
_RAW_ERRORS = (OSError, ValueError, TypeError, KeyError, ArithmeticError, RecursionError)


@contextmanager
def _reading(path: Path) -> Iterator[None]:
    """Turn a raw error out of reading or rendering run folder `path` into a SchemaError naming
    it, so that a bad file gives the run browser a 400 with the reason, never a 500, whichever
    package is fixed first. SchemaError and other ConfigErrors pass unchanged."""
    try:
        yield
    except ConfigError:
        raise
    except _RAW_ERRORS as exc:
        raise SchemaError(
            str(path), f"cannot be read or shown ({type(exc).__name__}: {exc})"
        ) from None


def _finite_json(doc: Any, source: str) -> None:
    """SchemaError if `doc` holds NaN or ±inf (Python's json reads them; JSON has no such
    numbers, and the app could not send them back). Iterative: depth costs no stack."""
    stack = [doc]
    while stack:
        value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            raise SchemaError(source, f"holds {value!r}, which is not a JSON number")
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)


def _summary(path: Path) -> dict[str, Any] | None:
    """read_summary of a run folder whose files were checked; NaN/inf refused."""
    with _reading(path):
        summary = read_summary(path)
    _finite_json(summary, str(path / SUMMARY_FILE))
    return summary


def load_summary(runs_root: Path, path: Path) -> dict[str, Any] | None:
    """The summary.json of run folder `path` (None when the run was not closed)."""
    check_run(runs_root.resolve(), path)
    return _summary(path)


def _entry(root: Path, path: Path) -> dict[str, Any]:
    """One row of the run list; a run whose files are bad gets `error` (the reason) instead."""
    entry: dict[str, Any] = {"name": path.name}
    try:
        _, doc = check_run(root, path)
        summary = _summary(path) or {}
    except ConfigError as exc:
        entry["error"] = str(exc)
        return entry
    config = doc.get("config") or summary.get("config")
    config = config if isinstance(config, dict) else {}
    entry.update(
        kind=doc.get("kind"),
        completed=summary.get("completed"),
        failed=summary.get("failed"),
        **run_facts(doc.get("kind"), config),
        closed=bool(summary),
    )
    return entry


def _sweep_entry(root: Path, path: Path) -> dict[str, Any]:
    """A sweep's row: the first point's facts, the points' totals and each point's row (named
    "sweep/point")."""
    dirs = _point_dirs(path)
    points = [{**_entry(root, p), "name": f"{path.name}/{p.name}"} for p in dirs]
    first = next((p for p in points if "error" not in p), {})
    loads = [_point_load(root, p) for p in dirs]
    entry: dict[str, Any] = {
        "name": path.name,
        "kind": "sweep",
        **{k: first.get(k, "-") for k in ("model", "gpu", "engine", "server")},
        "load": f"{len(points)} points: {_loads_text(loads)}",
        "completed": sum(p.get("completed") or 0 for p in points),
        "failed": sum(p.get("failed") or 0 for p in points),
        "closed": all(p.get("closed") for p in points),
        "points": points,
    }
    return entry


def _modified_s(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:  # removed while listing
        return 0.0


def _candidates(root: Path) -> list[tuple[Path, bool]]:
    """(folder, is a sweep) for the folders directly under `root` with a valid name and a
    config.json (of any kind), or that are sweeps (run folders inside)."""
    try:
        entries = list(root.iterdir())
    except OSError as exc:
        raise SchemaError(str(root), f"the runs folder cannot be listed: {exc.strerror}") from None
    found = []
    for p in entries:
        if not valid_run_name(p.name):
            continue
        try:
            run_dir(root, p.name)
        except (ConfigError, RunNotFoundError):
            if sweep_dir(root, p.name) is not None:
                found.append((p, True))
            continue
        found.append((p, False))
    return found


def list_runs(runs_root: Path) -> list[dict[str, Any]]:
    """The run folders and sweeps directly under `runs_root` (newest first), with what ran
    (model, GPU, engine, load) and a few summary numbers; a sweep lists its points; an
    unreadable run is listed with `error` saying why."""
    if not runs_root.is_dir():
        return []
    root = runs_root.resolve()
    rows = [
        (_modified_s(p), _sweep_entry(root, p) if sweep else _entry(root, p))
        for p, sweep in _candidates(root)
    ]
    rows.sort(key=lambda row: -row[0])
    return [{**entry, "modified_s": mtime} for mtime, entry in rows]


def _point_load(root: Path, path: Path) -> tuple[str, float] | None:
    """(swept field, value) of a sweep point, None when its config cannot be read."""
    try:
        _, doc = check_run(root, path)
    except ConfigError:
        return None
    config = doc.get("config")
    return point_load(config) if isinstance(config, dict) else None


def _loads_text(loads: list[tuple[str, float] | None]) -> str:
    """ "concurrency 1, 2, 4" (or "rate 0.5, 1 req/s") of a sweep's points."""
    known = sorted(load for load in loads if load is not None)
    if not known:
        return "-"
    values = ", ".join(load_text(v) for _, v in known)
    return f"concurrency {values}" if known[0][0] == "concurrency" else f"rate {values} req/s"


def sweep_summaries(runs_root: Path, path: Path) -> list[dict[str, Any]]:
    """{name, summary} of each point of the sweep folder `path` (summary None: not closed)."""
    root = runs_root.resolve()
    out = []
    for p in _point_dirs(path):
        check_run(root, p)
        out.append({"name": f"{path.name}/{p.name}", "summary": _summary(p)})
    return out


_REPORTS: dict[tuple[str, Fingerprint], str] = {}
_RENDER = threading.Lock()  # one render at a time: each holds a whole run in memory


def run_report_html(runs_root: Path, path: Path) -> str:
    """The HTML report of a run folder, cached while none of its files changes."""
    key = (str(path), check_run(runs_root.resolve(), path)[0])
    with _RENDER:
        if key not in _REPORTS:
            with _reading(path):
                run = read_run(path)
            summary = _summary(path)
            with _reading(path):
                name = path.relative_to(runs_root.resolve()).as_posix()  # sweep/point
                sections = run_sections(run, summary or summarize(run), name)
                html = render_html(f"Run {name}", sections)
            _REPORTS.clear()  # one report is several MB: keep only the latest
            _REPORTS[key] = html
        return _REPORTS[key]


def sweep_report_html(runs_root: Path, path: Path) -> str:
    """The HTML report of a sweep folder: its curves, knee and points (not cached: a sweep's
    points are read from their config.json and summary.json only, which is quick)."""
    root = runs_root.resolve()
    points = []
    for p in _point_dirs(path):
        _, doc = check_run(root, p)
        summary = _summary(p)
        if summary is None:
            with _reading(p):
                summary = summarize(read_run(p))
        config = doc.get("config")
        points.append(
            make_point(
                p.name, str(doc.get("kind")), config if isinstance(config, dict) else {}, summary
            )
        )
    points.sort(key=lambda pt: (pt.load_field, pt.load))
    with _reading(path):
        return render_html(f"Sweep {path.name}", sweep_sections(points, path.name))
