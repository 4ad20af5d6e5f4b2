"""Host time under attention DP (cost/step.py `host_time_s`): each DP rank's scheduler steps only
its own sequences, in parallel, so an attention-DP step pays one rank's per-sequence host work,
and N equal ranks priced as one step agree with the gang step (cost/dpep.py) when that work is
not zero."""

from __future__ import annotations

import pytest

from tokenprobe.cost import BatchShape, Efficiency, gang_step, make_deployment, step_cost
from tokenprobe.cost.step import host_time_s

EFF = Efficiency(step_overhead_s=1e-3, seq_overhead_s=20e-6)
DP4 = make_deployment(
    "qwen3-30b-a3b", "h100-sxm", tp=4, expert_parallel=True, attention_dp=True, efficiency=EFF
)


def test_a_dp_step_pays_one_ranks_per_sequence_host_work() -> None:
    """128 sequences over 4 ranks: 1 ms + 32 x 20 us = 1.64 ms (not 1 ms + 128 x 20 us)."""
    assert host_time_s(DP4, BatchShape.decode(128, 1000)) == pytest.approx(1.64e-3, rel=1e-12)
    tp4 = make_deployment("qwen3-30b-a3b", "h100-sxm", tp=4, expert_parallel=True, efficiency=EFF)
    assert host_time_s(tp4, BatchShape.decode(128, 1000)) == pytest.approx(3.56e-3, rel=1e-12)


def test_equal_ranks_agree_with_the_gang_step_with_per_sequence_host_work() -> None:
    rank = BatchShape.decode(32, 1000)
    assert gang_step(DP4, [rank] * 4).time_s == pytest.approx(
        step_cost(DP4, BatchShape.decode(128, 1000)).time_s, rel=1e-12
    )
