"""Planning: what-if sensitivity (here) and capacity planning over the simulator (plan.py)."""

from __future__ import annotations

from tokenprobe.plan.whatif import RESOURCES, WhatIf, power_cap_curve, whatif

__all__ = ["RESOURCES", "WhatIf", "power_cap_curve", "whatif"]
