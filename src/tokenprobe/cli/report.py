"""`tokenprobe report`: one self-contained HTML file for a run folder, an estimate or a
simulation."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tokenprobe.cli.app import app, console, guarded
from tokenprobe.cli.deployment_options import (
    GpuOption,
    InputTokensOption,
    ModelOption,
    OutputTokensOption,
    WeightDtypeOption,
)
from tokenprobe.errors import ConfigError


def _estimate_report(out: Path, **kwargs: object) -> Path:
    from tokenprobe.cost import estimate
    from tokenprobe.report import describe_estimate, estimate_sections, write_report

    est = estimate(**kwargs).to_dict()  # type: ignore[arg-type]
    return write_report(out, estimate_sections(est), "tokenprobe estimate", describe_estimate(est))


def _run_report(out: Path, run_dir: Path) -> Path:
    from tokenprobe.metrics import summarize
    from tokenprobe.records import read_run, read_summary
    from tokenprobe.report import (
        is_sweep_folder,
        read_sweep,
        run_sections,
        sweep_sections,
        write_report,
    )

    if is_sweep_folder(run_dir):  # bench --sweep: one run folder per point
        sections = sweep_sections(read_sweep(run_dir), run_dir.name)
        return write_report(out, sections, f"Sweep {run_dir.name}")
    run = read_run(run_dir)
    summary = read_summary(run_dir) or summarize(run)
    return write_report(out, run_sections(run, summary, run_dir.name), f"Run {run_dir.name}")


def _simulate_report(out: Path, **kwargs: object) -> Path:
    from tokenprobe.report import run_sections, write_report
    from tokenprobe.sim import simulate

    result = simulate(**kwargs)  # type: ignore[arg-type]
    return write_report(out, run_sections(result.run(), result.to_dict()), "tokenprobe simulation")


@app.command("report")
def report_cmd(
    run_dir: Annotated[
        Path | None,
        typer.Argument(help="A run folder (records.jsonl, ...) or a sweep folder (bench --sweep)"),
    ] = None,
    out: Annotated[Path, typer.Option(help="The HTML file to write")] = Path("report.html"),
    estimate_: Annotated[
        bool, typer.Option("--estimate", help="Report an estimate of the flags below")
    ] = False,
    simulate_: Annotated[
        bool, typer.Option("--simulate", help="Simulate the flags below and report the run")
    ] = False,
    model: ModelOption = "llama-3.1-8b",
    gpu: GpuOption = "h100-sxm",
    tp: Annotated[int, typer.Option(help="Tensor-parallel degree")] = 1,
    input_tokens: InputTokensOption = 1024,
    output_tokens: OutputTokensOption = 256,
    batch: Annotated[int, typer.Option(help="Requests decoded together (--estimate)")] = 1,
    weight_dtype: WeightDtypeOption = "bf16",
    kv_dtype: Annotated[str | None, typer.Option(help="KV-cache dtype")] = None,
    rate: Annotated[float | None, typer.Option(help="Poisson arrivals/s (--simulate)")] = None,
    concurrency: Annotated[int | None, typer.Option(help="Closed-loop users (--simulate)")] = None,
    num_requests: Annotated[
        int, typer.Option(help="Requests to simulate (1000: enough for smooth CDFs and timelines)")
    ] = 1000,
    seed: Annotated[int, typer.Option(help="Seed of the simulated workload")] = 0,
) -> None:
    """Write an HTML report (plots inlined, opens offline) of a run, an estimate or a simulation."""

    def build() -> Path:
        if sum([run_dir is not None, estimate_, simulate_]) != 1:
            raise ConfigError("report", "", "give exactly one of RUN_DIR, --estimate, --simulate")
        if run_dir is not None:
            return _run_report(out, run_dir)
        common = dict(
            model=model,
            gpu=gpu,
            tp=tp,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            weight_dtype=weight_dtype,
            kv_dtype=kv_dtype,
        )
        if estimate_:
            return _estimate_report(out, batch=batch, **common)
        offline = rate is None and concurrency is None
        return _simulate_report(
            out,
            rate_per_s=rate,
            concurrency=concurrency,
            offline=offline,
            num_requests=num_requests,
            seed=seed,
            **common,
        )

    path = guarded(build)
    console.print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")
