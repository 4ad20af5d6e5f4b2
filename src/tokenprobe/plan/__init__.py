"""Planning: what-if sensitivity (whatif.py) and capacity planning over the simulator: the
searched candidates (candidate.py), the request (request.py), each deployment judged as a fleet
(fleet.py; speculative decoding as the simulator runs it) and the ranked plan (search.py)."""

from __future__ import annotations

from tokenprobe.plan.candidate import (
    AGGREGATED,
    ALL_SPLITS,
    NO_SPEC,
    Candidate,
    Outcome,
    candidates,
    ep_layouts,
    routers,
    spec_modes,
    split_modes,
)
from tokenprobe.plan.request import PlanRequest
from tokenprobe.plan.search import Plan, deployment_groups, fixed_lengths, plan
from tokenprobe.plan.whatif import METRICS, RESOURCES, WhatIf, power_cap_curve, whatif

__all__ = [
    "AGGREGATED",
    "ALL_SPLITS",
    "METRICS",
    "NO_SPEC",
    "RESOURCES",
    "Candidate",
    "Outcome",
    "Plan",
    "PlanRequest",
    "WhatIf",
    "candidates",
    "deployment_groups",
    "ep_layouts",
    "fixed_lengths",
    "plan",
    "power_cap_curve",
    "routers",
    "spec_modes",
    "split_modes",
    "whatif",
]
