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
import math
from dataclasses import replace
from pathlib import Path

from deployment_replay import deployment
from ep_replay import ep_comm_for, gang_prefill_s
from tokenprobe.cost import EPLB_BALANCED_SHARE, Deployment, ep_imbalance
from tokenprobe.model import get_model
from validate_deployments import load_rows
from validation_data import run_main

ROWS = Path(__file__).resolve().parent / "data" / "deployments" / "lmsys_large_scale_ep_h100.csv"
DEFAULT_TPS, PERFECT_TPS = 50_302, 59_337  # tokens/s a node (blog, "Overall Throughput")


def _at_share(dep: Deployment, skew: float, share: float) -> Deployment:
    """`dep` whose popularity variance is (1 − share) of `skew`'s: the shipped share is applied
    by ep_imbalance (EPLB is on), so the skew is set to give (1 − share) / (1 − shipped)."""
    cv2 = math.expm1(skew * skew) * (1.0 - share) / (1.0 - EPLB_BALANCED_SHARE)
    return replace(dep, efficiency=replace(dep.efficiency, routing_skew=math.sqrt(math.log1p(cv2))))


def main() -> int:
    row = next(r for r in load_rows([ROWS]) if r["phase"] == "prefill" and r["isl"] == "4096")
    experts = get_model(row["model_hf_id"]).moe
    ep = ep_comm_for(row, experts.num_experts if experts else None)
    dep = deployment(row, "profile", expert_parallel=True, attention_dp=True, ep_comm=ep)
    isl, prompts = int(row["isl"]), int(row["batch_size"])
    skew = dep.efficiency.routing_skew
    step_tokens = isl * prompts

    def step_s(share: float) -> float:
        return gang_prefill_s(_at_share(dep, skew, share), isl, prompts)

    perfect_s = gang_prefill_s(replace(dep, efficiency=replace(dep.efficiency, routing_skew=0.0)),
                               isl, prompts)  # fmt: skip
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
        "unbalanced_imbalance": ep_imbalance(_at_share(dep, skew, 0.0), step_tokens),
        "random_routing_imbalance": ep_imbalance(
            replace(dep, efficiency=replace(dep.efficiency, routing_skew=0.0)), step_tokens
        ),
        "derived_share": share,
        "imbalance_at_derived_share": ep_imbalance(_at_share(dep, skew, share), step_tokens),
        "shipped_share": EPLB_BALANCED_SHARE,
        "shipped_step_ratio": step_s(EPLB_BALANCED_SHARE) / perfect_s,
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    run_main(main)
