"""`tokenprobe import-telemetry`: an nvidia-smi CSV log or a dcgm-exporter scrape as a run folder
that `diagnose` and `report` take (the seeds' own method: nvidia-smi in another terminal).

The format is told from the text: Prometheus exposition (dcgm-exporter's `DCGM_FI_*` series) or
nvidia-smi `--format=csv` output, with or without its header and units. A log without a header
needs `--fields`, the `--query-gpu` list it was recorded with: the columns are never guessed.

`--into RUN` (and `bench --telemetry-file`) joins an nvidia-smi log recorded beside a run to that
run instead: its timestamps (local wall clock, as nvidia-smi prints them, read on this machine's
time zone) are put on the run's clock (seconds since the run's `wall_start_s`), samples more
than `JOIN_MARGIN_S` before the first request or after the last one are left out (counted in a
warning), and the run's other files are kept. A log that does not overlap the run is refused,
saying both time spans (a log from another day or another time zone).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

import typer

from tokenprobe.cli.app import app, console, guarded, print_json
from tokenprobe.cli.deployment_options import (
    JsonOption,
)
from tokenprobe.errors import ConfigError, SchemaError
from tokenprobe.files import read_text
from tokenprobe.hardware import get_gpu
from tokenprobe.records import (
    TELEMETRY_FILE,
    Run,
    prepare_run_folder,
    read_run,
    replace_telemetry,
    update_run_folder,
    write_run,
)
from tokenprobe.telemetry import gpu_samples, parse_nvidia_smi_csv

JOIN_MARGIN_S = 5.0  # an nvidia-smi -l 1 log started just before the run keeps its idle baseline
_DCGM = re.compile(r"^DCGM_FI_[A-Z0-9_]+(\{[^}]*\})?\s+\S+", re.MULTILINE)


_PROMETHEUS = re.compile(r"^# (HELP|TYPE) ", re.MULTILINE)


def detect_format(text: str) -> str:
    """The log's kind: "dcgm" (a Prometheus scrape holding DCGM series), "prometheus" (one
    without: a server's own /metrics) or "nvidia-smi" (CSV)."""
    if _DCGM.search(text):
        return "dcgm"
    return "prometheus" if _PROMETHEUS.search(text) else "nvidia-smi"


def import_telemetry(
    path: Path, fields: str | None, period_s: float | None, gpu: str | None
) -> tuple[Run, str]:
    """The run an imported log makes, and the format it was read as."""
    text = read_text(path)
    config: dict[str, Any] = {"source": "", "file": path.name}
    if gpu is not None:
        get_gpu(gpu)  # an unknown name is refused with the closest known ones
        config["gpu"] = gpu
    kind = detect_format(text)
    if kind == "prometheus":
        raise SchemaError(
            str(path),
            "a Prometheus scrape without DCGM GPU series (a server's /metrics is scraped "
            "beside a run by bench --telemetry)",
        )
    if kind == "dcgm":
        samples = gpu_samples(text, 0.0)
        if not samples:
            raise SchemaError(str(path), "a Prometheus scrape without a readable DCGM GPU series")
        config["source"] = "dcgm-exporter scrape"
        return Run(kind="imported", config=config, telemetry=samples), kind
    try:
        result = parse_nvidia_smi_csv(text, fields, period_s=period_s)
    except SchemaError as exc:
        hint = " (--fields timestamp,power.draw,utilization.gpu,...)" if fields is None else ""
        raise SchemaError(str(path), exc.allowed + hint) from None
    if not result.samples:
        raise SchemaError(str(path), f"no GPU sample in {result.lines_read} lines of CSV")
    config["source"] = "nvidia-smi csv"
    return result.to_run(config), kind


def _span(values: list[float]) -> str:
    return f"{min(values):.1f} to {max(values):.1f} s" if values else "nothing"


def attach_telemetry(
    run_dir: Path,
    path: Path,
    fields: str | None = None,
    period_s: float | None = None,
    overwrite: bool = False,
) -> tuple[Run, int]:
    """Join the nvidia-smi log `path` to the run in `run_dir` on its clock (module docstring);
    (the run as written, samples left out). ConfigError for a run that already has GPU samples
    (unless `overwrite`), SchemaError for a log that is not nvidia-smi CSV or misses the run."""
    from tokenprobe.bench import telemetry_summary  # the load generator: ~0.5 s to import

    run = read_run(run_dir)
    if run.kind == "simulated":
        raise ConfigError(
            "into", str(run_dir), "a measured or imported run (this one is simulated)"
        )
    if run.telemetry and not overwrite:
        raise ConfigError(
            "into",
            str(run_dir),
            f"already has GPU samples ({TELEMETRY_FILE}); pass --overwrite to replace them",
        )
    text = read_text(path)
    if detect_format(text) != "nvidia-smi":
        raise SchemaError(str(path), "not an nvidia-smi CSV log (a scrape has no clock to join)")
    try:
        log = parse_nvidia_smi_csv(text, fields, period_s=period_s, wall_start_s=run.wall_start_s)
    except SchemaError as exc:
        raise SchemaError(str(path), exc.allowed) from None
    if log.wall_start_s != run.wall_start_s or not run.wall_start_s:
        raise SchemaError(str(path), "has no timestamp column to put it on the run's clock")
    times = [t for r in run.records for t in (r.sent_s, r.finish_s) if t is not None]
    if not times:
        raise SchemaError(str(run_dir), "has no request times to join a log to")
    lo, hi = min(times) - JOIN_MARGIN_S, max(times) + JOIN_MARGIN_S
    kept = [s for s in log.samples if lo <= s.t_s <= hi]
    if not kept:
        raise SchemaError(
            str(path),
            f"its samples ({_span([s.t_s for s in log.samples])} on the run's clock) do not "
            f"overlap the run's requests ({_span(times)}); was it recorded beside this run, on "
            "this machine's time zone?",
        )
    left_out = len(log.samples) - len(kept)
    run.telemetry = kept
    run.warnings = [*run.warnings, *log.to_run().warnings]
    if left_out:
        run.warnings.append(f"{path.name}: {left_out} samples outside the run left out")
    run.config = {**run.config, "telemetry_file": path.name}
    replace_telemetry(run_dir, kept)
    # config.json names the log; the summary gains the sampling block and the energy join
    update_run_folder(run_dir, run, telemetry_summary(run))
    return run, left_out


@app.command("import-telemetry")
def import_telemetry_cmd(
    path: Annotated[Path, typer.Argument(help="nvidia-smi CSV log or dcgm-exporter scrape")],
    out: Annotated[
        Path | None, typer.Option(help="Run folder to write (diagnose and report read it)")
    ] = None,
    into: Annotated[
        Path | None,
        typer.Option(help="Join the log to this run instead (on its clock; nvidia-smi CSV)"),
    ] = None,
    fields: Annotated[
        str | None,
        typer.Option(help="The --query-gpu list of a log recorded with csv,noheader"),
    ] = None,
    period_s: Annotated[
        float | None, typer.Option(help="Sampling period (s) of a log without timestamps (-l)")
    ] = None,
    gpu: Annotated[str | None, typer.Option(help="Catalog GPU the log was recorded on")] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace a run already in --out")] = False,
    json_out: JsonOption = False,
) -> None:
    """Import a GPU telemetry log recorded beside a run into a run folder, or join it to the run
    (--into)."""
    if (out is None) == (into is None):
        guarded(lambda: _refuse_out_and_into(out, into))
    if into is not None:
        _into(path, into, fields, period_s, overwrite, json_out)
        return
    assert out is not None

    def work() -> dict[str, Any]:
        prepare_run_folder(out, overwrite)
        run, kind = import_telemetry(path, fields, period_s, gpu)
        write_run(run, out)
        times = [s.t_s for s in run.telemetry]
        return {
            "out": str(out),
            "format": kind,
            "samples": len(run.telemetry),
            "gpus": sorted({s.gpu_index for s in run.telemetry if s.gpu_index is not None}),
            "span_s": max(times) - min(times) if times else 0.0,
            "warnings": run.warnings,
        }

    summary = guarded(work)
    if json_out:
        print_json(summary)
        return
    gpus = ", ".join(map(str, summary["gpus"])) or "one GPU, no index column"
    console.print(
        f"{summary['samples']} samples (GPU {gpus}) over {summary['span_s']:.1f} s "
        f"({summary['format']}) written to {out}; next: tokenprobe diagnose {out}",
        highlight=False,
        soft_wrap=True,
    )
    for warning in summary["warnings"]:
        console.print(f"  {warning}", highlight=False, soft_wrap=True)


def _refuse_out_and_into(out: Path | None, into: Path | None) -> None:
    raise ConfigError("out", out or into, "give --out NEW_RUN or --into EXISTING_RUN, not both")


def _into(
    path: Path,
    into: Path,
    fields: str | None,
    period_s: float | None,
    overwrite: bool,
    json_out: bool,
) -> None:
    run, left_out = guarded(lambda: attach_telemetry(into, path, fields, period_s, overwrite))
    summary = {
        "into": str(into),
        "samples": len(run.telemetry),
        "left_out": left_out,
        "warnings": run.warnings,
    }
    if json_out:
        print_json(summary)
        return
    console.print(
        f"{len(run.telemetry)} GPU samples joined to {into} ({left_out} outside the run left "
        f"out); next: tokenprobe diagnose {into}",
        highlight=False,
        soft_wrap=True,
    )
