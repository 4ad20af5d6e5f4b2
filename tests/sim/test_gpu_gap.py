"""The engine's CPU slice of a step is not GPU-busy (sim/gpu_gap.py, issue 19 item 5)."""

from __future__ import annotations

import pytest

from tokenprobe.cost import host_gap_power_w, make_deployment
from tokenprobe.sim import SchedulerConfig, build_workload, run_workload, simulate, simulate_fleet
from tokenprobe.sim.base import StepPlan
from tokenprobe.sim.gpu_gap import cost_gap_fn, split_step
from tokenprobe.sim.kv import BlockPool
from tokenprobe.workload import Arrival, Workload, fixed

from .helpers import IDLE_W, unit_step


def test_gap_power_is_idle_plus_clock_tree() -> None:
    # H100 SXM: idle 70 W; die range 0.8 x 0.796 pJ x 989.4 TFLOP/s = 630 W (TDP - idle);
    # b = 0.443 (PowerModel default) -> 70 + 0.443 x 630 = 349.1 W, no work energy
    dep = make_deployment("llama-3.1-8b", "h100-sxm")
    assert host_gap_power_w(dep) == pytest.approx(70 + 0.443 * 630, rel=2e-3)


def test_split_conserves_energy_and_respects_the_cap() -> None:
    # a 10 ms step of 5 J (500 W mean) with a 0.5 ms CPU slice at 352.9 W: the kernels get
    # (5 - 0.17645) / 0.0095 = 507.74 W and the step keeps its 5 J
    gap_s, gap_w, kernel_w, energy_j = split_step(0.010, 5.0, 0.0005, 352.9, 700.0)
    assert (gap_s, gap_w) == (0.0005, 352.9)
    assert kernel_w == pytest.approx((5 - 352.9 * 0.0005) / 0.0095)
    assert energy_j == pytest.approx(5.0)
    # under a 505 W limit the kernels hold at 505 W: 0.17645 + 505 x 0.0095 = 4.97395 J
    _, _, kernel_w, energy_j = split_step(0.010, 5.0, 0.0005, 352.9, 505.0)
    assert kernel_w == 505.0 and energy_j == pytest.approx(352.9 * 0.0005 + 505 * 0.0095)
    # a slice power above the step's mean is held at the mean (nothing goes negative)
    _, gap_w, kernel_w, energy_j = split_step(0.010, 1.0, 0.002, 352.9, 700.0)
    assert gap_w == kernel_w == pytest.approx(100.0) and energy_j == pytest.approx(1.0)


def test_cost_gap_is_the_host_time() -> None:
    # default efficiency: step_overhead_s 0.5 ms, seq_overhead_s 0 -> 0.5 ms whatever the batch;
    # a 2-GPU deployment draws twice the per-GPU slice power, up to 2 x 700 W
    dep = make_deployment("llama-3.1-8b", "h100-sxm", tp=2)
    gap_s, gap_w, max_w = cost_gap_fn(dep)(StepPlan(0, 0.0, 0, 16, 16 * 512))
    assert gap_s == pytest.approx(0.5e-3)
    assert gap_w == pytest.approx(2 * host_gap_power_w(dep)) and max_w == 1400.0


def test_engine_counts_only_kernels_as_busy() -> None:
    # one request of 32 in / 4 out in 1 s steps of 100 J (unit_step): 4 steps, 4 s of wall time;
    # a 0.25 s CPU slice at 20 W per step leaves 0.75 s of kernels at (100 - 5) / 0.75 W
    config = SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=512)
    pool = BlockPool(1000, config.block_size, config.prefix_caching)
    workload = Workload(Arrival("offline"), fixed(32, "input_tokens"), fixed(4, "output_tokens"), 1)
    result = run_workload(
        workload, unit_step, pool, config, idle_w=IDLE_W, gap_fn=lambda p: (0.25, 20.0, 1e9)
    )
    (record,) = result.records
    assert record.finish_s == 4.0  # the step's wall time is kept
    assert result.engine.busy_s == pytest.approx(4 * 0.75)
    assert result.to_dict()["busy_fraction"] == pytest.approx(0.75)
    assert result.engine.step_energy_j == pytest.approx(400.0)
    powers = [row[4] for row in result.engine.timeline.rows[:2]]
    assert powers == pytest.approx([20.0, 95.0 / 0.75])


def test_fleet_replicas_count_only_kernels_as_busy() -> None:
    # two replicas, each with 32 requests at t = 0: every replica steps back to back, so it is
    # busy all the time but each step's 0.5 ms CPU slice: busy = 1 - steps x 0.5 ms / duration
    dep = make_deployment("llama-3.1-8b", "h100-sxm")
    workload = build_workload(input_tokens=64, output_tokens=32, offline=True, num_requests=64)
    one = simulate("llama-3.1-8b", "h100-sxm", input_tokens=64, output_tokens=32,
                   offline=True, num_requests=32)  # fmt: skip
    single = one.to_dict()
    fleet = simulate_fleet(dep, workload, replicas=2).to_dict()
    expected = 1 - single["steps"] * 0.5e-3 / single["duration_s"]
    assert single["busy_fraction"] == pytest.approx(expected, abs=1e-3)
    for replica in fleet["per_replica"]:  # each replica is the single run (round robin)
        assert replica["busy_fraction"] == pytest.approx(expected, abs=1e-3)
