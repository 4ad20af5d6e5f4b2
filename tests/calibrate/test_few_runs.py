"""Calibration from a user's own few runs (MISSION M5): three runs of a server bring its other
runs within the aims (median error throughput and time per output token under 15 %, TTFT under
25 %, energy per output token under 15 %), shown on simulated ground truth as a user runs it.

The "server" is the simulator with a hidden profile (its kernels slower than the defaults, a
3 ms scheduler step, a lower busy power): its runs are turned into what `bench` with telemetry
leaves (kind measured, the model, GPU and load recorded, no efficiencies), calibrated on three
closed-loop runs of one shape, and judged on four others it never saw (other lengths, a Poisson
rate, another concurrency). The shipped defaults miss the aims on the same runs, so the test
fails if calibration from runs stops fitting the time or the power parameters."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from tokenprobe.calibrate import few_runs, load_csv, pick
from tokenprobe.cli import calibrate as _calibrate  # noqa: F401  (registers the commands)
from tokenprobe.cli import simulate as _simulate  # noqa: F401
from tokenprobe.cli.app import app

runner = CliRunner()

HIDDEN = """\
[engine]
name = "the-users-server"
engine = "vllm"

[efficiency]
compute_prefill = 0.5
compute_decode = 0.45
memory = 0.62
attention_memory = 0.45
step_overhead_s = 0.003
request_overhead_s = 0.01

[power]
busy_power_fraction = 0.30
chip_flop_per_byte = 15.0
"""
CALIBRATION = {  # what a user would run first: one prompt shape at three concurrencies
    "c1": ["--input-tokens", "1024", "--output-tokens", "128", "--concurrency", "1"],
    "c8": ["--input-tokens", "1024", "--output-tokens", "128", "--concurrency", "8"],
    "c32": ["--input-tokens", "1024", "--output-tokens", "128", "--concurrency", "32"],
}
LATER = {  # the server's other runs
    "later-long": ["--input-tokens", "2048", "--output-tokens", "256", "--concurrency", "16"],
    "later-chat": ["--input-tokens", "256", "--output-tokens", "512", "--concurrency", "64"],
    "later-poisson": ["--input-tokens", "512", "--output-tokens", "64", "--rate", "8"],
    "later-rag": ["--input-tokens", "4096", "--output-tokens", "64", "--concurrency", "4"],
}
AIMS = {  # issue 18's aims, median absolute error
    "output_throughput": 0.15,
    "tpot_median": 0.15,
    "ttft_median": 0.25,
    "energy_per_output_token": 0.15,
}


def _as_measured(folder: Path) -> None:
    """What bench with telemetry knows: the deployment and the load, not the efficiencies."""
    path = folder / "config.json"
    doc = json.loads(path.read_text())
    doc["kind"] = "measured"
    for hidden in ("profile", "efficiency", "power"):
        doc["config"].pop(hidden)
    path.write_text(json.dumps(doc))


def _runs(tmp_path: Path) -> list[str]:
    (tmp_path / "hidden.toml").write_text(HIDDEN)
    folders = []
    for name, load in {**CALIBRATION, **LATER}.items():
        folder = tmp_path / name
        args = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--seed", "1"]
        args += ["--profile", str(tmp_path / "hidden.toml"), "--num-requests", "48"]
        result = runner.invoke(app, [*args, *load, "--out", str(folder)])
        assert result.exit_code == 0, result.output
        _as_measured(folder)
        folders.append(str(folder))
    return folders


def _held_errors(report: dict[str, Any], when: str) -> dict[str, float]:
    """Median absolute error per metric over the held-back runs (one row each)."""
    by_metric: dict[str, list[float]] = {}
    for e in report["errors"]:
        if e["set"] != "fitted":
            by_metric.setdefault(e["metric"], []).append(e[f"mdape_{when}_pct"] / 100)
    return {m: statistics.median(v) for m, v in by_metric.items()}


def test_three_runs_bring_the_servers_other_runs_within_the_aims(tmp_path: Path) -> None:
    folders = _runs(tmp_path)
    profile = tmp_path / "mine.toml"
    args = ["calibrate", *folders, "--holdout", "run:later-*", "--out", str(profile), "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["fitted_rows"] == len(CALIBRATION) and report["held_out_rows"] == len(LATER)
    before, after = _held_errors(report, "before"), _held_errors(report, "after")
    assert set(AIMS) <= set(after), after  # the energy metrics come from the runs' telemetry
    for metric, aim in AIMS.items():
        assert after[metric] < aim, (metric, after[metric])
    # the shipped defaults miss the aims on the same runs: the fit, not the data, brings them in
    assert any(before[m] > aim for m, aim in AIMS.items()), before
    assert before["power_per_gpu"] > 2 * after["power_per_gpu"], (before, after)
    # the profile written is the one a user then simulates with
    assert "[power]" in profile.read_text()


B200 = (
    Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "mlenergy_leaderboard_v3_b200.csv"
)


def test_pick_takes_the_lightest_middle_and_heaviest_run_and_keeps_the_rest() -> None:
    rows = load_csv(B200).rows
    series = [r for r in rows if r.run == rows[0].run]
    fitted, held = pick(series)
    loads = sorted(r.load for r in series)
    got = [r.load for r in fitted]
    assert loads[0] > 0 and got[0] == loads[0] and got[-1] == loads[-1] and len(fitted) == 3
    assert len(held) == len(series) - 3 and not {id(r) for r in held} & {id(r) for r in fitted}


def test_three_runs_of_a_public_server_improve_its_other_runs() -> None:
    """ML.ENERGY's B200 runs (held out of every fit in the shipped profiles): eight servers, each
    fitted on three of its batch sizes and judged on the rest. Pooled, the median error of time
    per output token falls (benchmarks/calibrate_few_runs.py gives
    the figures over all tables), and every metric ends within issue 18's aims. The shipped
    vllm-blackwell profile was fitted on two thirds of these runs, so a three-run fit has little
    left to gain and may trade a fraction of a point: each metric may end at most one point above
    where the shipped profile left it (merged cost model, 2026-12-01, shipped -> three-run fit:
    time per output token 14.9 -> 10.5 %, throughput 12.8 -> 11.9 %, energy 11.3 -> 11.6 %)."""
    rows = load_csv(B200).rows
    servers = sorted({r.run for r in rows})[:8]
    errors = few_runs([r for r in rows if r.run in servers])
    pairs = {m: v for per_metric in errors.values() for m, v in per_metric.items()}
    held = sum(n - 3 for n in (sum(r.run == s for r in rows) for s in servers) if n >= 6)
    assert len(pairs["itl_median"]) == held
    for metric, aim in (("itl_median", 0.15), ("output_throughput", 0.15),
                        ("energy_per_output_token", 0.15)):  # fmt: skip
        before = statistics.median(b for b, _ in pairs[metric])
        after = statistics.median(a for _, a in pairs[metric])
        assert after < aim and after < before + 0.01, (metric, before, after)
    itl_before = statistics.median(b for b, _ in pairs["itl_median"])
    assert statistics.median(a for _, a in pairs["itl_median"]) < itl_before


def test_a_run_whose_telemetry_misses_some_gpus_gives_no_energy_to_fit(tmp_path: Path) -> None:
    """Telemetry of one GPU of a TP2 run is not the deployment's energy: only times are fitted."""
    from tokenprobe.calibrate import rows_from_run
    from tokenprobe.records import TelemetrySample, read_run, write_run

    folder = tmp_path / "tp2"
    args = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tp", "2"]
    args += ["--input-tokens", "256", "--output-tokens", "32", "--concurrency", "4"]
    assert runner.invoke(app, [*args, "--num-requests", "8", "--out", str(folder)]).exit_code == 0
    run = read_run(folder)
    assert "power_per_gpu" in rows_from_run(folder).rows[0].measured  # the timeline: all GPUs
    end = run.records[-1].finish_s or 1.0
    run.telemetry = [
        TelemetrySample(t_s=t, gpu_index=0, power_w=400.0) for t in (0.0, end / 2, end)
    ]
    write_run(run, tmp_path / "one-gpu")
    measured = rows_from_run(tmp_path / "one-gpu").rows[0].measured
    assert "power_per_gpu" not in measured and "tpot_median" in measured
