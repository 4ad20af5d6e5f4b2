"""Accuracy of the estimator against the public measurements of the validation folder.

Also against the public online-serving measurements collected in benchmarks/data (SGLang, vLLM
0.10-0.13 and TensorRT-LLM 1.x `bench serve` runs; see its README), replayed through the serving
simulator (`tokenprobe.calibrate.serving`); `--no-extra` leaves them out.

Every usable row is mapped to a prediction by `tokenprobe.calibrate.observations` (the mappings
and their assumptions are documented there; `calibrate` uses the same code). For each source and
metric it prints the median absolute percentage error (MdAPE) and median signed error (bias) with
the model's default parameters and with the shipped profile that prices the row's engine on its
GPU's vendor (`calibrate.select_profile`, e.g. vLLM on MI300X -> `vllm-rocm`; rows of an engine
without a profile keep the defaults), then the errors by profile on the sources in and out of
its fit, then each profile's own record of its fit (fitted vs held-out, before -> after). Rows
that cannot be run are counted by reason. Last, unless --no-deployments, the public runs of PD
disaggregation, DP-attention + EP and speculative decoding in benchmarks/data/deployments are
replayed (benchmarks/validate_deployments.py; --deployments NAME selects files, else --only does),
and the data-parallel rows skipped above through the DP+EP simulator
(benchmarks/validate_dp_rows.py).

The validation folder is `--data-dir DIR`, else $TOKENPROBE_VALIDATION_DIR, else
`../shared/validation` beside the repository root (benchmarks/validation_data.py; a clone without
it gets one line saying where the data is expected, exit 2). docs/accuracy.md holds the figures.

Usage: python benchmarks/validate.py [--data-dir DIR] [--only NAME ...] [--no-sim] [--no-extra]
[--deployments NAME ...] [--no-deployments]
[--rows] [--efficiency K=V ...]; prints tables, then one JSON line with every figure (stdout).
On a terminal, stderr shows rows done and an ETA (the whole run takes ~8 min on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import validate_deployments
import validate_dp_rows
import validate_inferencemax
import validate_power
from tokenprobe.calibrate import (
    GroupError,
    Observation,
    Row,
    load_csv,
    load_profile,
    observe,
    profile_of,
    shipped_profiles,
    summarize,
)
from tokenprobe.calibrate.observations import LoadResult
from tokenprobe.cost import DEFAULT_EFFICIENCY, DEFAULT_POWER, Efficiency, PowerModel
from tokenprobe.errors import TokenprobeError
from validation_data import Progress, bias_pct, mdape_pct, require, run_main

CSVS = (
    "argonne_llm_inference_bench.csv",
    "trtllm_v0.9.0_static_batch.csv",
    "mlenergy_leaderboard_v3_h100.csv",
    "trtllm_v0.14_throughput.csv",
)
SIMULATED = ("trtllm_v0.14_throughput.csv",)  # each row is a simulated offline run
EXTRA_DIR = Path(__file__).resolve().parent / "data"


def with_defaults(
    rows: Sequence[Row], eff: Efficiency, power: PowerModel, progress: Progress
) -> list[Observation]:
    """Each row predicted with the default parameters (row by row, for the progress line)."""
    out: list[Observation] = []
    for row in rows:
        out.extend(observe([row], eff, power))
        progress.step()
    return out


def with_profiles(
    rows: Sequence[Row], progress: Progress
) -> tuple[list[Observation], list[str | None]]:
    """Each row predicted with its shipped profile (defaults where none ships), and the
    profile's name beside each observation."""
    out: list[Observation] = []
    names: list[str | None] = []
    for row in rows:
        name = profile_of(row)
        if name is not None:
            p = load_profile(name)
            obs = observe([row], p.efficiency, p.power)
        else:
            obs = observe([row])
        out.extend(obs)
        names.extend([name] * len(obs))
        progress.step()
    return out, names


def _table(default: list[GroupError], profiled: list[GroupError]) -> list[dict[str, Any]]:
    table = []
    for d, p in zip(default, profiled, strict=True):
        table.append(
            {
                **d.to_dict(),
                "profile_mdape_pct": round(100 * p.mdape, 1),
                "profile_median_signed_pct": round(100 * p.bias, 1),
            }
        )
    return table


def _print(table: list[dict[str, Any]]) -> None:
    print(f"{'source':22} {'metric':24} {'rows':>5} {'default':>8} {'bias':>7} "
          f"{'profile':>8} {'bias':>7}")  # fmt: skip
    for r in table:
        print(
            f"{r['source']:22} {r['metric']:24} {r['rows']:5d} {r['mdape_pct']:7.1f}% "
            f"{r['median_signed_pct']:+6.1f}% {r['profile_mdape_pct']:7.1f}% "
            f"{r['profile_median_signed_pct']:+6.1f}%"
        )


# the accuracy aims are per kind of metric, pooled over sources
KINDS = {
    "decode time per token": ("itl_median", "tpot_median", "decode_step_s"),
    "throughput": ("total_throughput", "throughput_per_gpu", "output_throughput"),
    "TTFT": ("ttft", "ttft_median", "prefill_s"),
    "static batch latency": ("batch_latency",),
    "energy per token": ("energy_per_output_token",),
    "power": ("power_total", "power_per_gpu"),
}


def _by_kind(default: list[Observation], profiled: list[Observation]) -> list[dict[str, Any]]:
    print(f"\n{'all sources, by kind':34} {'rows':>5} {'default':>8} {'profile':>8}")
    out = []
    for kind, metrics in KINDS.items():
        d = [abs(o.error) for o in default if o.metric in metrics]
        p = [abs(o.error) for o in profiled if o.metric in metrics]
        if not d:
            continue
        row = {
            "kind": kind,
            "rows": len(d),
            "mdape_pct": round(100 * statistics.median(d), 1),
            "profile_mdape_pct": round(100 * statistics.median(p), 1),
        }
        print(f"{kind:34} {len(d):5d} {row['mdape_pct']:7.1f}% {row['profile_mdape_pct']:7.1f}%")
        out.append(row)
    return out


# ---- energy transfer across GPUs (issue 18 item 4: the power model is fitted on H100 rows only,
# fit_profiles.POWER_FIT_GPUS; every other GPU's energy and power rows are predicted without
# refitting, with the shipped profile of the row's engine)
ENERGY_FIT_GPUS = ("h100-sxm",)
ENERGY_KINDS = {
    "energy/output token": ("energy_per_output_token",),
    "power": ("power_total", "power_per_gpu"),
}


def _energy_by_gpu(rows: Sequence[Row], profiled: list[Observation]) -> list[dict[str, Any]]:
    """MdAPE and median signed error of energy per output token and of power, per GPU."""
    gpu_of = {r.run: r.deployment.gpu.name for r in rows}
    groups: dict[tuple[str, str], list[float]] = {}
    for o in profiled:
        for kind, metrics in ENERGY_KINDS.items():
            if o.metric in metrics:
                groups.setdefault((gpu_of[o.run], kind), []).append(o.error)
    print(f"\nenergy by GPU (shipped profiles; power fitted on {', '.join(ENERGY_FIT_GPUS)} only)")
    print(f"{'gpu':16} {'set':12} {'metric':20} {'rows':>5} {'MdAPE':>7} {'bias':>7}")
    out = []
    for (gpu, kind), errors in sorted(groups.items()):
        row = {
            "gpu": gpu,
            "set": "fitted" if gpu in ENERGY_FIT_GPUS else "transferred",
            "metric": kind,
            "rows": len(errors),
            "mdape_pct": mdape_pct(errors),
            "median_signed_pct": bias_pct(errors),
        }
        print(f"{gpu:16} {row['set']:12} {kind:20} {len(errors):5d} {row['mdape_pct']:6.1f}% "
              f"{row['median_signed_pct']:+6.1f}%")  # fmt: skip
        out.append(row)
    return out


# ---- errors by profile (engine + era + vendor), fitted vs held-out sources ----------------


def _by_profile(
    default: list[Observation], profiled: list[Observation], names: list[str | None]
) -> list[dict[str, Any]]:
    """MdAPE per shipped profile, kind of metric and set: rows of the sources in the profile's
    fit (`fitted_on`) vs the rest it prices (held out of its fit: other sources, versions or
    GPUs). Runs held out inside a fitted source count as fitted here; each profile's own record
    (printed next) has the exact split."""
    print(f"\n{'by profile (default -> profile)':16} {'set':9} {'kind':22} {'rows':>5} "
          f"{'default':>8} {'profile':>8}")  # fmt: skip
    out = []
    for name in sorted({n for n in names if n is not None}):
        fitted_on = set(load_profile(name).fitted_on)
        for kind, metrics in KINDS.items():
            for part in ("fitted", "held_out"):
                pairs = [
                    (abs(d.error), abs(p.error))
                    for d, p, n in zip(default, profiled, names, strict=True)
                    if n == name
                    and p.metric in metrics
                    and (p.source in fitted_on) == (part == "fitted")
                ]
                if not pairs:
                    continue
                row = {
                    "profile": name,
                    "set": part,
                    "kind": kind,
                    "rows": len(pairs),
                    "mdape_pct": round(100 * statistics.median(d for d, _ in pairs), 1),
                    "profile_mdape_pct": round(100 * statistics.median(p for _, p in pairs), 1),
                }
                print(f"{name:16} {part:9} {kind:22} {len(pairs):5d} "
                      f"{row['mdape_pct']:7.1f}% {row['profile_mdape_pct']:7.1f}%")  # fmt: skip
                out.append(row)
    return out


def _fit_records() -> list[dict[str, Any]]:
    out = []
    print("\nshipped profiles, as fitted (MdAPE before -> after):")
    for name in shipped_profiles():
        p = load_profile(name)
        for e in p.errors:
            print(f"  {name:13} {e.set:9} {e.source:22} {e.metric:24} {e.rows:5d} "
                  f"{e.mdape_before_pct:6.1f}% -> {e.mdape_after_pct:6.1f}%")  # fmt: skip
            out.append({"profile": name, **e.__dict__})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data-dir",
        "--validation-dir",
        dest="data_dir",
        type=Path,
        default=None,
        help="folder of the validation CSVs (default: $TOKENPROBE_VALIDATION_DIR, else "
        "../shared/validation beside the repository)",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help="only the CSVs whose file name contains NAME (repeatable; also filters "
        "benchmarks/data), e.g. --only trtllm_v0.9",
    )
    parser.add_argument("--rows", action="store_true", help="print every row's error")
    parser.add_argument(
        "--no-sim",
        action="store_true",
        help="skip the TensorRT-LLM v0.14 max-throughput rows (simulated, ~5 min)",
    )
    parser.add_argument(
        "--no-extra", action="store_true", help="leave out the serving runs in benchmarks/data"
    )
    parser.add_argument(
        "--deployments",
        action="append",
        default=[],
        metavar="NAME",
        help="only the deployment CSVs (benchmarks/data/deployments) whose name contains NAME "
        "(default: those --only selects, all without --only); see validate_deployments.py",
    )
    parser.add_argument(
        "--no-deployments", action="store_true", help="leave out the deployment replays"
    )
    parser.add_argument(
        "--efficiency",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a default efficiency parameter (what-if; profiles are unaffected)",
    )
    args = parser.parse_args(argv)
    try:
        return run(args)
    except TokenprobeError as exc:  # a bad CSV or --efficiency value: one line, not a traceback
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _wanted(name: str, only: Sequence[str]) -> bool:
    return not only or any(part in name for part in only)


def _load(args: argparse.Namespace) -> LoadResult:
    """Rows of the selected validation CSVs and (unless --no-extra) of benchmarks/data."""
    names = [n for n in CSVS if _wanted(n, args.only) and not (args.no_sim and n in SIMULATED)]
    extra = [] if args.no_extra else sorted(EXTRA_DIR.glob("*.csv"))
    extra = [p for p in extra if _wanted(p.name, args.only)]
    if not names and not extra:
        known = ", ".join([*CSVS, *(p.name for p in sorted(EXTRA_DIR.glob("*.csv")))])
        print(f"error: --only {' '.join(args.only)} matches none of: {known}", file=sys.stderr)
        raise SystemExit(2)
    data = LoadResult()
    if names:  # only benchmarks/data selected: the validation folder is not needed
        folder = require(args.data_dir, names or list(CSVS), need_all=False)
        for name in names:
            if (folder / name).is_file():
                data.extend(load_csv(folder / name))
    for path in extra:
        data.extend(load_csv(path))
    return data


def _overrides(items: Sequence[str]) -> dict[str, float]:
    out = {}
    for item in items:
        key, _, value = item.partition("=")
        try:
            out[key] = float(value)
        except ValueError:
            print(f"error: --efficiency {item!r}: expected KEY=NUMBER", file=sys.stderr)
            raise SystemExit(2) from None
    return out


def run(args: argparse.Namespace) -> int:
    eff: Efficiency = DEFAULT_EFFICIENCY.with_overrides(_overrides(args.efficiency))
    data = _load(args)
    progress = Progress(2 * len(data.rows), "validate (defaults, then shipped profiles)")
    default = with_defaults(data.rows, eff, DEFAULT_POWER, progress)
    profiled, names = with_profiles(data.rows, progress)
    progress.close()
    if args.rows:
        for c in sorted(default, key=lambda c: (c.source, c.metric, c.error)):
            print(f"{c.source:22} {c.metric:24} {100 * c.error:+7.1f}%  {c.engine:13} {c.label}")
    table = _table(summarize(default), summarize(profiled))
    _print(table)
    kinds = _by_kind(default, profiled)
    energy = _energy_by_gpu(data.rows, profiled)
    energy_groups = validate_power.energy_by_group(data.rows, profiled)
    energy_gpus = validate_power.energy_by_group(data.rows, profiled, validate_power.gpu_count)
    by_profile = _by_profile(default, profiled, names)
    records = _fit_records()
    # issue 18: InferenceMAX's single-node rows (held out of every fit), per configuration group
    inferencemax = None
    if any(o.source.startswith(validate_inferencemax.SOURCE_ID) for o in profiled):
        inferencemax = validate_inferencemax.section(profiled)
    print(f"skipped rows: {sum(data.skipped.values())}")
    for reason, n in data.skipped.most_common():
        print(f"  {n:5d}  {reason}")
    # issue 17: PD disaggregation, DP-attention + EP and speculative decoding, replayed
    deployments = dp_rows = None
    if not args.no_deployments:
        deployments = validate_deployments.section(args.deployments or args.only)
        # the data-parallel rows skipped above, through the DP+EP simulator (held out)
        dp_rows = validate_dp_rows.section(args.only)
    print(
        json.dumps(
            {
                "benchmark": "validate_estimator",
                "metrics": table,
                "by_kind": kinds,
                "energy_by_gpu": energy,
                "energy_by_group": energy_groups,
                "energy_by_gpu_count": energy_gpus,
                "by_profile": by_profile,
                "profile_fits": records,
                "skipped": dict(data.skipped),
                "deployments": deployments,
                "dp_rows": dp_rows,
                "inferencemax": inferencemax,
            }
        )
    )
    return 0


if __name__ == "__main__":
    run_main(main)
