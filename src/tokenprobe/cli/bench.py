"""`tokenprobe bench`: measure an OpenAI-compatible streaming server; `bench-import` brings in `vllm
bench serve`, GuideLLM and AIPerf results (the format is detected; --from overrides). Live progress
goes to stderr; `--json` prints only the summary (metrics.summarize plus the client's own figures)
on stdout. `--telemetry` samples the GPUs, the host and the server's own /metrics on the run's
clock (`tokenprobe.bench`).

Exit codes: 2 for bad input (a flag, an --out that already holds a run without --overwrite, is a
file or cannot be written), 1 when the run could not be completed (server unusable, disk full
mid-run: the records written so far are kept) or when more than --max-error-rate of its
requests failed (every request failing always counts): the results are written first, and the
message gives the counts by failure kind.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.live import Live

from tokenprobe.cli.app import app, err_console, guarded, print_json
from tokenprobe.cli.bench_sweep import (
    DEFAULT_SWEEP_POINTS,
    MAX_SWEEP_POINTS,
    auto_sweep,
    error_verdict,
    is_auto_sweep,
    prepare_sweep_folder,
)
from tokenprobe.cli.dataset_workload import DATASET_HELP, MAX_INPUT_HELP, MAX_OUTPUT_HELP
from tokenprobe.cli.deployment_options import (
    JsonOption,
)
from tokenprobe.cli.progress import Progress
from tokenprobe.cli.render import Col, print_table, prose
from tokenprobe.errors import ConfigError, TokenprobeError
from tokenprobe.files import finite
from tokenprobe.records import Run, prepare_run_folder, write_run

if TYPE_CHECKING:
    from tokenprobe.bench import TelemetryConfig
    from tokenprobe.loadgen import BenchConfig

# The load generator (aiohttp) and the telemetry stack are imported inside the commands: at
# module level they cost ~0.5 s of start-up to every other `tokenprobe` command.
from tokenprobe.units import MILLI

SWEEP_FIELDS = {"concurrency": "concurrency", "rate": "rate_per_s"}
EXIT_INTERRUPTED = 130
DEFAULT_MAX_ERROR_RATE = 0.5


def parse_sweep(text: str) -> tuple[str, list[float]]:
    """`concurrency=1,2,4` or `rate=0.5,1,2` -> (BenchConfig field, values)."""
    key, sep, values = text.partition("=")
    field = SWEEP_FIELDS.get(key.strip())
    try:
        numbers = [float(v) for v in values.split(",") if v.strip()]
    except ValueError:
        numbers = []
    if not sep or field is None or not numbers:
        raise ConfigError("sweep", text, "concurrency=1,2,4, rate=0.5,1,2 or rate=auto")
    return field, numbers


def _run_one(
    config: BenchConfig, show_progress: bool, telemetry: TelemetryConfig | None = None
) -> Run:
    from tokenprobe.bench import run_measured

    total = config.num_requests
    if total is None and config.workload_file is not None:
        total = config.workload().size
    progress = Progress(total, config.duration_s)
    if not show_progress:
        return run_measured(config, telemetry)
    with Live(progress, console=err_console, refresh_per_second=4, transient=True):
        return run_measured(config, telemetry, progress)


def _interrupted(out: str) -> typer.Exit:
    err_console.print(f"interrupted: every finished request is kept in {out}/records.jsonl")
    return typer.Exit(EXIT_INTERRUPTED)


@app.command("bench")
def bench_cmd(
    out: Annotated[str, typer.Option(help="Run folder: config.json, records.jsonl, summary")] = "",
    url: Annotated[str, typer.Option(help="API base URL, e.g. http://127.0.0.1:8000/v1")] = "",
    model: Annotated[
        str, typer.Option(help="Model name the server serves (default: first of GET /models)")
    ] = "",
    concurrency: Annotated[int | None, typer.Option(help="Closed loop: requests in flight")] = None,
    rate: Annotated[float | None, typer.Option(help="Open loop: requests per second")] = None,
    burstiness: Annotated[float, typer.Option(help="Gamma shape of gaps; 1 = Poisson")] = 1.0,
    max_concurrency: Annotated[int | None, typer.Option(help="Cap in flight (rate)")] = None,
    sweep: Annotated[
        str | None,
        typer.Option(help="concurrency=1,2,4, rate=1,2, or rate=auto (the knee under the SLOs)"),
    ] = None,
    sweep_points: Annotated[
        int, typer.Option(help="rate=auto: at most this many runs")
    ] = DEFAULT_SWEEP_POINTS,
    num_requests: Annotated[int | None, typer.Option(help="Stop after N requests")] = None,
    duration_s: Annotated[float | None, typer.Option(help="Stop sending after T s")] = None,
    input_tokens: Annotated[int | None, typer.Option(help="Synthetic prompt length")] = None,
    output_tokens: Annotated[
        int | None, typer.Option(help="max_tokens (default 256; with --dataset: every request's)")
    ] = None,
    dataset: Annotated[str | None, typer.Option(help=DATASET_HELP)] = None,
    max_input_tokens: Annotated[int | None, typer.Option(help=MAX_INPUT_HELP)] = None,
    max_output_tokens: Annotated[int | None, typer.Option(help=MAX_OUTPUT_HELP)] = None,
    workload: Annotated[
        str | None,
        typer.Option(
            help="Workload TOML/JSON file, as simulate --workload (replaces the load flags)"
        ),
    ] = None,
    endpoint: Annotated[str, typer.Option(help="completions or chat")] = "completions",
    warmup: Annotated[int, typer.Option(help="Warm-up requests, not recorded")] = 0,
    timeout_s: Annotated[float, typer.Option(help="Per-request timeout (s)")] = 600.0,
    api_key_env: Annotated[str | None, typer.Option(help="Env variable with the key")] = None,
    api_key: Annotated[
        str | None, typer.Option(help="API key (never written; --api-key-env keeps it off argv)")
    ] = None,
    overwrite: Annotated[
        bool, typer.Option(help="Replace the run already in --out (its run files are removed)")
    ] = False,
    max_error_rate: Annotated[
        float, typer.Option(help="Exit 1 when more than this share of requests fail (0..1)")
    ] = DEFAULT_MAX_ERROR_RATE,
    seed: Annotated[int | None, typer.Option(help="Seed of prompts and arrivals")] = None,
    ignore_eos: Annotated[bool, typer.Option(help="Ask for exactly max_tokens")] = True,
    slo_ttft_s: Annotated[float | None, typer.Option(help="TTFT SLO for goodput (s)")] = None,
    slo_tpot_s: Annotated[float | None, typer.Option(help="TPOT SLO for goodput (s)")] = None,
    allow_prefix_reuse: Annotated[
        bool, typer.Option(help="Send the seed's prompts as they are (cache hits across points)")
    ] = False,
    temperature: Annotated[float | None, typer.Option(help="Sampling temperature")] = None,
    top_p: Annotated[float | None, typer.Option(help="Sampling top-p (0..1)")] = None,
    top_k: Annotated[int | None, typer.Option(help="Sampling top-k")] = None,
    sampling_seed: Annotated[
        int | None, typer.Option(help="The server's sampling seed (body 'seed'; --seed is ours)")
    ] = None,
    extra_body: Annotated[
        str | None, typer.Option(help="JSON object merged into every request body")
    ] = None,
    self_test: Annotated[
        bool, typer.Option(help="Measure this client's ceiling (--duration-s per phase)")
    ] = False,
    telemetry: Annotated[
        bool, typer.Option(help="Sample GPUs, host and the server's /metrics on the run's clock")
    ] = False,
    telemetry_period_s: Annotated[float, typer.Option(help="Sampling period (s)")] = 0.1,
    server_metrics_url: Annotated[
        str | None, typer.Option(help="Server's Prometheus URL (default: /metrics beside --url)")
    ] = None,
    server_pid: Annotated[int | None, typer.Option(help="Sample this server process's CPU")] = None,
    telemetry_file: Annotated[
        Path | None,
        typer.Option(help="nvidia-smi CSV log recorded beside the run: joined to it at the end"),
    ] = None,
    server_load_s: Annotated[
        float | None,
        typer.Option(help="With --telemetry: server launch-to-ready time (s), for diagnose"),
    ] = None,
    gpu: Annotated[
        str | None,
        typer.Option(help="The server's GPU (catalog name), for diagnose --predict"),
    ] = None,
    catalog_model: Annotated[
        str | None,
        typer.Option(help="Catalog model, if --model is not one (for diagnose --predict)"),
    ] = None,
    json_out: JsonOption = False,
) -> None:
    """Measure an OpenAI-compatible streaming server (vLLM, SGLang, TGI, llama.cpp, Ollama)."""
    from tokenprobe.bench import TelemetryConfig
    from tokenprobe.loadgen import BenchConfig, bench_summary, run_self_test, sweep_configs

    if self_test:
        figures = guarded(lambda: run_self_test(duration_s=duration_s or 3.0))
        _print(figures, json_out, _render_self_test)
        return

    auto = is_auto_sweep(sweep)

    def make() -> list[BenchConfig]:
        if not out:
            raise ConfigError("out", out, "a run folder is required (--out RUN_DIR)")
        base = BenchConfig(
            url=url,
            model=model,
            # a sweep sets the mode per point; a placeholder keeps the base config valid
            concurrency=1 if sweep and concurrency is None and rate is None else concurrency,
            rate_per_s=rate,
            burstiness=burstiness,
            max_concurrency=max_concurrency,
            num_requests=num_requests,
            duration_s=duration_s,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            dataset=dataset,
            workload_file=workload,
            max_input_tokens=max_input_tokens,
            max_output_tokens=max_output_tokens,
            endpoint=endpoint,  # type: ignore[arg-type]  # validated by BenchConfig
            warmup=warmup,
            timeout_s=timeout_s,
            api_key_env=api_key_env,
            out=out,
            seed=seed,
            ignore_eos=ignore_eos,
            allow_prefix_reuse=allow_prefix_reuse,
            slo_ttft_s=slo_ttft_s,
            slo_tpot_s=slo_tpot_s,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            sampling_seed=sampling_seed,
            extra_body=parse_extra_body(extra_body),
            gpu=gpu,
            catalog_model=catalog_model,
            api_key_value=api_key,
        )
        finite("max_error_rate", max_error_rate, lo=0.0, hi=1.0)
        if auto:
            if base.slo_ttft_s is None and base.slo_tpot_s is None:
                raise ConfigError(
                    "sweep", sweep, "rate=auto with --slo-ttft-s and/or --slo-tpot-s to judge by"
                )
            if not 1 <= sweep_points <= MAX_SWEEP_POINTS:
                raise ConfigError("sweep_points", sweep_points, f"1 to {MAX_SWEEP_POINTS}")
            prepare_sweep_folder(Path(out), overwrite)
            return [base]
        configs = [base] if sweep is None else sweep_configs(base, *parse_sweep(sweep))
        for config in configs:  # before anything is sent: no run is clobbered or lost
            prepare_run_folder(config.out or out, overwrite)
        return configs

    configs = guarded(make)
    sampling = (
        guarded(
            lambda: TelemetryConfig(
                period_s=telemetry_period_s,
                server_metrics_url=server_metrics_url,
                server_pid=server_pid,
                server_load_s=server_load_s,
                gpu=gpu,
                catalog_model=catalog_model,
            )
        )
        if telemetry
        else None
    )

    def measure(config: BenchConfig) -> dict[str, Any]:
        """One run (a sweep point or the whole run): measured, written, shown."""
        live = not json_out and err_console.is_terminal
        try:
            run = guarded(lambda: _run_one(config, show_progress=live, telemetry=sampling))
        except KeyboardInterrupt:
            raise _interrupted(config.out or out) from None
        if telemetry_file is not None:
            run = _join_log(run, telemetry_file, config.out or out)
        summary = bench_summary(run)  # the SLOs are in the run's config
        if sampling is not None or telemetry_file is not None:
            summary = {**summary, **_telemetry_part(run)}
        for warning in summary["warnings"]:
            err_console.print(
                f"warning: {config.out or out}: {warning}", highlight=False, markup=False
            )
        if not json_out:
            _render_summary(summary, config.out or out)
        return summary

    if auto:
        auto_sweep(configs[0], measure, json_out, max_error_rate, sweep_points)
        return
    summaries: list[dict[str, Any]] = []
    too_many_errors: list[str] = []
    for config in configs:
        summary = measure(config)
        summaries.append({"out": config.out, **summary} if sweep else summary)
        verdict = error_verdict(summary, max_error_rate)
        if verdict is not None:
            too_many_errors.append(f"{config.out or out}: {verdict}")
    if json_out:
        print_json(summaries[0] if sweep is None else {"sweep": sweep, "points": summaries})
    for line in too_many_errors:
        err_console.print(f"[bold red]error:[/] {line}", highlight=False)
    if too_many_errors:
        raise typer.Exit(1)


def _join_log(run: Run, log: Path, out: str) -> Run:
    """The run with the nvidia-smi log recorded beside it joined on its clock (import-telemetry
    --into); the run is already written, so a log that cannot be joined is a warning."""
    from tokenprobe.cli.import_telemetry import attach_telemetry

    try:
        joined, left_out = attach_telemetry(Path(out), log)
    except TokenprobeError as exc:
        err_console.print(f"warning: {out}: {exc}", highlight=False, markup=False)
        return run
    err_console.print(
        f"{out}: {len(joined.telemetry)} GPU samples of {log} joined ({left_out} outside the run)",
        highlight=False,
        markup=False,
    )
    return joined


def parse_extra_body(text: str | None) -> dict[str, Any]:
    """`--extra-body` text -> the JSON object merged into every request body."""
    if text is None:
        return {}
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ConfigError("--extra-body", text, f"not valid JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise ConfigError("--extra-body", text, "a JSON object, e.g. '{\"min_p\": 0.1}'")
    return doc


@app.command("bench-import")
def bench_import_cmd(
    path: Annotated[
        str,
        typer.Argument(help="`vllm bench serve` or GuideLLM JSON, AIPerf profile_export.jsonl"),
    ],
    out: Annotated[str, typer.Option(help="Run folder to write (one per benchmark)")],
    source: Annotated[
        str, typer.Option("--from", help="auto (detected), vllm, guidellm or aiperf")
    ] = "auto",
    json_out: JsonOption = False,
    overwrite: Annotated[bool, typer.Option(help="Replace runs already in --out")] = False,
) -> None:
    """Import another tool's results into tokenprobe run folders (kind "imported")."""
    from tokenprobe.loadgen import bench_summary, import_runs

    def run() -> list[tuple[str, dict[str, Any]]]:
        runs = import_runs(Path(path), source)
        names = [f"benchmark_{i}" for i in range(len(runs))]
        folders = [out] if len(runs) == 1 else [str(Path(out) / name) for name in names]
        for folder in folders:
            prepare_run_folder(folder, overwrite)
        written = []
        for folder, imported in zip(folders, runs, strict=True):
            summary = bench_summary(imported)
            write_run(imported, folder, summary)
            written.append((folder, summary))
        return written

    written = guarded(run)
    if json_out:
        print_json({"runs": [{"out": folder, **summary} for folder, summary in written]})
        return
    for folder, summary in written:
        _render_summary(summary, folder)


def _telemetry_part(run: Run) -> dict[str, Any]:
    from tokenprobe.bench import telemetry_summary

    full = telemetry_summary(run)
    return {k: full[k] for k in ("telemetry", "energy") if k in full}


def _print(data: dict[str, Any], json_out: bool, render: Any) -> None:
    if json_out:
        print_json(data)
    else:
        render(data)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value / MILLI:.2f}"


SUMMARY_COLUMNS = (
    Col("metric", kind="name"),
    *(Col(h, kind="num", justify="right") for h in ("mean ms", "p50 ms", "p90 ms", "p99 ms")),
)


def _render_summary(s: dict[str, Any], out: str) -> None:
    stats = ("mean", "p50", "p90", "p99")
    rows = [
        [key.removesuffix("_s").upper(), *(_ms(s[key][k]) for k in stats)]
        for key in ("ttft_s", "tpot_s", "itl_s", "e2e_s")
    ]
    lag = s["client"]["send_lag_s"]
    rows.append(["send lag", *(_ms(lag[k]) for k in stats)])
    print_table(f"Measured run ({out})", SUMMARY_COLUMNS, rows)
    errors = ", ".join(f"{k}: {v}" for k, v in s["errors"].items()) or "none"
    rps, tps = s["requests_per_s"], s["output_tokens_per_s"]
    if "telemetry" in s:
        t = s["telemetry"]
        prose(
            f"telemetry: {t['gpu_samples']} GPU, {t['host_samples']} host and "
            f"{t['server_samples']} server-metrics samples",
            markup=False,
        )
        for note in t["notes"]:
            err_console.print(f"note: {note}", highlight=False, markup=False)
    prose(
        f"completed {s['completed']}, failed {s['failed']} ({errors}); "
        f"{rps or 0:.2f} req/s, {tps or 0:.1f} output tok/s over {s['duration_s']:.2f} s; "
        f"token counts from {s['client']['token_count_source'] or '-'}",
        markup=False,
    )
    if s.get("goodput_requests_per_s") is not None:
        slos = [
            f"{name} <= {_ms(s[key])} ms"
            for name, key in (("TTFT", "slo_ttft_s"), ("TPOT", "slo_tpot_s"))
            if s.get(key) is not None
        ]
        prose(
            f"goodput {s['goodput_requests_per_s']:.2f} req/s ({' and '.join(slos)})",
            markup=False,
        )
    retried = s["client"].get("retried_requests")
    if retried:
        err_console.print(
            f"note: {retried} requests were re-sent once, on a fresh connection, after the "
            "pooled one was found closed (records' extra.retries)",
            highlight=False,
        )


def _render_self_test(f: dict[str, Any]) -> None:
    prose(
        f"client ceiling against a trivial local stream server: "
        f"{f['requests_per_s']:.0f} req/s, {f['streamed_tokens_per_s']:.0f} streamed tok/s "
        f"(concurrency {f['concurrency']}); send lag at {f['lag_rate_per_s']:g} req/s: "
        f"p50 {_ms(f['send_lag_p50_s'])} ms, p99 {_ms(f['send_lag_p99_s'])} ms; "
        f"results near these figures are client-bound",
        markup=False,
    )
