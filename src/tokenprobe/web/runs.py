"""The run browser's file access: run names are validated and resolved strictly inside the runs
folder (no "..", no separators, no symlink out), so no request can name any other file."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tokenprobe.errors import ConfigError, TokenprobeError
from tokenprobe.metrics import summarize
from tokenprobe.records import CONFIG_FILE, RECORDS_FILE, read_run, read_summary
from tokenprobe.report import render_html, run_sections

RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class RunNotFoundError(LookupError):
    """No run folder of that (valid) name."""


def run_dir(runs_root: Path, name: str) -> Path:
    """The folder of run `name` under `runs_root`: ConfigError for a name that is not a plain
    folder name, RunNotFoundError when there is no such run."""
    if not RUN_NAME.fullmatch(name) or ".." in name:
        raise ConfigError(
            "run", name, "a run folder name: letters, digits, '.', '_', '-'; no '..' or '/'"
        )
    root = runs_root.resolve()
    path = (root / name).resolve()
    if path.parent != root or not (path / CONFIG_FILE).is_file():
        raise RunNotFoundError(name)
    return path


def _entry(path: Path) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": path.name}
    try:
        summary = read_summary(path) or {}
        config = summary.get("config")
        config = config if isinstance(config, dict) else {}
        entry.update(
            completed=summary.get("completed"),
            failed=summary.get("failed"),
            model=config.get("model"),
            gpu=config.get("gpu"),
            closed=bool(summary),
        )
    except TokenprobeError as exc:
        entry["error"] = str(exc)
    entry["modified_s"] = path.stat().st_mtime
    return entry


def list_runs(runs_root: Path) -> list[dict[str, Any]]:
    """The run folders directly under `runs_root` (newest first), with a few summary numbers."""
    if not runs_root.is_dir():
        return []
    root = runs_root.resolve()
    found = [
        p
        for p in root.iterdir()
        if RUN_NAME.fullmatch(p.name)
        and p.is_dir()
        and p.resolve().parent == root
        and (p / CONFIG_FILE).is_file()
    ]
    return sorted((_entry(p) for p in found), key=lambda e: -e["modified_s"])


_REPORTS: dict[tuple[str, float], str] = {}


def run_report_html(path: Path) -> str:
    """The HTML report of a run folder, cached while its records file is unchanged."""
    records = path / RECORDS_FILE
    key = (str(path), records.stat().st_mtime if records.exists() else 0.0)
    if key not in _REPORTS:
        run = read_run(path)
        summary = read_summary(path) or summarize(run)
        _REPORTS.clear()  # one report is several MB: keep only the latest
        _REPORTS[key] = render_html(f"Run {path.name}", run_sections(run, summary, path.name))
    return _REPORTS[key]
