"""`tokenprobe diagnose RUN_DIR [--predict] [--json]`: what limits the run, with the evidence
and an action per finding; with `--predict`, measured vs predicted TTFT, TPOT and J/token, and
measured vs the run replayed through the simulator (`--engine` picks the preset)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from tokenprobe.cli.app import app, err_console, guarded, print_json
from tokenprobe.cli.deployment_options import (
    JsonOption,
)
from tokenprobe.cli.render import Col, print_table
from tokenprobe.diagnose import diagnose
from tokenprobe.errors import ConfigError, SchemaError
from tokenprobe.records import read_run
from tokenprobe.sim import ENGINES
from tokenprobe.units import MILLI

SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


def run_diagnosis(run_dir: Path, predict: bool, engine: str | None = None) -> dict[str, Any]:
    if not run_dir.is_dir():
        raise SchemaError(
            str(run_dir), "not a folder: give a run folder (config.json, records.jsonl)"
        )
    run = read_run(run_dir)
    if engine is not None and engine not in ENGINES:
        raise ConfigError("engine", engine, f"one of {', '.join(ENGINES)}")
    result = diagnose(run, predict=predict, replay_run=predict, engine=engine).to_dict()
    result["run"] = str(run_dir)
    result["notes"] = [*run.warnings, *result["notes"]]
    return result


def _evidence(evidence: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in evidence.items() if v is not None)


FINDING_COLUMNS = (
    Col("finding", kind="name"),
    Col("what"),
    Col("evidence"),
    Col("action"),
)
RULE_COLUMNS = (Col("rule", kind="name"), Col("status", kind="name"), Col("reason"))
COMPARISON_COLUMNS = (
    Col("metric", kind="name"),
    Col("measured", kind="num", justify="right"),
    Col("predicted", kind="num", justify="right"),
    Col("measured / predicted", "ratio", kind="num", justify="right"),
)


def _finding_row(f: dict[str, Any]) -> list[Text | str]:
    # severity and the rule's name head the row: the name is what --json and the docs use
    head = Text(f["severity"], style=SEVERITY_STYLE.get(f["severity"], "")) + " " + f["kind"]
    return [head, f["summary"], _evidence(f["evidence"]), f["action"]]


def _render(result: dict[str, Any]) -> None:
    print_table(
        f"Findings ({result['run']})",
        FINDING_COLUMNS,
        [_finding_row(f) for f in result["findings"]],
        caption="" if result["findings"] else "no rule fired",
    )
    print_table(
        "Rules", RULE_COLUMNS, [[r["rule"], r["status"], r["reason"]] for r in result["rules"]]
    )
    comparison = result.get("comparison")
    if comparison:
        _render_comparison(comparison)
    if result.get("replay"):
        _render_replay(result["replay"])
    for note in result["notes"]:
        err_console.print(f"note: {note}", highlight=False, markup=False)


def _fmt(metric: str, value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / MILLI:.2f} ms" if metric.endswith("_s") else f"{value:.4g} J"


def _render_comparison(comparison: dict[str, Any]) -> None:
    rows = [
        [
            row["metric"],
            _fmt(row["metric"], row["measured"]),
            _fmt(row["metric"], row["predicted"]),
            "-" if row["ratio"] is None else f"{row['ratio']:.2f}",
        ]
        for row in comparison["rows"]
    ]
    caption = ""
    if comparison.get("load"):
        load = comparison["load"]
        caption = (
            f"load from the run: {load['input_tokens']} in, {load['output_tokens']} out, "
            f"{load['batch']} in flight"
        )
    if rows:
        title = "Measured vs predicted " + str(comparison.get("deployment") or "")
        print_table(title.strip(), COMPARISON_COLUMNS, rows, caption=caption)
    for note in comparison.get("notes", []):
        err_console.print(f"note: prediction: {note}", highlight=False, markup=False)


REPLAY_COLUMNS = (
    Col("metric", kind="name"),
    Col("measured", kind="num", justify="right"),
    Col("simulated", kind="num", justify="right"),
    Col("measured / simulated", "ratio", kind="num", justify="right"),
)


def _fmt_replay(metric: str, value: float | None) -> str:
    if value is None:
        return "-"
    if " " in metric:  # a latency percentile: "ttft_s p50"
        return f"{value / MILLI:.3g} ms"
    if metric.startswith("kv_cache"):
        return f"{value:.1%}"
    if metric.startswith("joules"):
        return f"{value:.3g} J"
    return f"{value:,.2f}"  # rates and counts: no exponent for people


def _render_replay(replayed: dict[str, Any]) -> None:
    rows = [
        [
            row["metric"],
            _fmt_replay(row["metric"], row["measured"]),
            _fmt_replay(row["metric"], row["simulated"]),
            "-" if row["ratio"] is None else f"{row['ratio']:.2f}",
        ]
        for row in replayed["rows"]
    ]
    if rows:
        title = f"The run vs its replay in the simulator: {replayed['deployment']}"
        caption = (
            f"{replayed['requests']} requests at their own arrival times and lengths; engine "
            f"preset {replayed['engine']} ({replayed['engine_source']}), profile "
            f"{replayed['profile'] or 'default'}"
        )
        print_table(title, REPLAY_COLUMNS, rows, caption=caption)
    for note in replayed.get("notes", []):
        err_console.print(f"note: {note}", highlight=False, markup=False)  # says "replay"


@app.command("diagnose")
def diagnose_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A run folder (bench, simulate, import)")],
    predict: Annotated[
        bool,
        typer.Option(
            help="Also compare with the cost model's prediction, and replay the run's own "
            "arrivals and lengths through the simulator (measured vs simulated)"
        ),
    ] = False,
    engine: Annotated[
        str | None,
        typer.Option(
            help=f"With --predict: the engine preset of the replay ({', '.join(ENGINES)}; "
            "default: the run config's, else the server's, else vllm)"
        ),
    ] = None,
    json_out: JsonOption = False,
) -> None:
    """Say what limits a run: bandwidth, compute, KV capacity, CPU, communication, bursts,
    throttling, idle power, loading; each finding with its evidence and an action."""
    result = guarded(lambda: run_diagnosis(run_dir, predict, engine))
    if json_out:
        print_json(result)
    else:
        _render(result)
