"""The engine's CPU slice of each step, in which no kernel runs (issue 19 item 5).

A step's wall time is the GPU's kernels plus the host work the engine does not hide behind them
(`cost.host_time_s`: `Efficiency.step_overhead_s` + `seq_overhead_s` per sequence: scheduling,
building the input tensors, sampling bookkeeping). During that slice the GPU runs nothing, so it
is not GPU-busy: `Engine` counts only the kernel part in `busy_s` (the GPU-busy fraction a
simulated run reports) and draws the step on the power timeline as two points, the CPU slice at
`gap_w` and the kernels at the rest of the step's energy.

Power in the slice: the board idles with its clocks still up. The cost model pays the busy
clock-tree term b·D through such gaps because they (0.1-1 ms) are far shorter than the driver's
clock drop (cost/step.py `_power_w`; cost/energy.py), so the slice costs idle + b·D per GPU and
none of the step's work energy (FLOP, bytes), which all lands on the kernel slice. The step's
energy is therefore conserved, except under a power limit: the kernel slice cannot draw more than
the cap, so it is held there and the step's energy falls by what the cap cuts (`split_step`).
"""

from __future__ import annotations

from collections.abc import Callable

from tokenprobe.cost import BatchShape, Deployment, host_gap_power_w, host_time_s, power_cap_w
from tokenprobe.sim.base import StepPlan

GapFn = Callable[[StepPlan], tuple[float, float, float]]
"""A step's (CPU slice s, power of all GPUs in it W, power limit of all GPUs W)."""


def cost_gap_fn(dep: Deployment) -> GapFn:
    """The CPU slice of a planned step from the cost model's host time, for all GPUs."""
    n = dep.num_gpus
    gap_w = host_gap_power_w(dep) * n
    max_w = power_cap_w(dep) * n

    memo: dict[tuple[int, int], tuple[float, float, float]] = {}  # host time needs only these

    def gap(plan: StepPlan) -> tuple[float, float, float]:
        key = (plan.prefill_seqs, plan.decode_seqs)
        hit = memo.get(key)
        if hit is None:
            shape = BatchShape(0, 0.0, key[0], key[1], 0)
            hit = memo[key] = (float(host_time_s(dep, shape)), gap_w, max_w)
        return hit

    return gap


def split_step(
    time_s: float, energy_j: float, gap_s: float, gap_w: float, max_w: float
) -> tuple[float, float, float, float]:
    """(CPU slice s, its power W, the kernel slice's power W, the step's energy J).

    The slice is at most the step; its power at most the step's mean (a step slower than its
    clock-tree power, e.g. a pipeline stage waiting, keeps its mean); the kernels get the rest of
    the energy, at most `max_w`. A step that is all CPU slice is drawn at its mean power."""
    mean_w = energy_j / time_s
    if gap_s <= 0:
        return 0.0, mean_w, mean_w, energy_j
    if gap_s >= time_s:
        return time_s, mean_w, mean_w, energy_j
    if mean_w < gap_w:  # (comparisons, not min(): this runs once per simulated step)
        gap_w = mean_w
    kernel_w = (energy_j - gap_w * gap_s) / (time_s - gap_s)
    kernel_w = kernel_w if kernel_w < max_w else max_w
    return gap_s, gap_w, kernel_w, gap_w * gap_s + kernel_w * (time_s - gap_s)
