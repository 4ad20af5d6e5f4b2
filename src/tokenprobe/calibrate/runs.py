"""Rows from run folders: `tokenprobe profile` runs and simulated/measured serving runs.

- A folder holding `profile.csv` (written by `tokenprobe profile`) is read as a CSV in the
  validation schema (observations.py maps its `tokenprobe_profile` rows).
- Any other run folder (records.py) whose config names the deployment (model, gpu, tp,
  weight_dtype, kv_dtype: what `simulate` records; for a `bench` run, which knows only the
  served model, the caller supplies the rest) and a reproducible workload (`workload`, as
  `simulate` writes it, or a bench run's fixed input/output tokens, load mode and request count)
  becomes one row: measured median TTFT, median TPOT and output tokens/s from
  `metrics.summarize`, predicted by simulating the same workload, scheduler settings (vLLM
  defaults when none were recorded) and seed on the candidate deployment. A run of which that
  is not known is skipped with the reason.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tokenprobe.calibrate.observations import LoadResult, Row
from tokenprobe.calibrate.sources import load_csv
from tokenprobe.cost import Deployment
from tokenprobe.energy_join import join_energy
from tokenprobe.errors import ConfigError, SchemaError
from tokenprobe.files import names_a_file
from tokenprobe.metrics import summarize
from tokenprobe.records import CONFIG_FILE, DeploymentConfig, Run, RunConfig, read_run
from tokenprobe.sim import SchedulerConfig, build_workload, price_deployment, simulate
from tokenprobe.workload import Workload, workload_from_dict

PROFILE_CSV = "profile.csv"
RUN_METRICS = ("ttft_median", "tpot_median", "output_throughput")


def _metrics(summary: Mapping[str, Any]) -> dict[str, float]:
    values = {
        "ttft_median": (summary.get("ttft_s") or {}).get("p50"),
        "tpot_median": (summary.get("tpot_s") or {}).get("p50"),
        "output_throughput": summary.get("output_tokens_per_s"),
    }
    return _positive(values)


def _positive(values: Mapping[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in values.items() if isinstance(v, int | float) and v > 0}


def _energy_metrics(
    energy_j: float, duration_s: float, output_tokens: int, gpus: int
) -> dict[str, float]:
    """A run's energy as the validation sources state it: the whole run's GPU energy over its
    output tokens (ML.ENERGY's J per output token) and the mean power per GPU over the run."""
    return _positive(
        {
            "energy_per_output_token": energy_j / output_tokens if output_tokens else None,
            "power_per_gpu": energy_j / duration_s / gpus if duration_s > 0 else None,
        }
    )


def _measured_energy(run: Run, gpus: int) -> dict[str, float]:
    """The run's energy from its telemetry (or a simulator's timeline, which covers every GPU),
    by the energy join; none when the run has neither, or telemetry of only some of its GPUs
    (their energy is not the deployment's)."""
    if not run.telemetry and not run.timeline:
        return {}
    try:
        report = join_energy(run)
    except ConfigError:  # fewer than two samples: no energy figure, the times still count
        return {}
    if report.energy_source != "timeline" and report.gpus != gpus:
        return {}
    return _energy_metrics(report.energy_j, report.window_s, report.output_tokens, gpus)


def _resimulate(
    dep: Deployment, workload: Workload, config: SchedulerConfig, seed: int, energy: bool
) -> dict[str, float]:
    result = simulate(deployment=dep, workload=workload, config=config, seed=seed)
    if not energy:
        return _metrics(result.summary())
    doc = result.to_dict()  # the summary plus its energy block, as the run folder holds it
    total_j, tokens = doc["energy"]["total_j"], int(doc["output_tokens"])
    return _metrics(doc) | _energy_metrics(total_j, doc["duration_s"], tokens, dep.num_gpus)


def _deployment(dc: DeploymentConfig) -> Deployment:
    """The run's deployment as its config (records.RunConfig) records it, overrides applied;
    every field that prices it (pp, profile values, power limit) is kept."""
    missing = [k for k, v in (("model", dc.catalog_name), ("gpu", dc.gpu)) if not v]
    if missing:
        raise _SkipRunError(f"config names no {missing[0]} (give it with --{missing[0]})")
    return price_deployment(dc)


def _scheduler(dc: DeploymentConfig) -> SchedulerConfig:
    """The recorded scheduler settings over SchedulerConfig's defaults."""
    known = set(SchedulerConfig.__dataclass_fields__)
    return SchedulerConfig(**{k: v for k, v in dc.scheduler.items() if k in known})


class _SkipRunError(Exception):
    """A run folder calibrate cannot use; the message says why."""


def _workload(cfg: Mapping[str, Any], root: Path) -> Workload:
    doc = cfg.get("workload")
    if isinstance(doc, Mapping):  # as `simulate` writes it
        return workload_from_dict({k: v for k, v in doc.items() if v is not None}, str(root), root)
    lengths = cfg.get("input_tokens"), cfg.get("output_tokens"), cfg.get("num_requests")
    if all(isinstance(v, int) for v in lengths):  # as `bench` writes it: fixed synthetic lengths
        return build_workload(
            input_tokens=cfg["input_tokens"],
            output_tokens=cfg["output_tokens"],
            rate_per_s=cfg.get("rate_per_s"),
            burstiness=float(cfg.get("burstiness") or 1.0),
            concurrency=cfg.get("concurrency"),
            num_requests=cfg["num_requests"],
        )
    raise _SkipRunError("no reproducible workload in config (fixed lengths and request count)")


def _run_row(root: Path, overrides: Mapping[str, Any]) -> Row:
    run = read_run(root)
    bench = run.config.get("bench")
    cfg = {**run.config, **(bench if isinstance(bench, Mapping) else {}), **overrides}
    if "model" in overrides:  # the model given names the catalog model to price
        cfg["catalog_model"] = None
    try:
        rc = RunConfig.from_dict(cfg, run.kind)
        dep = _deployment(rc.deployment)
        workload = _workload(cfg, root)
        sched = _scheduler(rc.deployment)
        seed = rc.seed or 0
    # a config of the wrong shape (a list for a table, text for a number): ConfigError,
    # TypeError or ValueError from the constructors; skipped with the reason, as a run
    # without a workload is
    except (ValueError, TypeError, ArithmeticError) as exc:
        raise _SkipRunError(str(exc)[:200]) from None
    measured = _metrics(summarize(run))
    if not measured:
        raise _SkipRunError("no completed requests")
    measured |= _measured_energy(run, dep.num_gpus)
    kind = "tokenprobe-sim" if run.kind == "simulated" else "measured"
    # a simulated run's figures come from the simulator, whatever engine preset it ran
    recorded = None if run.kind == "simulated" else rc.deployment.engine
    engine = str(overrides.get("engine") or recorded or kind)
    energy = "power_per_gpu" in measured
    predict = functools.partial(
        _resimulate, workload=workload, config=sched, seed=seed, energy=energy
    )
    source = f"run:{root.name}"
    label = f"{dep.model.name} {dep.gpu.name} tp{dep.tp} {workload.arrival.kind}"
    return Row(source, source, engine, label, dep, measured, predict, simulated=True)


def rows_from_run(directory: str | Path, overrides: Mapping[str, Any] | None = None) -> LoadResult:
    """Rows of one run folder (see the module docstring); SchemaError if it is not one.

    `overrides` fills in or replaces deployment fields the run did not record (a `bench` run
    knows the server's model name, not its GPU): model, gpu, tp, weight_dtype, kv_dtype, engine.
    """
    root = Path(directory)
    if names_a_file(root / PROFILE_CSV):
        return load_csv(root / PROFILE_CSV)
    if not names_a_file(root / CONFIG_FILE):
        raise SchemaError(str(root), f"neither a run folder ({CONFIG_FILE}) nor {PROFILE_CSV}")
    result = LoadResult()
    try:
        result.rows.append(_run_row(root, overrides or {}))
    except _SkipRunError as why:
        result.skipped[f"{root.name}: {why}"] += 1
    return result


def load_inputs(paths: list[str | Path], overrides: Mapping[str, Any] | None = None) -> LoadResult:
    """Rows of every CSV file and run folder given (`overrides`: see `rows_from_run`)."""
    out = LoadResult()
    for path in paths:
        p = Path(path)
        if names_a_file(p) and p.is_dir():
            out.extend(rows_from_run(p, overrides))
        elif names_a_file(p):  # a dangling link too: load_csv names it
            out.extend(load_csv(p))
        else:
            raise ConfigError("input", str(p), "a validation-schema CSV or a run folder")
    return out
