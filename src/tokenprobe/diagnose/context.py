"""What every rule receives (`Context`), the rules' thresholds (documented in rules.py) and
small helpers shared by the rule modules."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from tokenprobe.diagnose.costview import CostView
from tokenprobe.diagnose.findings import Evidence, Verdict
from tokenprobe.diagnose.signals import NO_GPU_INDEX, Signals, weighted_median
from tokenprobe.energy_join import EnergyReport
from tokenprobe.records import Run
from tokenprobe.units import MEGA

BUSY_UTIL = 0.8
LOW_POWER_OF_TDP = 0.75
HIGH_POWER_OF_TDP = 0.8
MEM_UTIL_HIGH = 0.5
KV_FULL = 0.9
KV_FULL_SHARE = 0.1
QUEUE_SHARE = 0.2
GPU_IDLE_UTIL = 0.5
CPU_SATURATED = 0.85
PROCESS_PEGGED = 0.9
COMM_SHARE = 0.25
PCIE_BUSY = 0.5
BURSTY_DISPERSION = 3.0
ARRIVAL_WINDOWS = 30
MIN_ARRIVALS = 20
POWER_CORR = 0.5
THROTTLE_SHARE = 0.1
CLOCK_DROP = 0.1
MIN_CLOCK_SAMPLES = 10  # busy SM-clock samples needed to judge a clock drop
POWER_CAP_OF_LIMIT = 0.9  # power / power limit at or above which a sample is at the limit
CAPPED_CLOCK_OF_BOOST = 0.85  # SM clock / catalog boost clock below which the clock is held down
STATIC_SHARE = 0.4
COLD_REQUESTS = 3
COLD_FACTOR = 5.0
COLD_MIN_S = 0.5

# NVML clocksThrottleReasons bits that mean power or temperature (nvml.h)
SW_POWER_CAP, HW_SLOWDOWN, SW_THERMAL, HW_THERMAL, HW_POWER_BRAKE = 0x4, 0x8, 0x20, 0x40, 0x80
POWER_THERMAL_BITS = SW_POWER_CAP | HW_SLOWDOWN | SW_THERMAL | HW_THERMAL | HW_POWER_BRAKE


@dataclass
class Context:
    run: Run
    sig: Signals
    cost: CostView | None
    energy: EnergyReport | None


Rule = Callable[[Context], Verdict]


def rounded(x: float | None, digits: int = 3) -> float | None:
    return None if x is None else round(float(x), digits)


def gpu_label(index: int) -> str:
    """'GPU 1' ('GPU ?' for a sample whose source named no GPU)."""
    return "GPU ?" if index == NO_GPU_INDEX else f"GPU {index}"


def gpu_load(ctx: Context) -> tuple[float | None, float | None, str | None]:
    """(busy GPU utilization, busy power / TDP, why not) of the run."""
    sig = ctx.sig
    if sig.gpu_util is None or sig.power_w is None:
        return None, None, "no GPU utilization and power samples"
    if sig.gpu is None:
        return None, None, "TDP unknown: the run config names no catalog GPU"
    util = sig.gpu_util.mean(busy_only=True)
    power = sig.power_w.mean(busy_only=True)
    if util is None or power is None:
        return None, None, "no GPU sample while requests were in flight"
    return util, power / sig.gpu.tdp_w, None


def mem_evidence(ctx: Context) -> tuple[float | None, str]:
    """(memory figure 0..1, its source): NVML memory utilization, else the cost model's share."""
    if ctx.sig.mem_util is not None:
        return ctx.sig.mem_util.mean(busy_only=True), "memory utilization (telemetry)"
    if ctx.cost is not None:
        return ctx.cost.shares["memory"], "memory share of step time (cost model)"
    return None, "none"


@dataclass(frozen=True)
class PowerCap:
    """The power-cap check (rules.py, throttling), shared by throttling and compute-bound.

    `why` says why it was not judged (None: judged). Figures are over the busy samples that hold
    both power and an SM clock: `limit_w` (their median power limit, enforced where recorded,
    else the catalog TDP: `limit_source`), `power_of_limit` (median power / limit),
    `at_limit_share` (time share at >= POWER_CAP_OF_LIMIT of the limit), and, over the samples
    at the limit, `power_w` and `clock_hz` (medians; None when no sample is at the limit).

    With several GPUs each GPU is judged on its own samples: `gpus` names the capped ones
    ('GPU 1', ...; empty when none is, or when the run has one GPU), and the figures are those of
    the capped GPU with the lowest clock at the limit (none capped: of all GPUs together).
    """

    why: str | None
    capped: bool = False
    boost_hz: float | None = None
    limit_w: float | None = None
    limit_source: str | None = None
    power_of_limit: float | None = None
    at_limit_share: float | None = None
    power_w: float | None = None
    clock_hz: float | None = None
    gpus: tuple[str, ...] = ()
    num_gpus: int = 1  # GPUs judged

    @property
    def clock_of_boost(self) -> float | None:
        if self.clock_hz is None or not self.boost_hz:
            return None
        return self.clock_hz / self.boost_hz

    def evidence(self) -> Evidence:
        return {
            "power_capped": None if self.why is not None else self.capped,
            "sm_clock_hz_at_power_limit": rounded(self.clock_hz, 0),
            "boost_clock_hz": rounded(self.boost_hz, 0),
            "sm_clock_of_boost_at_power_limit": rounded(self.clock_of_boost),
            "power_w_at_power_limit": rounded(self.power_w),
            "power_limit_w": rounded(self.limit_w, 2),
            "power_limit_source": self.limit_source,
            "power_of_limit_busy": rounded(self.power_of_limit),
            "at_power_limit_share": rounded(self.at_limit_share),
            "power_capped_gpus": ", ".join(self.gpus) if self.gpus else None,
        }

    def gpu_words(self) -> str:
        """'GPU 1 (1 of 4 GPUs): ' when a multi-GPU run has capped GPUs, else ''."""
        if not self.gpus:
            return ""
        figures = "" if len(self.gpus) == 1 else f"; figures of {self.gpus[0]}"
        return f"{', '.join(self.gpus)} ({len(self.gpus)} of {self.num_gpus} GPUs{figures}): "

    def clock_words(self) -> str:
        """'SM clock 660 MHz = 42% of the 1590 MHz boost clock' (judged, at the limit only)."""
        assert self.clock_hz is not None and self.boost_hz is not None
        return (
            f"SM clock {self.clock_hz / MEGA:.0f} MHz = {self.clock_of_boost or 0:.0%} of the "
            f"{self.boost_hz / MEGA:.0f} MHz boost clock"
        )

    def limit_words(self) -> str:
        """'the 70 W power limit (catalog TDP of t4)' (judged only)."""
        return f"the {self.limit_w or 0:.0f} W power limit ({self.limit_source})"

    def describe(self) -> str:
        """The check in words, for a verdict's reason."""
        if self.why is not None:
            return f"power cap not judged: {self.why}"
        if self.clock_hz is None:
            return f"power {self.power_of_limit or 0:.0%} of {self.limit_words()}: not at it"
        return self.gpu_words() + (
            f"at >= {POWER_CAP_OF_LIMIT:.0%} of {self.limit_words()} "
            f"{self.at_limit_share or 0:.0%} of the busy time with {self.clock_words()}"
        )


def power_cap(ctx: Context) -> PowerCap:
    """Is the board held at its power limit with its clock well under the boost clock?

    Judged on the busy samples that hold both power and an SM clock: capped when the samples at
    >= POWER_CAP_OF_LIMIT of the power limit make up >= THROTTLE_SHARE of that time and their
    median SM clock is < CAPPED_CLOCK_OF_BOOST of the catalog boost clock. The limit is the one
    the telemetry recorded (NVML's enforced limit, nvidia-smi's enforced.power.limit, DCGM's
    enforced / management limit), else the catalog TDP. Needs neither throttle reasons nor more
    than one sample: one dcgm-exporter scrape is enough. With several GPUs, each GPU is judged on
    its own samples and the check fires when any GPU is capped (one capped GPU among healthy
    ones is not outvoted by theirs); see PowerCap for the figures then reported.
    """
    sig, pc = ctx.sig, ctx.sig.power_clock
    if pc is None:
        return PowerCap("no sample with both power and SM clock")
    gpu = sig.gpu
    if gpu is None:
        return PowerCap("the run config names no catalog GPU (boost clock unknown)")
    if gpu.sm_clock_hz is None:
        return PowerCap(f"the catalog has no boost clock for {gpu.name}")
    busy = pc.clock_hz.busy
    if float(pc.clock_hz.dt_s[busy].sum()) <= 0:
        return PowerCap("no busy sample with both power and SM clock")
    pooled = _judge_power_cap(ctx, busy)
    indices = [int(i) for i in np.unique(pc.gpu[busy])]
    if len(indices) <= 1:
        return pooled
    per_gpu = [(i, _judge_power_cap(ctx, busy & (pc.gpu == i))) for i in indices]
    capped = [(i, cap) for i, cap in per_gpu if cap.capped]
    if not capped:
        return replace(pooled, num_gpus=len(indices))
    capped.sort(key=lambda item: (item[1].clock_hz or 0.0, item[0]))
    worst = capped[0][1]
    return replace(worst, gpus=tuple(gpu_label(i) for i, _ in capped), num_gpus=len(indices))


def _judge_power_cap(ctx: Context, mask: np.ndarray) -> PowerCap:
    """power_cap on the samples of `mask` (busy ones, with weight; checked by the caller)."""
    gpu, pc = ctx.sig.gpu, ctx.sig.power_clock
    assert gpu is not None and gpu.sm_clock_hz is not None and pc is not None
    dt = pc.clock_hz.dt_s[mask]
    if float(dt.sum()) <= 0:
        return PowerCap("no busy sample with both power and SM clock")
    recorded = pc.limit_w[mask]
    known = ~np.isnan(recorded)
    limit = np.where(known, recorded, gpu.tdp_w)
    if known.all():
        source = "enforced, from the telemetry"
    elif known.any():
        source = f"enforced where recorded, else the catalog TDP of {gpu.name}"
    else:
        source = f"catalog TDP of {gpu.name}"
    power, clock = pc.power_w[mask], pc.clock_hz.value[mask]
    ratio = power / limit
    at = ratio >= POWER_CAP_OF_LIMIT
    share = float(dt[at].sum() / dt.sum())
    at_clock = weighted_median(clock[at], dt[at])
    at_power = weighted_median(power[at], dt[at])
    capped = (
        share >= THROTTLE_SHARE
        and at_clock is not None
        and at_clock < CAPPED_CLOCK_OF_BOOST * gpu.sm_clock_hz
    )
    return PowerCap(
        None,
        capped=capped,
        boost_hz=gpu.sm_clock_hz,
        limit_w=weighted_median(limit, dt),
        limit_source=source,
        power_of_limit=weighted_median(ratio, dt),
        at_limit_share=share,
        power_w=at_power,
        clock_hz=at_clock,
    )
