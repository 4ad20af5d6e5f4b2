"""Measured vs predicted (`tokenprobe diagnose --predict`): the run's TTFT, TPOT and J/token
beside the cost model's prediction for the same model, GPU and load.

The load is taken from the run: mean prompt and output lengths of the successful requests, and
the mean number of requests in flight (Little's law, Σ E2E / window), rounded, as the decode batch.
Predicted TTFT is one prompt's prefill alone (`estimate(batch=1)`): under continuous batching a
new request's prefill is scheduled within a step or two, and queueing, which the estimate does not
model, then shows as a measured/predicted ratio above 1. Predicted TPOT and J/token (all energy /
output tokens) come from `estimate(batch=B)`. Measured: p50 TTFT and TPOT of the records, and the
energy join's run energy / output tokens.

A run that names no catalog model and GPU in its config (e.g. SmolLM2 on a CPU through
`tokenprobe bench`) has no prediction; the comparison then carries only a note.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tokenprobe.cost import Workload, estimate_deployment
from tokenprobe.diagnose.costview import deployment_of
from tokenprobe.diagnose.findings import Finding
from tokenprobe.energy_join import EnergyReport
from tokenprobe.errors import TokenprobeError
from tokenprobe.records import Run, RunConfig
from tokenprobe.sim import spec_decode_of

MISMATCH_FACTOR = 2.0


def _load(run: Run, window_s: float) -> tuple[int, int, int] | None:
    ok = [r for r in run.records if r.ok and r.e2e_s is not None and r.output_tokens >= 2]
    if not ok or window_s <= 0:
        return None
    mean_in = round(float(np.mean([r.input_tokens for r in ok])))
    mean_out = round(float(np.mean([r.output_tokens for r in ok])))
    in_flight = sum(r.e2e_s or 0.0 for r in ok) / window_s
    return max(mean_in, 1), max(mean_out, 2), max(round(in_flight), 1)


def _p50(values: list[float]) -> float | None:
    return float(np.median(values)) if values else None


def compare(run: Run, window_s: float, energy: EnergyReport | None) -> dict[str, Any]:
    """{"rows": [{metric, measured, predicted, ratio}], "load": ..., "notes": [...]}."""
    notes: list[str] = []
    dep = deployment_of(run, notes)
    load = _load(run, window_s)
    if dep is None or load is None:
        if load is None:
            notes.append("no successful request with two or more output tokens")
        return {"rows": [], "load": None, "notes": notes}
    mean_in, mean_out, batch = load
    try:
        spec = spec_decode_of(RunConfig.of(run).deployment)  # a simulated run's speculation
        single = estimate_deployment(dep, Workload(mean_in, mean_out, 1), spec=spec)
        loaded = estimate_deployment(dep, Workload(mean_in, mean_out, batch), spec=spec)
    except TokenprobeError as exc:
        return {"rows": [], "load": None, "notes": [f"no prediction: {exc}"]}
    ok = [r for r in run.records if r.ok]
    output_tokens = sum(r.output_tokens for r in ok)
    measured_j = energy.energy_j / output_tokens if energy is not None and output_tokens else None
    if energy is None:
        notes.append("no power samples: J/token is not measured")
    rows = [
        _row("ttft_s", _p50([r.ttft_s for r in ok if r.ttft_s is not None]), single.ttft_s),
        _row("tpot_s", _p50([r.tpot_s for r in ok if r.tpot_s is not None]), loaded.tpot_s),
        _row(
            "joules_per_output_token",
            measured_j,
            loaded.energy()["joules_per_token_all_in"],
        ),
    ]
    return {
        "rows": rows,
        "load": {"input_tokens": mean_in, "output_tokens": mean_out, "batch": batch},
        "deployment": f"{dep.model.name} on {dep.num_gpus}x {dep.gpu.name}",
        "notes": notes,
    }


def _row(metric: str, measured: float | None, predicted: float | None) -> dict[str, Any]:
    ratio = measured / predicted if measured is not None and predicted else None
    return {"metric": metric, "measured": measured, "predicted": predicted, "ratio": ratio}


def mismatch_finding(comparison: dict[str, Any]) -> Finding | None:
    """A finding when a measured figure is more than MISMATCH_FACTOR off its prediction."""
    off = [
        row
        for row in comparison.get("rows", [])
        if row["ratio"] is not None and not 1 / MISMATCH_FACTOR <= row["ratio"] <= MISMATCH_FACTOR
    ]
    if not off:
        return None
    text = ", ".join(f"{row['metric']} {row['ratio']:.2f}x" for row in off)
    return Finding(
        "prediction-mismatch",
        "info",
        f"Measured vs predicted: {text} the cost model's figure for the same model, GPU and load",
        {f"{row['metric']}_ratio": round(row["ratio"], 3) for row in off},
        "Above 1: something the model leaves out costs time (queueing, CPU, scheduling, "
        "throttling, a slower kernel); below 1: the model is pessimistic for this engine, "
        "calibrate it (`tokenprobe calibrate`).",
    )
