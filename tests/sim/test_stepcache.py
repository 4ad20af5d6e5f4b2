"""DecodeMemo against the exact cost model: same prices within 1% on decode grids."""

from __future__ import annotations

import pytest

from tokenprobe.cost import make_deployment
from tokenprobe.sim.api import cost_step_fn
from tokenprobe.sim.base import StepPlan
from tokenprobe.sim.stepcache import DecodeMemo


@pytest.mark.parametrize(
    ("model", "gpu", "tp"),
    [
        ("llama-3.1-8b", "h100-sxm", 1),
        ("llama-3.1-70b", "h100-sxm", 4),
        ("gemma-3-27b", "a100-sxm-80gb", 1),
    ],
)
def test_interpolation_matches_exact_cost(model: str, gpu: str, tp: int) -> None:
    exact = cost_step_fn(make_deployment(model, gpu, tp=tp))
    memo = DecodeMemo(exact)
    worst = 0.0
    for n in (1, 3, 17, 64, 255):
        for mean_ctx in (5, 100, 777, 4097, 30011):
            plan = StepPlan(0, 0.0, 0, n, n * mean_ctx + 7)
            (t_exact, e_exact), (t_memo, e_memo) = exact(plan), memo(plan)
            worst = max(worst, abs(t_memo / t_exact - 1), abs(e_memo / e_exact - 1))
    assert worst < 0.01
    assert memo.exact_calls < memo.calls * 2  # it did go through the memo


def test_prefill_steps_are_exact() -> None:
    exact = cost_step_fn(make_deployment("llama-3.1-8b", "h100-sxm"))
    memo = DecodeMemo(exact)
    plan = StepPlan(300, 300 * 150.5, 1, 20, 20 * 500)
    assert memo(plan) == exact(plan)
