"""Planning: what-if sensitivity (here) and capacity planning over the simulator (plan.py)."""

from __future__ import annotations

from tokenprobe.plan.search import Plan, PlanRequest, candidates, fixed_lengths, plan
from tokenprobe.plan.whatif import METRICS, RESOURCES, WhatIf, power_cap_curve, whatif

__all__ = [
    "METRICS",
    "RESOURCES",
    "Plan",
    "PlanRequest",
    "WhatIf",
    "candidates",
    "fixed_lengths",
    "plan",
    "power_cap_curve",
    "whatif",
]
