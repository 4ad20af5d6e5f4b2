"""`tokenprobe calibrate` (fit a profile to measurements) and `tokenprobe profile` (local GPU)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tokenprobe.calibrate import (
    DEFAULT_PARAMETERS,
    Calibration,
    Params,
    ProfileSpec,
    check_parameters,
    gpu_unavailable_reason,
    load_inputs,
    load_profile,
    profile_gpu,
    save_profile,
    write_profile_run,
)
from tokenprobe.calibrate import calibrate as run_calibration
from tokenprobe.cli.app import app, console, guarded, print_json
from tokenprobe.cli.render import Col, print_table, progress, prose
from tokenprobe.errors import ConfigError
from tokenprobe.files import check_out_file
from tokenprobe.hardware import get_gpu
from tokenprobe.model import get_model

ERROR_COLUMNS = (
    Col("set", kind="name"),
    Col("source", kind="name"),
    Col("metric", kind="name"),
    Col("rows", kind="num", justify="right"),
    Col("before", kind="num", justify="right"),
    Col("after", kind="num", justify="right"),
)
PARAM_COLUMNS = (
    Col("parameter", kind="name"),
    Col("start", kind="num", justify="right"),
    Col("fitted", kind="num", justify="right"),
    Col("note"),
)


def _print_errors(cal: Calibration) -> None:
    rows = [
        [
            e.set,
            e.source,
            e.metric,
            str(e.rows),
            f"{e.mdape_before_pct:.1f}%",
            f"{e.mdape_after_pct:.1f}%",
        ]
        for e in cal.errors()
    ]
    print_table(f"calibration of {cal.engine}: MdAPE before -> after", ERROR_COLUMNS, rows)


def _print_params(cal: Calibration) -> None:
    rows = [
        [
            name,
            f"{cal.fit.start.get(name):.4g}",
            f"{value:.4g}",
            "" if name in cal.fit.fitted else "not identifiable",
        ]
        for name, value in cal.fit.values.items()
    ]
    print_table("parameters", PARAM_COLUMNS, rows)


@app.command()
def calibrate(
    inputs: Annotated[list[str], typer.Argument(help="Run folders or validation-schema CSVs")],
    out: Annotated[str, typer.Option(help="Write the fitted profile (TOML) here")] = "",
    holdout: Annotated[
        list[str] | None,
        typer.Option(help="Hold back rows whose source or run matches (glob); repeatable"),
    ] = None,
    engine: Annotated[
        str | None, typer.Option(help="Engine to fit when inputs hold several")
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option(
            help=f"Parameter to fit (repeatable; default all: {', '.join(DEFAULT_PARAMETERS)})"
        ),
    ] = None,
    name: Annotated[str, typer.Option(help="Profile name (default: the engine)")] = "",
    start: Annotated[
        str | None, typer.Option(help="Start from this profile (shipped name or .toml)")
    ] = None,
    model: Annotated[str | None, typer.Option(help="Model of run folders that lack it")] = None,
    gpu: Annotated[str | None, typer.Option(help="GPU of run folders that lack it (bench)")] = None,
    tp: Annotated[int | None, typer.Option(help="Tensor parallel of run folders")] = None,
    weight_dtype: Annotated[str | None, typer.Option(help="Weight dtype of run folders")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output")] = False,
) -> None:
    """Fit the cost model's efficiency parameters to measured runs or validation CSVs.

    Prints the error per metric before and after, on the fitted and on the held-back runs
    (split by run or source, never by row); --out writes the fitted profile."""

    def work() -> None:
        if out:
            check_out_file(out)
        params = check_parameters(param) if param else list(DEFAULT_PARAMETERS)
        given = {"model": model, "gpu": gpu, "tp": tp, "weight_dtype": weight_dtype}
        overrides = {k: v for k, v in given.items() if v is not None}
        data = load_inputs([Path(p) for p in inputs], overrides)
        first = None
        if start:
            p = load_profile(start)
            first = Params(p.efficiency, p.power)
        with progress("fitting", enabled=not as_json) as report:
            cal = run_calibration(
                data.rows,
                holdout=holdout or (),
                parameters=params,
                engine=engine,
                start=first,
                progress=report,
            )
        path = save_profile(cal.profile(name or None), out) if out else None
        if as_json:
            print_json({**cal.to_dict(), "skipped": dict(data.skipped), "profile": str(path or "")})
            return
        _print_errors(cal)
        _print_params(cal)
        prose(
            f"{cal.fitted_rows} rows fitted, {cal.held_rows} held back; "
            f"{sum(data.skipped.values())} rows skipped",
            markup=False,
        )
        if path:
            prose(f"profile written to {path}", markup=False)

    guarded(work)


def _ints(text: str, name: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise ConfigError(name, text, "comma-separated integers") from None


@app.command()
def profile(
    model: Annotated[str, typer.Option(help="Catalog model, HF id or config.json")],
    dtype: Annotated[str, typer.Option("--weight-dtype", help="bf16 or fp16")] = "bf16",
    batches: Annotated[
        str, typer.Option(help="Decode batch sizes, comma-separated")
    ] = "1,8,32,128",
    contexts: Annotated[
        str, typer.Option(help="Decode contexts, comma-separated")
    ] = "512,2048,8192",
    prefill_lengths: Annotated[str, typer.Option(help="Prefill lengths, comma-separated")] = (
        "128,512,2048,8192"
    ),
    gpu: Annotated[
        str | None, typer.Option(help="Catalog GPU name if the device's is unknown")
    ] = None,
    out: Annotated[
        str, typer.Option(help="Run folder to write (calibrate reads it)")
    ] = "profile-run",
) -> None:
    """Time a random-weight model of the architecture on the local NVIDIA GPU.

    Prefill vs length, decode step vs batch x context, peak memory and NVML energy, written as a
    run that `calibrate` reads. Needs PyTorch (the `profile` extra) and a CUDA GPU; without them
    it says so in one line and exits 0."""

    def make_spec() -> ProfileSpec:
        get_model(model)  # a bad model or flag is bad input (2) with or without a GPU here
        if gpu is not None:
            get_gpu(gpu)
        return ProfileSpec(
            model=model,
            dtype=dtype,
            batches=_ints(batches, "batches"),
            contexts=_ints(contexts, "contexts"),
            prefill_lengths=_ints(prefill_lengths, "prefill-lengths"),
            gpu=gpu,
        )

    spec = guarded(make_spec)
    reason = gpu_unavailable_reason()
    if reason is not None:
        console.print(
            f"tokenprobe profile: {reason}; nothing measured.",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
        raise typer.Exit(0)

    def work() -> None:
        run = profile_gpu(spec)
        path = write_profile_run(run, out)
        console.print(
            f"{len(run.points)} points on {run.device_name} ({run.gpu}), "
            f"peak memory {run.peak_memory_bytes / 2**30:.1f} GiB; run written to {path}"
        )
        for note in run.skipped:
            console.print(f"  skipped: {note}")

    guarded(work)
