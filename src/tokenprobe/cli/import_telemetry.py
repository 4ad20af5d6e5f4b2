"""`tokenprobe import-telemetry`: an nvidia-smi CSV log or a dcgm-exporter scrape as a run folder
that `diagnose` and `report` take (the seeds' own method: nvidia-smi in another terminal).

The format is told from the text: Prometheus exposition (dcgm-exporter's `DCGM_FI_*` series) or
nvidia-smi `--format=csv` output, with or without its header and units. A log without a header
needs `--fields`, the `--query-gpu` list it was recorded with: the columns are never guessed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

import typer

from tokenprobe.cli.app import app, console, guarded, print_json
from tokenprobe.errors import SchemaError
from tokenprobe.files import read_text
from tokenprobe.hardware import get_gpu
from tokenprobe.records import Run, prepare_run_folder, write_run
from tokenprobe.telemetry import gpu_samples, parse_nvidia_smi_csv

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


@app.command("import-telemetry")
def import_telemetry_cmd(
    path: Annotated[Path, typer.Argument(help="nvidia-smi CSV log or dcgm-exporter scrape")],
    out: Annotated[Path, typer.Option(help="Run folder to write (diagnose and report read it)")],
    fields: Annotated[
        str | None,
        typer.Option(help="The --query-gpu list of a log recorded with csv,noheader"),
    ] = None,
    period_s: Annotated[
        float | None, typer.Option(help="Sampling period (s) of a log without timestamps (-l)")
    ] = None,
    gpu: Annotated[str | None, typer.Option(help="Catalog GPU the log was recorded on")] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace a run already in --out")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON only")] = False,
) -> None:
    """Import a GPU telemetry log recorded beside a run into a run folder."""

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
