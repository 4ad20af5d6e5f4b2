"""The cost model's view of a run: where a step's time goes (compute / memory / communication /
overhead) for the run's own mix of steps, when the run names a catalog model and GPU.

Steps are taken from the simulator's timeline (busy steps split into those with prefill tokens
and decode-only ones; each group priced at its time-weighted mean shape) or, for a run without a
timeline, from the records: one decode step at the mean number of requests in flight (Little's
law: Σ E2E / window) and one prefill of the mean prompt. The shares are the groups' shares
weighted by their time. This stands in for NVML's memory utilization on simulated runs, and gives
`--predict` its communication share.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenprobe.cost import BatchShape, Deployment, step_cost
from tokenprobe.errors import SchemaError, TokenprobeError
from tokenprobe.records import Run, RunConfig
from tokenprobe.sim import price_deployment

SHARE_KEYS = ("compute", "memory", "communication", "overhead")


@dataclass(frozen=True)
class CostView:
    deployment: Deployment
    shares: dict[str, float]  # time-weighted over the run's steps, sums to 1
    decode_batch: float  # mean sequences per decode step
    source: str  # "timeline" or "records"


def deployment_of(run: Run, notes: list[str]) -> Deployment | None:
    """The run config's deployment (records.RunConfig: everything that prices it, the power
    limit and profile included), or None (with a note) when it names no catalog model/GPU."""
    try:
        dc = RunConfig.of(run).deployment
    except SchemaError as exc:
        notes.append(f"no cost-model view: {exc}")
        return None
    if dc.catalog_name is None or dc.gpu is None:
        notes.append(
            "the run config names no catalog model and GPU (bench --gpu, --catalog-model): "
            "no cost-model view"
        )
        return None
    try:
        return price_deployment(dc)
    except TokenprobeError as exc:
        notes.append(f"no cost-model view: {exc}")
        return None


def _means(run: Run) -> tuple[float, float]:
    ok = [r for r in run.records if r.ok and r.first_token_s is not None]
    if not ok:
        return 0.0, 0.0
    return float(np.mean([r.input_tokens for r in ok])), float(
        np.mean([r.output_tokens for r in ok])
    )


def _shape(
    prefill_tokens: float, decode_seqs: float, mean_in: float, mean_out: float
) -> BatchShape:
    seqs = max(1, round(prefill_tokens / mean_in)) if prefill_tokens > 0 and mean_in > 0 else 0
    per_seq = prefill_tokens / seqs if seqs else 0.0
    context = mean_in + mean_out / 2
    return BatchShape(
        prefill_tokens=round(prefill_tokens),
        prefill_attn_pairs=seqs * per_seq * (per_seq + 1) / 2,
        prefill_seqs=seqs,
        decode_seqs=round(decode_seqs),
        decode_context_tokens=round(decode_seqs * context),
    )


def _groups_from_timeline(run: Run, end_s: float) -> list[tuple[float, float, float]]:
    """(time_s, mean prefill tokens, mean decode seqs) of prefill steps and decode-only steps."""
    tl = run.timeline
    t = np.array([p.t_s for p in tl])
    dt = np.diff(np.append(t, end_s))
    pre = np.array([p.prefill_tokens for p in tl], dtype=float)
    dec = np.array([p.decode_seqs for p in tl], dtype=float)
    busy = np.array([p.batch_size > 0 for p in tl])
    groups = []
    for mask in (busy & (pre > 0), busy & (pre == 0)):
        time_s = float(dt[mask].sum())
        if time_s > 0:
            w = dt[mask]
            groups.append(
                (
                    time_s,
                    float(np.average(pre[mask], weights=w)),
                    float(np.average(dec[mask], weights=w)),
                )
            )
    return groups


def _groups_from_records(
    run: Run, end_s: float, mean_in: float
) -> list[tuple[float, float, float]]:
    e2e = [r.e2e_s for r in run.records if r.ok and r.e2e_s is not None]
    ttft = [r.ttft_s for r in run.records if r.ok and r.ttft_s is not None]
    if not e2e or end_s <= 0:
        return []
    in_flight = max(sum(e2e) / end_s, 1.0)
    decode_s = max(sum(e2e) - sum(ttft), 0.0)
    return [(sum(ttft), mean_in, 0.0), (decode_s, 0.0, in_flight)]


def cost_view(run: Run, end_s: float, notes: list[str]) -> CostView | None:
    dep = deployment_of(run, notes)
    if dep is None:
        return None
    mean_in, mean_out = _means(run)
    source = "timeline" if run.timeline else "records"
    groups = (
        _groups_from_timeline(run, end_s)
        if run.timeline
        else _groups_from_records(run, end_s, mean_in)
    )
    total = sum(g[0] for g in groups)
    if total <= 0:
        notes.append("no busy steps to price: no cost-model view")
        return None
    shares = dict.fromkeys(SHARE_KEYS, 0.0)
    decode_batch = 0.0
    for time_s, pre, dec in groups:
        if pre <= 0 and dec <= 0:
            continue
        cost = step_cost(dep, _shape(pre, dec, mean_in, mean_out)).shares()
        for key in SHARE_KEYS:
            shares[key] += cost[key] * time_s / total
        if pre <= 0:
            decode_batch = dec
    return CostView(dep, shares, decode_batch, source)
