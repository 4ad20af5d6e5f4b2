"""The derivation of `cost.epbalance.EPLB_BALANCED_SHARE` from LMSYS's controlled pair.

LMSYS ran DeepSeek-V3 prefill on 4 x 8 H100 (EP32, 4,096-token prompts, 16,384 tokens a GPU,
DeepEP normal kernels, two-batch overlap, EPLB over 288 experts) twice: with the real routing,
50,302 tokens/s a node, and with "simulated perfect EPLB (random expert selection following
group-limited routing semantics)", 59,337 (lm-sys/lm-sys.github.io@2db4e4042b31f3c3c9f4f93068
ae80946d25a115:blog/2025-05-05-large-scale-ep.md, "Overall Throughput"). Random selection is
routing_skew 0 in this cost model; the real routing is the sglang profile's skew with the share
EPLB balances removed from its popularity variance. This script prices that prefill pass (the
row of benchmarks/data/deployments/lmsys_large_scale_ep_h100.csv, as validate_deployments
replays it) at routing_skew 0, unbalanced (share 0) and at the share that makes the step
59,337 / 50,302 = 1.180 times longer (bisection), and prints one JSON line.

Usage: python benchmarks/ep_imbalance.py
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import tokenprobe.cost.epbalance as epbalance
from deployment_replay import deployment
from ep_replay import ep_comm_for, gang_prefill_s
from tokenprobe.cost import EPLB_BALANCED_SHARE, ep_imbalance
from tokenprobe.model import get_model
from validate_deployments import load_rows
from validation_data import run_main

ROWS = Path(__file__).resolve().parent / "data" / "deployments" / "lmsys_large_scale_ep_h100.csv"
DEFAULT_TPS, PERFECT_TPS = 50_302, 59_337  # tokens/s a node (blog, "Overall Throughput")


@contextmanager
def _share(share: float) -> Iterator[None]:
    """The cost model with `share` for EPLB's balanced share of the popularity variance (the
    module constant ep_imbalance reads), restored after."""
    shipped = epbalance.EPLB_BALANCED_SHARE
    epbalance.EPLB_BALANCED_SHARE = share
    try:
        yield
    finally:
        epbalance.EPLB_BALANCED_SHARE = shipped


def main() -> int:
    row = next(r for r in load_rows([ROWS]) if r["phase"] == "prefill" and r["isl"] == "4096")
    experts = get_model(row["model_hf_id"]).moe
    ep = ep_comm_for(row, experts.num_experts if experts else None)
    dep = deployment(row, "profile", expert_parallel=True, attention_dp=True, ep_comm=ep)
    isl, prompts = int(row["isl"]), int(row["batch_size"])
    skew = dep.efficiency.routing_skew
    step_tokens = isl * prompts
    random = replace(dep, efficiency=replace(dep.efficiency, routing_skew=0.0))

    def step_s(share: float) -> float:
        with _share(share):
            return gang_prefill_s(dep, isl, prompts)

    def imbalance(share: float) -> float:
        with _share(share):
            return float(ep_imbalance(dep, step_tokens))

    perfect_s = gang_prefill_s(random, isl, prompts)
    target = PERFECT_TPS / DEFAULT_TPS
    lo, hi = 0.0, 1.0
    for _ in range(40):  # the step falls as the share rises
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if step_s(mid) / perfect_s > target else (lo, mid)
    share = (lo + hi) / 2
    out = {
        "benchmark": "ep_imbalance",
        "routing_skew": skew,
        "measured_step_ratio": target,
        "unbalanced_step_ratio": step_s(0.0) / perfect_s,
        "unbalanced_imbalance": imbalance(0.0),
        "random_routing_imbalance": ep_imbalance(random, step_tokens),
        "derived_share": share,
        "imbalance_at_derived_share": imbalance(share),
        "shipped_share": EPLB_BALANCED_SHARE,
        "shipped_step_ratio": step_s(EPLB_BALANCED_SHARE) / perfect_s,
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    run_main(main)
