"""DecodeMemo and StepMemo against the exact cost model: decode grids within 1 %, fresh-prompt
mixed steps within 0.5 %, every other step exact."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tokenprobe.cost import make_deployment
from tokenprobe.sim.api import cost_step_fn
from tokenprobe.sim.base import StepPlan
from tokenprobe.sim.stepcache import DecodeMemo, StepMemo


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


# A sweep of fresh-prompt mixed steps (one whole prompt of p tokens beside n decoding sequences
# of mean context m) over deployments whose cost curves bend differently: dense, tensor-parallel
# (all-reduces), sliding-window attention, MoE (experts touched), a power limit (DVFS clock).
SWEEP_DEPLOYMENTS = [
    ("llama-3.1-8b", "h100-sxm", {}),
    ("llama-3.1-70b", "h100-sxm", {"tp": 4}),
    ("gemma-3-27b", "a100-sxm-80gb", {}),
    ("qwen3-30b-a3b", "h100-sxm", {}),
    ("mixtral-8x7b", "h100-sxm", {"tp": 2}),
    ("llama-3.1-8b", "h100-sxm", {"power_limit_w": 400.0}),
]


def _fresh(p: int, n: int, ctx: int) -> StepPlan:
    return StepPlan(p, p * (p + 1) / 2, 1, n, ctx)


@pytest.mark.parametrize(("model", "gpu", "kwargs"), SWEEP_DEPLOYMENTS)
def test_mixed_steps_within_half_a_percent(model: str, gpu: str, kwargs: dict[str, Any]) -> None:
    exact = cost_step_fn(make_deployment(model, gpu, **kwargs))
    memo = StepMemo(exact)
    rng = random.Random(2)
    worst = 0.0
    for _ in range(400):  # p from 1 to 8k tokens, n from 1 to 400 sequences, m from 1 to 32k
        p, n, m = int(2 ** rng.uniform(0, 13)), rng.randint(1, 400), int(2 ** rng.uniform(0, 15))
        plan = _fresh(p, n, n * m + rng.randint(0, n - 1))
        (t_exact, e_exact), (t_memo, e_memo) = exact(plan), memo(plan)
        worst = max(worst, abs(t_memo / t_exact - 1), abs(e_memo / e_exact - 1))
    assert worst < 0.005
    assert memo.mixed_calls == 400


def test_mixed_step_on_a_corner_is_exact_and_others_are_not_interpolated() -> None:
    exact = cost_step_fn(make_deployment("llama-3.1-8b", "h100-sxm"))
    memo = StepMemo(exact)
    # p = 512 = 2^9 is a corner (boxes of 512 / 16 = 32 tokens), n = 96 (boxes of 4), m = 640
    # (boxes of 64): every interpolation weight is 0, so the price is the corner's exact one
    on_corner = _fresh(512, 96, 96 * 640)
    assert memo(on_corner) == exact(on_corner)
    # a later chunk (computed 100 tokens before it), two prompts, a prefill-only step: exact
    for plan in (
        StepPlan(300, 300 * (100 + 301 / 2), 1, 20, 20 * 500),
        StepPlan(600, 300 * 301 / 2 * 2, 2, 20, 20 * 500),
        _fresh(300, 0, 0),
    ):
        assert memo(plan) == exact(plan)
    assert memo.mixed_calls == 1


def test_a_fresh_prompt_step_between_corners_interpolates() -> None:
    """Between corners the memo prices from the box (not the exact model), and still close:
    p = 500 lies between the corners 480 and 512, so the price is a blend, within 0.5 %."""
    calls: list[StepPlan] = []
    exact_fn = cost_step_fn(make_deployment("llama-3.1-8b", "h100-sxm"))

    def exact(plan: StepPlan) -> tuple[float, float]:
        calls.append(plan)
        return exact_fn(plan)

    memo = StepMemo(exact)
    plan = _fresh(500, 100, 100 * 700)
    t, e = memo(plan)
    assert plan not in calls  # priced from the 8 corners only
    assert len(calls) == 8
    t_exact, e_exact = exact_fn(plan)
    assert abs(t / t_exact - 1) < 0.005
    assert abs(e / e_exact - 1) < 0.005
    memo(_fresh(501, 101, 101 * 701))  # same box: no new exact evaluation
    assert len(calls) == 8
