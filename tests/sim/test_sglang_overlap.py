"""SGLang 0.4's overlap loop on a plain TP server (sim/sglang_overlap.py): a step takes the
longer of its GPU and host parts, not their sum; the --enable-dp-attention ranks keep the sum."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tokenprobe.cost import (
    BatchShape,
    Efficiency,
    host_gap_power_w,
    make_deployment,
    step_time_energy,
)
from tokenprobe.hardware import get_gpu
from tokenprobe.sim import SchedulerConfig, engine_defaults, sglang_04_scheduler, simulate
from tokenprobe.sim.sglang_overlap import overlapped_step_fn
from tokenprobe.workload import Arrival, Workload, fixed

DEP = make_deployment("llama-3.1-8b", "h100-sxm")
SHAPE = BatchShape(decode_seqs=8, decode_context_tokens=8 * 512)


def _priced(shape: object) -> tuple[float, float]:
    return step_time_energy(DEP_H, shape)  # type: ignore[arg-type]


DEP_H = replace(DEP, efficiency=Efficiency(step_overhead_s=0.002, seq_overhead_s=0.0))


def test_host_time_hides_under_a_longer_gpu_part_by_hand() -> None:
    """Host 2 ms a step (step_overhead_s, no per-sequence part): priced t = g + 2 ms, overlapped
    g = t - 2 ms as long as g >= 2 ms; the GPUs' host-gap power over those 2 ms leaves the
    energy with them."""
    t, e = _priced(SHAPE)
    assert t > 0.004  # g > 2 ms: the whole host part hides
    t2, e2 = overlapped_step_fn(DEP_H, _priced)(SHAPE)  # type: ignore[arg-type]
    assert t2 == pytest.approx(t - 0.002)
    assert e2 == pytest.approx(e - host_gap_power_w(DEP_H) * DEP_H.num_gpus * 0.002)


def test_a_host_bound_step_takes_the_host_time() -> None:
    """Host 5 s, GPU milliseconds: the step lasts the host's 5 s (max(g, h))."""
    dep = replace(DEP, efficiency=Efficiency(step_overhead_s=5.0))
    t, _ = step_time_energy(dep, SHAPE)
    t2, _ = overlapped_step_fn(dep, lambda p: step_time_energy(dep, p))(SHAPE)  # type: ignore[arg-type]
    assert t - 5.0 < 5.0  # the GPU part is shorter than the host part
    assert t2 == pytest.approx(5.0)


def test_only_the_plain_tp_server_of_0_4_overlaps_and_both_run_lpm() -> None:
    gpu = get_gpu("h200")
    base = engine_defaults("sglang", gpu, 8)
    assert not base.overlap_schedule  # SGLang 0.5's profile was fitted without it
    assert sglang_04_scheduler(base, gpu, dp_attention=False, chunk_flag=False).overlap_schedule
    assert not sglang_04_scheduler(base, gpu, dp_attention=True, chunk_flag=False).overlap_schedule
    # and both order their queue by lpm, 0.4's server_args.py default (sim/sglang_scheduler.py)
    for dp in (False, True):
        config = sglang_04_scheduler(base, gpu, dp_attention=dp, chunk_flag=False)
        assert config.schedule_policy == "lpm"
    assert base.schedule_policy == "fcfs"


def test_an_overlapped_run_ends_sooner_by_its_hidden_host_time() -> None:
    """Four requests decoded together: every step hides 2 ms, so the overlapped run is shorter
    than the plain one by 2 ms a step (the same steps: the schedule does not depend on time)."""
    workload = Workload(
        Arrival("offline"), fixed(64, "input_tokens"), fixed(32, "output_tokens"), num_requests=4
    )
    config = SchedulerConfig()
    plain = simulate(deployment=DEP_H, workload=workload, config=config, exact_steps=True)
    fast = simulate(
        deployment=DEP_H,
        workload=workload,
        config=replace(config, overlap_schedule=True),
        exact_steps=True,
    )
    steps = plain.engine.steps
    assert fast.engine.steps == steps
    assert plain.engine.end_s - fast.engine.end_s == pytest.approx(0.002 * steps, rel=1e-6)
