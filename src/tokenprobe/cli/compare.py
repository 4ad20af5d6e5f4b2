"""`tokenprobe compare`: several estimates side by side (GPUs, dtypes, TP degrees), in the
terminal and, with --out, as an HTML report."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from tokenprobe.cli.app import app, guarded, print_json
from tokenprobe.cli.deployment_options import (
    InputTokensOption,
    OutputTokensOption,
)
from tokenprobe.cli.render import print_side_by_side, prose
from tokenprobe.errors import ConfigError
from tokenprobe.units import fmt_s


def _split(text: str, field: str) -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise ConfigError(field, text, "a comma-separated list, e.g. h100-sxm,h200")
    return items


def _ints(text: str, field: str) -> list[int]:
    try:
        return [int(x) for x in _split(text, field)]
    except ValueError:
        raise ConfigError(field, text, "comma-separated integers, e.g. 1,2,4") from None


def _label(combo: dict[str, Any], varying: list[str]) -> str:
    parts = [f"{k}={combo[k]}" if k in ("tp", "batch") else str(combo[k]) for k in varying]
    return " ".join(parts) or str(combo["gpu"])


def _combos(axes: dict[str, list[Any]]) -> list[dict[str, Any]]:
    keys = list(axes)
    return [dict(zip(keys, values, strict=True)) for values in itertools.product(*axes.values())]


def _side_by_side(rows: list[dict[str, Any]]) -> None:
    fits = [bool(r["fits"]) for r in rows]
    lines: list[tuple[str, Any]] = [
        ("TTFT", lambda r: fmt_s(r["ttft_s"])),
        ("TPOT", lambda r: fmt_s(r["tpot_s"])),
        ("E2E", lambda r: fmt_s(r["e2e_s"])),
        ("output tokens/s", lambda r: f"{r['output_tokens_per_s']:,.1f}"),
        ("J per output token", lambda r: f"{r['joules_per_output_token']:.4g}"),
        ("kWh per M output tokens", lambda r: f"{r['kwh_per_million_output_tokens']:.4g}"),
        ("max concurrent requests", lambda r: f"{r['max_concurrent_requests']:,}"),
    ]
    cells = [
        (name, [fmt(r) if ok else "-" for r, ok in zip(rows, fits, strict=True)])
        for name, fmt in lines
    ]
    cells.append(("fits", [Text("yes") if ok else Text("no", "red") for ok in fits]))
    print_side_by_side("Side by side", [r["label"] for r in rows], cells)
    for r in rows:
        if not r["fits"]:
            prose(f"{r['label']} does not fit: {r['reason']}", markup=False)


def _compare_runs(run_dirs: list[Path], out: Path | None, json_out: bool) -> None:
    from tokenprobe.metrics import summarize
    from tokenprobe.records import Run, read_run, read_summary
    from tokenprobe.report import run_compare_rows, run_compare_sections, write_report

    def load() -> list[tuple[str, Run, dict[str, Any]]]:
        if len(run_dirs) < 2:
            raise ConfigError("runs", len(run_dirs), "two or more run folders to compare")
        named = []
        for d in run_dirs:
            run = read_run(d)
            named.append((d.name, run, read_summary(d) or summarize(run)))
        return named

    named = guarded(load)
    if json_out:
        print_json({"runs": {name: summary for name, _, summary in named}})
    else:
        header, rows = run_compare_rows([(name, summary) for name, _, summary in named])
        lines = [(str(row[0]), [str(c) for c in row[1:]]) for row in rows]
        print_side_by_side("Runs side by side", [str(h) for h in header[1:]], lines)
    if out is not None:
        path = write_report(out, run_compare_sections(named), "tokenprobe compare (runs)")
        if not json_out:
            prose(f"wrote {path}", markup=False)


@app.command("compare")
def compare_cmd(
    runs: Annotated[
        list[Path] | None, typer.Argument(help="Run folders to compare (instead of estimates)")
    ] = None,
    model: Annotated[str, typer.Option(help="Catalog name(s), comma-separated")] = "llama-3.1-8b",
    gpus: Annotated[str, typer.Option("--gpu", help="GPU name(s), comma-separated")] = "h100-sxm",
    weight_dtypes: Annotated[
        str, typer.Option("--weight-dtype", help="Weight dtype(s), comma-separated")
    ] = "bf16",
    kv_dtypes: Annotated[
        str | None, typer.Option("--kv-dtype", help="KV dtype(s), comma-separated")
    ] = None,
    tp: Annotated[str, typer.Option(help="Tensor-parallel degrees, comma-separated")] = "1",
    batch: Annotated[str, typer.Option(help="Batch sizes, comma-separated")] = "1",
    input_tokens: InputTokensOption = 1024,
    output_tokens: OutputTokensOption = 256,
    out: Annotated[Path | None, typer.Option(help="Also write an HTML report here")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON rows only")] = False,
) -> None:
    """Compare estimates (every combination of the comma-separated lists) or run folders, side
    by side."""
    if runs:
        _compare_runs(runs, out, json_out)
        return
    from tokenprobe.cost import estimate
    from tokenprobe.report import compare_row, compare_sections, write_report

    def build() -> list[tuple[str, dict[str, Any]]]:
        axes: dict[str, list[Any]] = {
            "model": _split(model, "model"),
            "gpu": _split(gpus, "gpu"),
            "weight_dtype": _split(weight_dtypes, "weight_dtype"),
            "kv_dtype": _split(kv_dtypes, "kv_dtype") if kv_dtypes else [None],
            "tp": _ints(tp, "tp"),
            "batch": _ints(batch, "batch"),
        }
        combos = _combos(axes)
        if len(combos) < 2:
            raise ConfigError("compare", "1 configuration", "give two or more values to compare")
        varying = [k for k, v in axes.items() if len(v) > 1]
        return [
            (
                _label(c, varying),
                estimate(
                    c["model"],
                    c["gpu"],
                    input_tokens=input_tokens,
                    output_tokens=output_tokens,
                    **{k: c[k] for k in ("weight_dtype", "kv_dtype", "tp", "batch")},
                ).to_dict(),
            )
            for c in combos
        ]

    labelled = guarded(build)
    rows = [compare_row(label, est) for label, est in labelled]
    if json_out:
        print_json({"rows": rows})
    else:
        _side_by_side(rows)
    if out is not None:
        path = write_report(out, compare_sections(labelled), "tokenprobe compare")
        if not json_out:
            prose(f"wrote {path}", markup=False)
