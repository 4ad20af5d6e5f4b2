"""`tokenprobe diagnose RUN_DIR [--predict] [--json]`: what limits the run, with the evidence
and an action per finding; with `--predict`, measured vs predicted TTFT, TPOT and J/token."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from tokenprobe.cli.app import app, console, err_console, guarded, print_json
from tokenprobe.diagnose import diagnose
from tokenprobe.errors import SchemaError
from tokenprobe.records import read_run
from tokenprobe.units import MILLI

SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


def run_diagnosis(run_dir: Path, predict: bool) -> dict[str, Any]:
    if not run_dir.is_dir():
        raise SchemaError(
            str(run_dir), "not a folder: give a run folder (config.json, records.jsonl)"
        )
    run = read_run(run_dir)
    result = diagnose(run, predict=predict).to_dict()
    result["run"] = str(run_dir)
    result["notes"] = [*run.warnings, *result["notes"]]
    return result


def _evidence(evidence: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in evidence.items() if v is not None)


def _render(result: dict[str, Any]) -> None:
    findings = Table(title=f"Findings ({result['run']})", show_lines=True)
    for column in ("severity", "kind", "what", "evidence", "action"):
        findings.add_column(column, overflow="fold")
    for f in result["findings"]:
        style = SEVERITY_STYLE.get(f["severity"], "")
        findings.add_row(
            f"[{style}]{f['severity']}[/]",
            f["kind"],
            f["summary"],
            _evidence(f["evidence"]),
            f["action"],
        )
    if not result["findings"]:
        findings.caption = "no rule fired"
    console.print(findings)
    rules = Table(title="Rules")
    for column in ("rule", "status", "reason"):
        rules.add_column(column, overflow="fold")
    for r in result["rules"]:
        rules.add_row(r["rule"], r["status"], r["reason"])
    console.print(rules)
    comparison = result.get("comparison")
    if comparison:
        _render_comparison(comparison)
    for note in result["notes"]:
        err_console.print(f"note: {note}", highlight=False)


def _fmt(metric: str, value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / MILLI:.2f} ms" if metric.endswith("_s") else f"{value:.4g} J"


def _render_comparison(comparison: dict[str, Any]) -> None:
    table = Table(title="Measured vs predicted " + str(comparison.get("deployment") or ""))
    for column in ("metric", "measured", "predicted", "measured / predicted"):
        table.add_column(column, justify="right" if column != "metric" else "left")
    for row in comparison["rows"]:
        ratio = "-" if row["ratio"] is None else f"{row['ratio']:.2f}"
        m = row["metric"]
        table.add_row(m, _fmt(m, row["measured"]), _fmt(m, row["predicted"]), ratio)
    if comparison.get("load"):
        load = comparison["load"]
        table.caption = (
            f"load from the run: {load['input_tokens']} in, {load['output_tokens']} out, "
            f"{load['batch']} in flight"
        )
    if comparison["rows"]:
        console.print(table)
    for note in comparison.get("notes", []):
        err_console.print(f"note: prediction: {note}", highlight=False)


@app.command("diagnose")
def diagnose_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A run folder (bench, simulate, import)")],
    predict: Annotated[
        bool, typer.Option(help="Also compare with the cost model's prediction")
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON only")] = False,
) -> None:
    """Say what limits a run: bandwidth, compute, KV capacity, CPU, communication, bursts,
    throttling, idle power, loading; each finding with its evidence and an action."""
    result = guarded(lambda: run_diagnosis(run_dir, predict))
    if json_out:
        print_json(result)
    else:
        _render(result)
