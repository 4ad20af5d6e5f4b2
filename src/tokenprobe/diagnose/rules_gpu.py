"""Rules about the GPU itself: memory-bandwidth-bound, compute-bound, communication-bound,
throttling and idle waste (thresholds and their meaning: rules.py)."""

from __future__ import annotations

import numpy as np

from tokenprobe.diagnose.context import (
    BUSY_UTIL,
    CLOCK_DROP,
    COMM_SHARE,
    HIGH_POWER_OF_TDP,
    LOW_POWER_OF_TDP,
    MEM_UTIL_HIGH,
    MIN_CLOCK_SAMPLES,
    PCIE_BUSY,
    POWER_THERMAL_BITS,
    STATIC_SHARE,
    THROTTLE_SHARE,
    Context,
    PowerCap,
    gpu_label,
    gpu_load,
    mem_evidence,
    power_cap,
    rounded,
)
from tokenprobe.diagnose.findings import Evidence, Finding, Verdict
from tokenprobe.diagnose.signals import Series
from tokenprobe.diagnose.thermal import catalog_static_w
from tokenprobe.energy_join import EnergyReport


def memory_bandwidth_bound(ctx: Context) -> Verdict:
    util, power_ratio, why = gpu_load(ctx)
    name = "memory-bandwidth-bound"
    if util is None or power_ratio is None:
        return Verdict(name, "skipped", why or "")
    mem, mem_source = mem_evidence(ctx)
    evidence: Evidence = {
        "gpu_util_busy": rounded(util),
        "power_of_tdp_busy": rounded(power_ratio),
        "tdp_w": ctx.sig.gpu.tdp_w if ctx.sig.gpu else None,
        "memory_figure": rounded(mem),
        "memory_figure_source": mem_source,
    }
    if mem is None:
        return Verdict(name, "skipped", "no memory utilization and no cost-model view")
    fired = util >= BUSY_UTIL and power_ratio <= LOW_POWER_OF_TDP and mem >= MEM_UTIL_HIGH
    if not fired:
        return Verdict(
            name, "clear", f"util {util:.0%}, power {power_ratio:.0%} of TDP, memory {mem:.0%}"
        )
    finding = Finding(
        name,
        "warning",
        f"GPU busy {util:.0%} of the time at only {power_ratio:.0%} of TDP with memory at "
        f"{mem:.0%}: decode streams weights and KV from HBM faster than it computes",
        evidence,
        "Batch more sequences per step (concurrency, max_num_seqs) so each weight read serves more "
        "tokens; quantize weights or the KV cache (fp8/int4); or pick a GPU with more HBM "
        "bandwidth. A lower power cap costs little speed here.",
    )
    return Verdict.fired(finding)


def compute_bound(ctx: Context) -> Verdict:
    util, power_ratio, why = gpu_load(ctx)
    name = "compute-bound"
    if util is None or power_ratio is None:
        return Verdict(name, "skipped", why or "")
    compute = ctx.cost.shares["compute"] if ctx.cost is not None else None
    evidence: Evidence = {
        "gpu_util_busy": rounded(util),
        "power_of_tdp_busy": rounded(power_ratio),
        "compute_share_cost_model": rounded(compute),
    }
    heavy = power_ratio >= HIGH_POWER_OF_TDP or (compute is not None and compute >= 0.5)
    if not (util >= BUSY_UTIL and heavy):
        return Verdict(name, "clear", f"util {util:.0%}, power {power_ratio:.0%} of TDP")
    cap = power_cap(ctx)
    if cap.capped:
        # at the power limit, high power says the board reached its budget, not that the tensor
        # cores are saturated: the finding is throttling's (power-capped), see rules.py
        return Verdict(
            name,
            "clear",
            f"util {util:.0%}, power {power_ratio:.0%} of TDP, but power-capped: "
            f"{cap.gpu_words()}{cap.clock_words()} at {cap.power_of_limit or 0:.0%} of "
            f"{cap.limit_words()}; "
            "the power limit, not the tensor cores, sets the speed (see throttling)",
        )
    finding = Finding(
        name,
        "info",
        f"GPU busy {util:.0%} of the time at {power_ratio:.0%} of TDP: the tensor cores are the "
        "limit (prefill-heavy or large batches)",
        evidence,
        "Larger batches no longer help: use fp8 compute, a faster GPU or more tensor parallelism, "
        "or cut prefill work (prefix caching, shorter prompts).",
    )
    return Verdict.fired(finding)


def communication_bound(ctx: Context) -> Verdict:
    sig, name = ctx.sig, "communication-bound"
    if sig.num_gpus <= 1:
        return Verdict(name, "clear", "one GPU: no GPU-to-GPU traffic")
    comm = ctx.cost.shares["communication"] if ctx.cost is not None else None
    pcie = sig.pcie_bytes_per_s.mean(busy_only=True) if sig.pcie_bytes_per_s else None
    link = sig.gpu.pcie_bytes_per_s * 2 if sig.gpu is not None else None
    pcie_share = pcie / link if pcie is not None and link else None
    if comm is None and pcie_share is None:
        return Verdict(name, "skipped", "no cost-model view and no PCIe counters")
    evidence: Evidence = {
        "num_gpus": sig.num_gpus,
        "communication_share_cost_model": rounded(comm),
        "pcie_bytes_per_s_busy": rounded(pcie, 0),
        "pcie_share_of_link": rounded(pcie_share),
    }
    if not ((comm or 0.0) >= COMM_SHARE or (pcie_share or 0.0) >= PCIE_BUSY):
        return Verdict(name, "clear", f"communication {comm or 0:.0%} of step time")
    finding = Finding(
        name,
        "warning",
        f"{sig.num_gpus} GPUs spend {comm or 0:.0%} of each step communicating"
        + (f", PCIe at {pcie_share:.0%} of the link" if pcie_share is not None else ""),
        evidence,
        "Use fewer GPUs per replica (data-parallel replicas instead of tensor parallelism), "
        "NVLink-connected GPUs, or pipeline parallelism across PCIe.",
    )
    return Verdict.fired(finding)


def _power_capped_finding_words(cap: PowerCap) -> tuple[str, str]:
    """(summary, action) of a power-capped GPU."""
    share = cap.at_limit_share or 0.0
    during = "" if share >= 0.995 else f" for {share:.0%} of the busy time"
    summary = (
        f"Power-capped: {cap.clock_words()} at {cap.power_w or 0:.1f} W = "
        f"{cap.power_of_limit or 0:.0%} of {cap.limit_words()}{during}"
    )
    action = (
        "The board holds its clock down to stay within its power limit (GPU Boost runs at the "
        "boost clock whenever power and temperature allow). Check the enforced limit and the "
        "active clock-event reasons (nvidia-smi -q -d POWER,PERFORMANCE,TEMPERATURE: 'SW Power "
        "Cap'); raise or restore the limit if it was lowered (nvidia-smi -pl, up to "
        "power.max_limit) and improve cooling and airflow (a hotter chip draws more power at "
        "the same clock). Otherwise expect throughput roughly proportional to the clock (about "
        f"{cap.clock_of_boost or 0:.0%} of what the boost clock gives) and quote it as the "
        "sustained figure; for inference, a smaller batch draws less power per step (the clock "
        "rises, latency falls), and lower-precision weights or KV cache (int8/fp8) do more "
        "tokens per joule."
    )
    return summary, action


def _clock_drop(
    clocks: Series | None, gpus: np.ndarray | None
) -> tuple[float | None, tuple[str, ...], int, bool]:
    """The SM-clock drop from the first to the last fifth of the busy time, judged per GPU (two
    steady GPUs at different clocks are no drop): (the largest drop of the GPUs with at least
    MIN_CLOCK_SAMPLES busy samples, None when none was judged; the GPUs whose drop reaches
    CLOCK_DROP, named only when the run has several GPUs; the most busy samples of any GPU;
    whether there are several GPUs)."""
    if clocks is None:
        return None, (), 0, False
    index = gpus if gpus is not None and gpus.size == len(clocks) else np.zeros(len(clocks), int)
    indices = [int(i) for i in np.unique(index)]
    drops: dict[int, float] = {}
    most = 0
    for i in indices:
        busy = clocks.value[clocks.busy & (index == i)]  # in time order within one GPU
        most = max(most, int(busy.size))
        if busy.size < MIN_CLOCK_SAMPLES:
            continue
        fifth = max(busy.size // 5, 1)
        first, last = float(np.median(busy[:fifth])), float(np.median(busy[-fifth:]))
        if first > 0:
            drops[i] = (first - last) / first
    if not drops:
        return None, (), most, len(indices) > 1
    named = tuple(gpu_label(i) for i, d in drops.items() if d >= CLOCK_DROP)
    return max(drops.values()), named if len(indices) > 1 else (), most, len(indices) > 1


def throttling(ctx: Context) -> Verdict:
    sig, name = ctx.sig, "throttling"
    if sig.throttle is None and sig.sm_clock_hz is None:
        return Verdict(name, "skipped", "no throttle reasons or SM clocks recorded")
    share = None
    if sig.throttle is not None:
        bits = sig.throttle.value.astype(np.int64)
        share = sig.throttle.share((bits & POWER_THERMAL_BITS) != 0)
    clocks = sig.sm_clock_hz
    drop, drop_gpus, busy_clocks, several = _clock_drop(sig.sm_clock_hz, sig.sm_clock_gpu)
    cap = power_cap(ctx)
    if share is None and drop is None and cap.why is not None:
        # no kind of evidence: "clear" would claim a check that was never made
        if clocks is None:
            clock_why = "no SM clocks"
        elif busy_clocks < MIN_CLOCK_SAMPLES:
            clock_why = (
                f"only {busy_clocks} busy SM-clock sample{'' if busy_clocks == 1 else 's'}"
                f"{' on any one GPU' if several else ''} ({MIN_CLOCK_SAMPLES} needed to compare "
                "the first and last fifth of the busy time)"
            )
        else:
            clock_why = "an SM clock of 0 at the start of the busy time"
        return Verdict(
            name, "skipped", f"no throttle reasons recorded and {clock_why}; {cap.describe()}"
        )
    evidence: Evidence = {
        "throttled_sample_share": rounded(share),
        "sm_clock_drop_fraction": rounded(drop),
        "sm_clock_drop_gpus": ", ".join(drop_gpus) if drop_gpus else None,
        **cap.evidence(),
    }
    reasons_or_drop = (share or 0.0) >= THROTTLE_SHARE or (drop or 0.0) >= CLOCK_DROP
    if not reasons_or_drop and not cap.capped:
        reasons = "no throttle reasons" if share is None else f"throttled {share:.0%} of samples"
        clock = "clock drop not judged" if drop is None else f"clock drop {drop:.0%}"
        return Verdict(name, "clear", f"{reasons}, {clock}; {cap.describe()}")
    parts: list[str] = []
    action = (
        "Clocks are held down by power or temperature: check cooling, airflow and the power limit "
        "(nvidia-smi -q -d PERFORMANCE,POWER,TEMPERATURE); quote the throttled throughput as the "
        "sustained one."
    )
    if cap.capped:
        summary, action = _power_capped_finding_words(cap)
        summary = cap.gpu_words() + summary
        parts.append(summary)
    if reasons_or_drop:
        fell = f"{', '.join(drop_gpus)}: " if drop_gpus else ""
        parts.append(
            f"Power/thermal throttling in {share or 0:.0%} of samples; {fell}SM clock fell "
            f"{drop or 0:.0%} from the first to the last fifth of the busy time"
        )
    finding = Finding(name, "warning", "; ".join(parts), evidence, action)
    return Verdict.fired(finding)


def _static_w(ctx: Context, e: EnergyReport) -> tuple[float, str]:
    """The static power of all GPUs: the measured idle baseline when the run had idle stretches,
    else the catalog's idle power x GPUs (a percentile of power in a saturated run is busy power,
    not static power; a GPU log without request records has no idle stretch to measure), else
    that percentile. The catalog's figure is priced at the run's mean die temperature
    (diagnose/thermal.py)."""
    if e.idle_baseline_method == "no request in flight" and ctx.run.records:
        return e.idle_baseline_w, "measured with no request in flight"
    gpu = ctx.sig.gpu
    if gpu is not None:  # at the run's measured temperature where it has one (leakage)
        return catalog_static_w(gpu, ctx.sig.num_gpus, ctx.run)
    return e.idle_baseline_w, e.idle_baseline_method


def idle_waste(ctx: Context) -> Verdict:
    name, e = "idle-waste", ctx.energy
    if e is None or e.energy_j <= 0:
        return Verdict(name, "skipped", "no power samples or timeline: no energy join")
    static_w, method = _static_w(ctx, e)
    share = min(static_w * e.window_s * e.coverage / e.energy_j, 1.0)
    evidence: Evidence = {
        "static_share": rounded(share),
        "static_power_w": rounded(static_w, 1),
        "static_power_method": method,
        "energy_j": rounded(e.energy_j, 1),
        "idle_time_energy_j": rounded(e.idle_time_energy_j, 1),
        "idle_time_energy_share": rounded(e.idle_time_energy_j / e.energy_j),
    }
    if share < STATIC_SHARE:
        return Verdict(name, "clear", f"static power {share:.0%} of the energy")
    finding = Finding(
        name,
        "warning",
        f"{share:.0%} of the run's energy is static power ({static_w:.0f} W, {method}): the "
        "GPUs mostly wait",
        evidence,
        "Consolidate the load onto fewer GPUs, scale down when idle, or batch requests: J/token "
        "falls as utilization rises.",
    )
    return Verdict.fired(finding)
