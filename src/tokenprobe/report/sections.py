"""Report sections (tables + figures) for an estimate, a run, and a comparison."""

from __future__ import annotations

import json
from typing import Any

from tokenprobe.diagnose import diagnose
from tokenprobe.errors import TokenprobeError
from tokenprobe.records import Run
from tokenprobe.report import fmt
from tokenprobe.report.compare import METRICS, compare_row, comparison_figure, tpot_curves
from tokenprobe.report.describe import run_facts
from tokenprobe.report.diagnosis_figs import diagnosis_sections
from tokenprobe.report.estimate_figs import SHARES, estimate_figures
from tokenprobe.report.html import Row, Section, Table
from tokenprobe.report.plot import Figure
from tokenprobe.report.run_figs import latency_cdf_overlay, run_figures
from tokenprobe.report.run_tables import energy_rows, frontend_sections


def describe_estimate(est: dict[str, Any]) -> str:
    """One line: model, hardware, parallelism, dtypes and request shape."""
    return (
        f"{est['model']} on {est['num_gpus']}x {est['gpu']} (tp={est['tp']}, pp={est['pp']}), "
        f"weights {est['weight_dtype']}, compute {est['compute_dtype']}, KV {est['kv_dtype']}; "
        f"batch {est['batch']} x ({est['input_tokens']} in, {est['output_tokens']} out)"
    )


def headline_rows(est: dict[str, Any]) -> list[Row]:
    m, e = est["memory"], est["energy"]
    basis = e.get("energy_basis", "GPU")
    cb = (est.get("decode") or {}).get("compute_bound_batch")
    return [
        ("TTFT", fmt.duration(est["ttft_s"])),
        ("TPOT (mean over the output)", fmt.duration(est["tpot_s"])),
        ("E2E", fmt.duration(est["e2e_s"])),
        ("output tokens/s (whole batch)", fmt.num(est["output_tokens_per_s"])),
        ("decode turns compute-bound at batch", "never" if cb is None else str(cb)),
        ("fits in memory", "yes" if m["fits"] else f"NO: {m['reason']}"),
        ("max concurrent requests", f"{m['max_concurrent_requests']:,}"),
        ("KV capacity", f"{m['kv_capacity_tokens']:,} tokens"),
        (f"{basis}: J per input token", fmt.num(e["joules_per_input_token"])),
        (f"{basis}: J per output token", fmt.num(e["joules_per_output_token"])),
        (f"{basis}: kWh per million input tokens", fmt.num(e["kwh_per_million_input_tokens"])),
        (f"{basis}: kWh per million output tokens", fmt.num(e["kwh_per_million_output_tokens"])),
        *(
            [(f"{basis}: static share (GPU idle floor + host base)", fmt.pct(e["static_share"]))]
            if "static_share" in e
            else []
        ),
    ]


def _stage_rows(est: dict[str, Any]) -> tuple[Row, list[Row]]:
    stages = [(n, est[n]) for n in ("prefill", "decode") if est.get(n)]
    header: Row = ("", *(("decode step" if n == "decode" else n) for n, _ in stages))
    fmts: list[tuple[str, Any]] = [
        ("time", lambda s: fmt.duration(s["time_s"])),
        ("FLOP", lambda s: fmt.si(s["flop"], "FLOP")),
        ("HBM bytes", lambda s: fmt.si(s["hbm_bytes"], "B")),
        ("FLOP per byte", lambda s: fmt.num(s["arithmetic_intensity_flop_per_byte"])),
        ("bound", lambda s: s["bound"]),
        *((f"{k} share", lambda s, k=k: fmt.pct(s["shares"][k])) for k in SHARES),
        ("power per GPU", lambda s: fmt.num(s["power_w"], "W")),
    ]
    return header, [(label, *(fmt(s) for _, s in stages)) for label, fmt in fmts]


def memory_rows(m: dict[str, Any]) -> list[Row]:
    """The memory budget of an estimate as (label, value) rows (report and terminal alike)."""
    rows: list[Row] = [
        (label, fmt.size(m[key]))
        for label, key in (
            ("HBM", "hbm_bytes_per_gpu"),
            ("usable by the engine", "usable_bytes_per_gpu"),
            ("weights", "weights_bytes_per_gpu"),
            ("activations (peak)", "activation_bytes_per_gpu"),
            ("runtime", "runtime_bytes_per_gpu"),
            ("free for KV cache", "kv_free_bytes_per_gpu"),
            ("KV per token (all GPUs)", "kv_bytes_per_token"),
            ("KV per request (all GPUs)", "kv_bytes_per_request"),
        )
    ]
    return [*rows, ("verdict", m["reason"])]


def estimate_sections(est: dict[str, Any], prefix: str = "") -> list[Section]:
    """The estimate's numbers and figures; `prefix` keeps figure ids unique when several
    estimates share a page."""
    figs = {prefix + k: v for k, v in estimate_figures(est).items()}
    header, stage_rows = _stage_rows(est)
    ttft: list[Row] = [
        (k.removesuffix("_s"), fmt.duration(v)) for k, v in est["ttft_breakdown_s"].items()
    ]

    def pick(*ids: str) -> dict[str, Figure]:
        return {prefix + i: figs[prefix + i] for i in ids if prefix + i in figs}

    return [
        Section(
            "Headline numbers",
            tables=[
                Table(
                    "Latency, throughput, memory, energy", ("metric", "value"), headline_rows(est)
                ),
                Table("TTFT breakdown", ("part", "time"), ttft),
            ],
            notes=[describe_estimate(est)],
        ),
        Section(
            "Where the time goes",
            tables=[Table("Per stage, per GPU", header, stage_rows)],
            figures=pick("roofline", "shares", "energy"),
        ),
        Section("Decode: context and batch", figures=pick("tpot", "throughput")),
        Section(
            "Memory",
            tables=[Table("Per GPU", ("item", "value"), memory_rows(est["memory"]))],
            figures=pick("memory", "kv"),
        ),
    ]


def _latency_rows(summary: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    for key in ("ttft_s", "tpot_s", "itl_s", "e2e_s", "queue_s"):
        stats = summary.get(key)
        if isinstance(stats, dict) and any(_is_num(stats.get(p)) for p in PERCENTILES):
            rows.append(
                (key.removesuffix("_s").upper(), *(fmt.ms(stats.get(p)) for p in PERCENTILES))
            )
    return rows


PERCENTILES = ("mean", "p50", "p90", "p99")


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _errors_text(errors: Any) -> str:
    if not isinstance(errors, dict) or not errors:
        return "none"
    return ", ".join(f"{kind}: {fmt.num(n)}" for kind, n in errors.items())


def _slo_text(summary: dict[str, Any], config: dict[str, Any]) -> str | None:
    """ "TTFT <= 500 ms, TPOT <= 50 ms" from the summary's (or config's) SLOs; None if none."""
    parts = []
    for key, label in (("slo_ttft_s", "TTFT"), ("slo_tpot_s", "TPOT")):
        value = summary.get(key, config.get(key))
        if _is_num(value):
            parts.append(f"{label} <= {fmt.ms(value, unit=True)}")
    return ", ".join(parts) or None


def _goodput_text(summary: dict[str, Any]) -> str:
    """ "0.255 (12.5% of requests)": goodput and the share of all requests sent (failed ones
    included) that met the SLOs."""
    goodput = _float(summary.get("goodput_requests_per_s"))
    duration = _float(summary.get("duration_s"))
    sent = sum(_float(summary.get(k)) or 0.0 for k in ("completed", "failed"))
    if goodput is None or duration is None or sent <= 0:
        return fmt.num(goodput)
    return f"{fmt.num(goodput)} ({fmt.pct(goodput * duration / sent)} of requests)"


def _float(v: Any) -> float | None:
    return float(v) if _is_num(v) else None


def _key_figures(summary: dict[str, Any], config: dict[str, Any]) -> list[Row]:
    """The run's key figures: requests, errors, throughput, latency p50/p99, goodput."""
    rows: list[Row] = [
        (
            "requests completed / failed",
            f"{fmt.num(summary.get('completed'))} / {fmt.num(summary.get('failed'))}",
        ),
        ("errors by kind", _errors_text(summary.get("errors"))),
        ("duration", fmt.num(summary.get("duration_s"), "s")),
        ("requests/s", fmt.num(summary.get("requests_per_s"))),
        ("output tokens/s", fmt.num(summary.get("output_tokens_per_s"))),
        ("total tokens/s", fmt.num(summary.get("total_tokens_per_s"))),
    ]
    for key, label in (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("itl_s", "ITL")):
        stats = summary.get(key)
        if isinstance(stats, dict) and _is_num(stats.get("p50")):
            rows.append(
                (
                    f"{label} p50 / p99",
                    f"{fmt.ms(stats.get('p50'))} / {fmt.ms(stats.get('p99'), unit=True)}",
                )
            )
    slo = _slo_text(summary, config)
    if slo is not None:
        rows.append((f"goodput (requests/s within {slo})", _goodput_text(summary)))
    for label, key in (("preemptions", "preemptions"), ("rejected", "rejected")):
        if _is_num(summary.get(key)) and summary.get(key):
            rows.append((label, fmt.num(summary.get(key))))
    if _is_num(summary.get("prefix_cache_hit_rate")):
        rows.append(
            ("prompt tokens from the prefix cache", fmt.pct(summary["prefix_cache_hit_rate"]))
        )
    return rows


def _energy_rows(summary: dict[str, Any]) -> list[Row]:
    e = summary.get("energy")
    if not isinstance(e, dict):
        return []
    return energy_rows(e) + _split_rows(e)


# the energy join's prefill/decode split (energy_join.PrefillDecodeFit): key, label
_SPLIT = (
    ("j_per_prefill_token", "J per input token (GPU, prefill/decode split)"),
    ("j_per_decode_token", "J per output token (GPU, prefill/decode split)"),
    ("static_w", "static power in the split (GPU, W)"),
)


def _split_rows(energy: dict[str, Any]) -> list[Row]:
    """The split's coefficients with their standard errors ("held at 0" where the
    non-negative fit held one), and its R²."""
    fit = energy.get("fit")
    if not isinstance(fit, dict):
        return []
    rows: list[Row] = []
    for key, label in _SPLIT:
        if key in (fit.get("at_zero") or ()):
            rows.append((label, "0 (held at 0: the data would make it negative)"))
            continue
        se = fit.get(f"{key}_se")
        rows.append((label, fmt.num(fit.get(key)) + (f" ± {fmt.num(se)}" if _is_num(se) else "")))
    rows.append(("R² of the split", fmt.num(fit.get("r2"))))
    return rows


def _config_rows(run: Run) -> list[Row]:
    rows: list[Row] = [("kind", run.kind)]
    for key, value in run.config.items():
        text = value if isinstance(value, str) else json.dumps(value, separators=(", ", ": "))
        rows.append((key, text if len(text) <= 160 else text[:157] + "..."))
    return rows


def _finding_text(f: Any) -> str:
    if isinstance(f, dict):
        return " | ".join(f"{k}: {v}" for k, v in f.items())
    return str(f)


def _fired(diagnosis: dict[str, Any] | None, summary: dict[str, Any]) -> list[Row]:
    """(severity, what, action) of each finding that fired (the diagnosis', else the summary's)."""
    if diagnosis is not None:
        return [
            (str(f.get("severity", "")), str(f.get("summary", "")), str(f.get("action", "")))
            for f in diagnosis.get("findings", [])
            if isinstance(f, dict)
        ]
    findings = summary.get("findings")
    if not isinstance(findings, list):
        return []
    return [("", _finding_text(f), "") for f in findings]


def headline_section(
    run: Run,
    summary: dict[str, Any],
    name: str,
    diagnosis: dict[str, Any] | None,
    notes: list[str],
) -> Section:
    """What was run (model, GPU, engine, load, server), its key figures and the findings that
    fired: the first thing a reader of a run's report sees."""
    facts = run_facts(run.kind, run.config)
    what: list[Row] = [
        ("kind", run.kind),
        *((k if k != "gpu" else "GPU", v) for k, v in facts.items()),
    ]
    fired = _fired(diagnosis, summary)
    tables = [
        Table("What was run", ("", ""), what, text=True),
        Table("Key figures", ("metric", "value"), _key_figures(summary, run.config)),
    ]
    if fired:
        tables.append(
            Table("Findings that fired", ("severity", "what", "action"), fired, text=True)
        )
    else:
        notes = [*notes, "No diagnosis rule fired." if diagnosis is not None else ""]
    return Section(
        "At a glance" + (f": {name}" if name else ""),
        tables=tables,
        notes=[n for n in notes if n],
        css_class="headline",
    )


def run_sections(
    run: Run, summary: dict[str, Any], name: str = "", diagnosis: dict[str, Any] | None = None
) -> list[Section]:
    """A run's report: the headline (what ran, key figures, findings that fired), latency table
    and CDFs, timeline, energy, the full diagnosis, and the configuration last. `diagnosis` is a
    `Diagnosis.to_dict()`, else made here with the prediction; a summary's own "findings" when
    no diagnosis can be made."""
    figs = run_figures(run, summary)
    notes = list(run.warnings)
    if diagnosis is None:
        diagnosis, note = _diagnose(run)
        if note:
            notes.append(note)
    sections = [
        headline_section(run, summary, name, diagnosis, notes),
        Section(
            "Latency",
            tables=[
                Table("Latency (ms)", ("", "mean", "p50", "p90", "p99"), _latency_rows(summary))
            ],
            figures={"latency_cdf": figs["latency_cdf"]},
        ),
        Section("Timeline", figures={"timeline": figs["timeline"]}),
    ]
    energy = _energy_rows(summary)
    if energy or "run_energy" in figs:
        sections.append(
            Section(
                "Energy",
                tables=[Table("Energy", ("metric", "value"), energy)] if energy else [],
                figures={k: v for k, v in figs.items() if k == "run_energy"},
            )
        )
    sections.extend(frontend_sections(summary))
    if diagnosis is not None:
        sections.extend(diagnosis_sections(diagnosis, run))
    sections.append(
        Section(
            "Configuration",
            tables=[Table("config.json", ("key", "value"), _config_rows(run), text=True)],
        )
    )
    return sections


def _diagnose(run: Run) -> tuple[dict[str, Any] | None, str | None]:
    """The run's diagnosis, with measured vs predicted and the run replayed through the
    simulator for a measured or imported run (a simulated run is itself a prediction), or None
    and why."""
    predict = run.kind != "simulated"
    try:
        return diagnose(run, predict=predict, replay_run=predict).to_dict(), None
    except TokenprobeError as exc:
        return None, f"no diagnosis: {exc}"


def compare_sections(labelled: list[tuple[str, dict[str, Any]]]) -> list[Section]:
    """Several estimates side by side: a table of headline numbers and the bar panels."""
    rows = [compare_row(label, est) for label, est in labelled]
    header: Row = ("", *(r["label"] for r in rows))
    table_rows: list[Row] = [
        (title, *("does not fit" if not r["fits"] else fmt.num(r[key] * scale) for r in rows))
        for key, title, scale, _ in METRICS
    ]
    table_rows.append(
        ("max concurrent requests", *(f"{r['max_concurrent_requests']:,}" for r in rows))
    )
    table_rows.append(("fits", *(("yes" if r["fits"] else r["reason"]) for r in rows)))
    figures = {"compare": comparison_figure(rows)}
    if any(est.get("decode") for _, est in labelled):
        figures["compare_tpot"] = tpot_curves(labelled)
    notes = [f"{label}: {describe_estimate(est)}" for label, est in labelled]
    return [
        Section(
            "Side by side",
            tables=[Table("Headline numbers", header, table_rows)],
            figures=figures,
            notes=notes,
        )
    ]


RUN_COMPARE_ROWS: tuple[tuple[str, str, str | None], ...] = (
    ("completed requests", "completed", None),
    ("failed requests", "failed", None),
    ("TTFT p50 (ms)", "ttft_s", "p50"),
    ("TTFT p99 (ms)", "ttft_s", "p99"),
    ("TPOT p50 (ms)", "tpot_s", "p50"),
    ("TPOT p99 (ms)", "tpot_s", "p99"),
    ("ITL p50 (ms)", "itl_s", "p50"),
    ("E2E p50 (ms)", "e2e_s", "p50"),
    ("requests/s", "requests_per_s", None),
    ("output tokens/s", "output_tokens_per_s", None),
)


def run_compare_rows(named: list[tuple[str, dict[str, Any]]]) -> tuple[Row, list[Row]]:
    """(header, rows) of several runs' summaries side by side; latencies in ms."""
    header: Row = ("", *(name for name, _ in named))
    rows: list[Row] = []
    for label, key, stat in RUN_COMPARE_ROWS:
        cells = []
        for _, summary in named:
            value = summary.get(key)
            if stat is not None:
                cells.append(fmt.ms(value.get(stat) if isinstance(value, dict) else None))
            else:
                cells.append(fmt.num(value))
        rows.append((label, *cells))
    energy = [(s.get("energy") or {}).get("kwh_per_million_output_tokens") for _, s in named]
    rows.append(("kWh per M output tokens", *(fmt.num(v) for v in energy)))
    return header, rows


def run_compare_sections(named: list[tuple[str, Run, dict[str, Any]]]) -> list[Section]:
    """Several runs side by side: summary table and the latency CDFs overlaid."""
    header, rows = run_compare_rows([(name, summary) for name, _, summary in named])
    runs = [(name, run) for name, run, _ in named]
    figures = {
        f"cdf_{key}": latency_cdf_overlay(runs, key)
        for key in ("ttft_s", "tpot_s", "itl_s", "e2e_s")
    }
    return [
        Section("Runs side by side", tables=[Table("Summaries", header, rows)], figures=figures)
    ]
