"""Rules about the load and the host: KV-capacity-bound, CPU-bound, bursty arrivals, and
loading vs generation (thresholds and their meaning: rules.py)."""

from __future__ import annotations

import numpy as np

from tokenprobe.diagnose.context import (
    ARRIVAL_WINDOWS,
    BURSTY_DISPERSION,
    COLD_FACTOR,
    COLD_MIN_S,
    COLD_REQUESTS,
    CPU_SATURATED,
    GPU_IDLE_UTIL,
    KV_FULL,
    KV_FULL_SHARE,
    MIN_ARRIVALS,
    POWER_CORR,
    PROCESS_PEGGED,
    QUEUE_SHARE,
    Context,
    rounded,
)
from tokenprobe.diagnose.findings import Evidence, Finding, Verdict
from tokenprobe.diagnose.frontend_effect import more_processes_effect
from tokenprobe.diagnose.signals import Signals
from tokenprobe.metrics import prefix_cache_hit_rate
from tokenprobe.records import Run

FRONTEND_WAIT_MIN_S = 0.01  # a mean wait in front of the API server worth calling a queue


def kv_capacity_bound(ctx: Context) -> Verdict:
    sig, name = ctx.sig, "kv-capacity-bound"
    if sig.kv_usage is None:
        return Verdict(name, "skipped", "no KV-cache usage (server metrics or simulator timeline)")
    full_share = sig.kv_usage.share(sig.kv_usage.value >= KV_FULL, busy_only=True) or 0.0
    peak = float(sig.kv_usage.value.max())
    waiting = sig.waiting.share(sig.waiting.value > 0, busy_only=True) if sig.waiting else None
    preempt = sig.preemptions or 0
    hit = prefix_cache_hit_rate(ctx.run)
    evidence: Evidence = {
        "kv_usage_peak": rounded(peak),
        "prefix_cache_hit_rate": rounded(hit),
        "kv_full_share_busy": rounded(full_share),
        "queue_nonempty_share_busy": rounded(waiting),
        "preemptions": sig.preemptions,
        "timeouts": sig.timeouts,
    }
    pressure = preempt > 0 or sig.timeouts > 0 or (waiting or 0.0) >= QUEUE_SHARE
    if not (full_share >= KV_FULL_SHARE and pressure):
        return Verdict(name, "clear", f"KV peak {peak:.0%}, full {full_share:.0%} of busy time")
    finding = Finding(
        name,
        "critical" if preempt > 0 or sig.timeouts > 0 else "warning",
        f"KV cache ≥ {KV_FULL:.0%} full for {full_share:.0%} of the busy time, with "
        f"{preempt} preemptions, {sig.timeouts} timeouts, a queue {waiting or 0:.0%} of the time",
        evidence,
        "Make room for KV: fp8 KV cache, lower-precision weights, a higher gpu_memory_utilization, "
        "more GPUs per replica, a shorter max context; or admit fewer sequences (max_num_seqs) so "
        "they stop evicting each other." + _prefix_reuse_text(ctx, hit),
    )
    return Verdict.fired(finding)


REUSE_TARGET = 0.5  # a shared system prompt / few-shot block of half the prompt


def _prefix_reuse_text(ctx: Context, hit: float | None) -> str:
    """What prompt-prefix reuse would buy: a cached prefix block is held once for every
    sequence that shares it, so a sequence's own KV is about I(1 - h) + O tokens (I, O its mean
    prompt and output lengths, h the share of prompt tokens served from the cache), and the
    sequences that fit grow by (I(1 - h) + O) / (I(1 - h') + O) at hit rate h'."""
    ok = [r for r in ctx.run.records if r.ok]
    if hit is None or hit >= REUSE_TARGET or not ok:
        return ""
    prompt = float(np.mean([r.input_tokens for r in ok]))
    out = float(np.mean([r.output_tokens for r in ok]))
    gain = (prompt * (1 - hit) + out) / (prompt * (1 - REUSE_TARGET) + out)
    return (
        f" Only {hit:.0%} of prompt tokens came from the prefix cache: prompts sharing a prefix "
        f"of {REUSE_TARGET:.0%} of their length (one system prompt, few-shot block or document; "
        "prefix-aware routing across replicas) would fit "
        f"{gain:.2f}x the sequences in the same KV pool."
    )


def _frontend_queue(run: Run) -> Evidence | None:
    """The queue in front of the API-server processes from the records' `frontend_wait_s` (the
    simulator's front end), beside the engine's own queue (`queue_s`); None when not recorded."""
    waits = [r.frontend_wait_s for r in run.records if r.frontend_wait_s is not None]
    if not waits:
        return None
    engine = [r.queue_s for r in run.records if r.queue_s is not None]
    duration = run.duration_s or max((r.finish_s or 0.0) for r in run.records)
    front = run.config.get("frontend") or {}
    return {
        "frontend_wait_mean_s": rounded(float(np.mean(waits)), 4),
        "frontend_wait_p90_s": rounded(float(np.percentile(waits, 90)), 4),
        "frontend_queue_mean": rounded(sum(waits) / duration if duration else None, 1),
        "engine_queue_mean_s": rounded(float(np.mean(engine)) if engine else None, 4),
        "api_server_processes": front.get("api_server_processes"),
    }


def cpu_bound(ctx: Context) -> Verdict:
    """Fires on a saturated host with an idle GPU, or (where the run records the queue in front
    of the API-server processes: the simulator's front end) on pegged API-server processes with
    requests waiting longer in front of them than in the engine's own queue: the front end, not
    the GPU, sets the rate. vLLM V1's engine core keeps stepping whatever it holds, so such a
    GPU can read busy while it runs small batches; its busy share is evidence, not the test."""
    sig, name = ctx.sig, "cpu-bound"
    if sig.cpu_util is None and sig.process_cpu is None:
        return Verdict(name, "skipped", "no host samples")
    cpu = sig.cpu_util.mean(busy_only=True) if sig.cpu_util else None
    pegged = (
        sig.process_cpu.share(sig.process_cpu.value >= PROCESS_PEGGED, busy_only=True)
        if sig.process_cpu
        else None
    )
    gpu_util = sig.gpu_util.mean(busy_only=True) if sig.gpu_util else None
    evidence: Evidence = {
        "host_cpu_util_busy": rounded(cpu),
        "server_process_pegged_share_busy": rounded(pegged),
        "server_process_cpu_busy": rounded(
            sig.process_cpu.mean(busy_only=True) if sig.process_cpu else None
        ),
        "gpu_util_busy": rounded(gpu_util),
        "gpu_source": sig.gpu_source,
    }
    front = _frontend_queue(ctx.run)
    evidence.update(front or {})
    saturated = (cpu or 0.0) >= CPU_SATURATED or (pegged or 0.0) >= 0.5
    gpu_idle = gpu_util is None or gpu_util <= GPU_IDLE_UTIL
    queued_in_front = front is not None and float(front["frontend_wait_mean_s"] or 0.0) > max(
        FRONTEND_WAIT_MIN_S, float(front["engine_queue_mean_s"] or 0.0)
    )
    if not (saturated and (gpu_idle or queued_in_front)):
        gpu_text = "no GPU" if gpu_util is None else f"GPU busy {gpu_util:.0%}"
        return Verdict(
            name, "clear", f"host CPU {cpu or 0:.0%}, process pegged {pegged or 0:.0%}, {gpu_text}"
        )
    shared = bool((ctx.run.config.get("frontend") or {}).get("engine_in_api_server"))
    if queued_in_front and front is not None and not (shared and gpu_idle):
        return Verdict.fired(_frontend_finding(name, ctx.run, front, pegged, gpu_util, evidence))
    gpu_text = "no GPU in the run" if gpu_util is None else f"GPU busy only {gpu_util:.0%}"
    host_text = "" if cpu is None else f" the host CPU is at {cpu:.0%} and"
    action = (
        "The API-server process also runs the engine loop, so the GPU waits while it parses and "
        "streams: run the engine in a process of its own (vLLM V1's engine core) with enough "
        "API-server processes (--api-server-count), or use a faster CPU core."
        if shared
        else "The host is the bottleneck: give the server more CPU threads/cores, take "
        "tokenization and detokenization off the critical path, use a faster CPU, or serve "
        "from a GPU."
    )
    finding = Finding(
        name,
        "warning",
        f"{gpu_text} while{host_text} the server process holds a full core "
        f"{pegged or 0:.0%} of the busy time",
        evidence,
        action,
    )
    return Verdict.fired(finding)


def _effect_text(run: Run, processes: int, evidence: Evidence) -> str:
    """The simulated effect of `processes` API-server processes, when cheap to simulate."""
    effect = more_processes_effect(run, processes)
    if effect is None:
        return ""
    ttft = effect["ttft_p50_s"]
    evidence[f"simulated_requests_per_s_with_{processes}_processes"] = rounded(
        effect["requests_per_s"], 2
    )
    evidence[f"simulated_ttft_p50_s_with_{processes}_processes"] = rounded(ttft, 4)
    return (
        f" (simulated on the same arrivals: {effect['requests_per_s']:,.1f} requests/s, "
        f"TTFT p50 {ttft:.3g} s)"
    )


def _frontend_finding(
    name: str,
    run: Run,
    front: Evidence,
    pegged: float | None,
    gpu_util: float | None,
    evidence: Evidence,
) -> Finding:
    n = int(front.get("api_server_processes") or 1)
    gpu_text = "" if gpu_util is None else f"; the GPU steps {gpu_util:.0%} of the time"
    effect = _effect_text(run, 2 * n, evidence)
    return Finding(
        name,
        "warning",
        f"The {n} API-server process(es) are pegged {pegged or 0:.0%} of the busy time and "
        f"requests wait {front['frontend_wait_mean_s']:.3g} s on average in front of them "
        f"({front['frontend_queue_mean']} queued), vs {front['engine_queue_mean_s'] or 0:.3g} s "
        f"in the engine's queue{gpu_text}: the front end sets the request rate",
        evidence,
        f"More API-server processes (vLLM --api-server-count {2 * n}{effect}; "
        f"`tokenprobe simulate ... --api-server-processes {2 * n}`), a faster CPU core, or less "
        "work per token in the front end (fewer, larger stream chunks).",
    )


def _per_window(sig: Signals) -> tuple[np.ndarray, np.ndarray | None, float]:
    """Arrivals and mean power per window over the ARRIVAL span only: an overloaded run drains
    its queue long after the last arrival, and counting those empty windows would make a
    Poisson load look bursty (150 arrivals in 83 s of a 440 s run read D = 21, not 1)."""
    first, last = float(sig.arrivals_s[0]), float(sig.arrivals_s[-1])
    width = (last - first) / ARRIVAL_WINDOWS
    edges = first + np.arange(ARRIVAL_WINDOWS + 1) * width
    counts = np.histogram(sig.arrivals_s, bins=edges)[0].astype(float)
    if sig.power_w is None:
        return counts, None, width
    p = sig.power_w
    energy = np.histogram(p.t_s, bins=edges, weights=p.value * p.dt_s)[0]
    time_s = np.histogram(p.t_s, bins=edges, weights=p.dt_s)[0]
    with np.errstate(invalid="ignore", divide="ignore"):
        power = np.where(time_s > 0, energy / time_s, np.nan)
    return counts, power, width


def _corr(a: np.ndarray, b: np.ndarray) -> float | None:
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 5 or np.std(a[ok]) == 0 or np.std(b[ok]) == 0:
        return None
    return float(np.corrcoef(a[ok], b[ok])[0, 1])


def bursty_arrivals(ctx: Context) -> Verdict:
    sig, name = ctx.sig, "bursty-arrivals"
    if sig.arrivals_s.size < MIN_ARRIVALS or sig.window_s <= 0:
        return Verdict(name, "skipped", f"fewer than {MIN_ARRIVALS} requests")
    if sig.arrivals_s[-1] <= sig.arrivals_s[0]:
        return Verdict(name, "clear", "every request arrived at once (an offline batch)")
    if (
        ctx.run.config.get("concurrency")
        or (ctx.run.config.get("workload") or {}).get("arrival", {}).get("kind") == "closed"
    ):
        return Verdict(name, "clear", "closed loop: arrivals follow completions")
    counts, power, width = _per_window(sig)
    mean = float(counts.mean())
    dispersion = float(counts.var() / mean) if mean > 0 else 0.0
    lags = [] if power is None else [_corr(counts, power), _corr(counts[:-1], power[1:])]
    corr = max((c for c in lags if c is not None), default=None)
    power_cv = None if power is None else float(np.nanstd(power) / np.nanmean(power))
    evidence: Evidence = {
        "window_s": rounded(width),
        "arrivals_per_window_mean": rounded(mean),
        "arrivals_dispersion_index": rounded(dispersion),
        "power_cv_per_window": rounded(power_cv),
        "arrivals_power_correlation": rounded(corr),
    }
    if dispersion < BURSTY_DISPERSION:
        return Verdict(name, "clear", f"dispersion index {dispersion:.1f} (Poisson: 1)")
    if power is not None and (corr is None or corr < POWER_CORR):
        return Verdict(
            name, "clear", f"bursty arrivals (D={dispersion:.1f}) but power does not follow them"
        )
    aligned = (
        ""
        if power is None
        else f"; power follows them (r={corr:.2f}, CV {power_cv:.0%}): a sawtooth"
    )
    finding = Finding(
        name,
        "warning",
        f"Arrivals come in waves (dispersion index {dispersion:.1f}, Poisson gives 1){aligned}",
        evidence,
        "The GPU idles between bursts and queues during them: smooth the load (an admission queue, "
        "rate limits, offline work scheduled into the troughs; `tokenprobe simulate ... "
        "--batch-window-s W` shows what gathering requests for W seconds does to TTFT and J per "
        "token) or provision for the peak and cap power in the troughs.",
    )
    return Verdict.fired(finding)


def loading_vs_generation(ctx: Context) -> Verdict:
    name, run = "slow-loading", ctx.run
    ok = sorted((r for r in run.records if r.ttft_s is not None), key=lambda r: r.sent_s)
    load_s = run.config.get("server_load_s")
    ttfts = np.array([r.ttft_s for r in ok], dtype=float)
    gen = float(np.median([r.e2e_s for r in ok if r.e2e_s is not None])) if ok else None
    if isinstance(load_s, int | float) and not isinstance(load_s, bool):
        finding = Finding(
            name,
            "info" if load_s < 60 else "warning",
            f"Model loading took {load_s:.1f} s before serving; generation's median E2E is "
            f"{gen or 0:.3f} s: two fault domains, tune them separately",
            {"server_load_s": float(load_s), "e2e_median_s": rounded(gen, 4)},
            "Loading: keep weights on local NVMe or in page cache, use safetensors/mmap loading, "
            "keep a warm replica. Generation: see the other findings.",
        )
        return Verdict.fired(finding)
    if ttfts.size < COLD_REQUESTS + 7:
        return Verdict(name, "skipped", "no recorded load time and too few requests")
    first = float(np.median(ttfts[:COLD_REQUESTS]))
    rest = float(np.median(ttfts[COLD_REQUESTS:]))
    evidence: Evidence = {
        "ttft_first_median_s": rounded(first, 4),
        "ttft_rest_median_s": rounded(rest, 4),
    }
    if not (first >= COLD_FACTOR * rest and first - rest >= COLD_MIN_S):
        return Verdict(name, "clear", f"first requests' TTFT {first:.3f} s vs {rest:.3f} s after")
    finding = Finding(
        name,
        "warning",
        f"The first {COLD_REQUESTS} requests waited {first:.2f} s for a first token, the rest "
        f"{rest:.3f} s: a cold start (loading or warm-up), not slow generation",
        evidence,
        "Warm the server before routing traffic (a readiness check after a warm-up request), keep "
        "weights in page cache or on local NVMe; do not tune generation for it.",
    )
    return Verdict.fired(finding)
