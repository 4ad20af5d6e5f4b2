"""Shared helpers of the simulator tests: a simple step-time stand-in for the cost model."""

from __future__ import annotations

from tokenprobe.sim.base import StepPlan

STEP_POWER_W = 300.0
IDLE_W = 50.0


def linear_step(plan: StepPlan) -> tuple[float, float]:
    """A made-up but monotone step cost: 10 ms + 0.1 ms per token + attention per context token."""
    time_s = (
        0.01
        + 1e-4 * (plan.prefill_tokens + plan.decode_seqs)
        + 1e-7 * (plan.decode_context_tokens + plan.prefill_attn_pairs / 100)
    )
    return time_s, STEP_POWER_W * time_s


def unit_step(plan: StepPlan) -> tuple[float, float]:
    """Every step takes exactly 1 s and 100 J: times can be checked by hand."""
    return 1.0, 100.0
