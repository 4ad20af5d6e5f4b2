"""One deployment row -> tokenprobe's prediction (benchmarks/validate_deployments.py replays them).

Three kinds (issue 17, "How it is judged"), rows of benchmarks/data/deployments/*.csv (the common
validation columns plus `kind`, `phase`, worker counts, topology and speculative-decoding
columns; benchmarks/data/README.md, sections 7-10, says what every row is and where it is from):
- `pd`: prefill/decode disaggregation. `simulate_fleet(disaggregate="XpYd")` (sim/disagg.py):
  X prefill and Y decode workers, each a copy of the row's deployment, the KV sent between them;
  an SGLang row runs SGLang's handoff (sim/pd_handoff.py: the router's round robin on each
  side, the decode worker's pre-allocation before the prefill, the first token at the decode
  worker's next iteration), chosen by the engine as `simulate` chooses it.
  The fleet simulator takes open-loop arrivals only (sim/cluster.py `fleet_requests`), so a
  closed loop of C users (`vllm bench serve --max-concurrency C`) is replayed as C requests at
  t = 0 and the rest at a constant rate r, r found so that the run's own simulated mean E2E
  holds C requests in flight (Little's law, C = r x E2E; secant steps on log r, at most
  `CLOSED_LOOP_STEPS` simulations). An approximation of the closed loop, not a fit: no
  measured figure enters it.
- `dpep`: attention data parallelism + expert parallelism (SGLang `--enable-dp-attention` with
  DeepEP, TensorRT-LLM `enable_attention_dp`). The cost model's `attention_dp` deployment
  (every GPU a DP rank holding the attention, the routed experts spread over all ranks, the
  all-to-all priced on NVLink inside a node and on the NICs across nodes, cost/deployment.py):
  phase `decode`: one decode step of the whole batch (per-rank batch x ranks) at the row's
  context, output tokens/s = batch / step, per node or per rank as the source reports;
  phase `prefill`: one prefill pass of the batch's prompts, input tokens/s per node;
  phase `serving`: the single-replica simulator on that deployment, the engine's per-rank
  batch limits (`--max_batch_size`, `--max_num_tokens`) times the ranks. Ranks are balanced:
  a step waiting for its slowest rank, EPLB's redundant experts and two-batch overlap are not
  modelled (DP-attention ranks in the simulator are being added beside this harness).
- `spec`: speculative decoding, priced by `estimate`'s spec decode (cost/specdecode.py). Phase
  `latency`: batch-1 requests, per-user tokens/s = output tokens / E2E (trtllm-bench's "Per
  User Output Throughput"); phase `decode`: as dpep decode, per emitted token. Acceptance: the
  source's own when it gives one; from its mean acceptance length tau (tokens a verification
  step emits, the bonus token included) by inverting tau = (1 - a^(k+1)) / (1 - a)
  (Leviathan et al. 2023, the model cost/specdecode.py prices); else the method's default
  (mtp 0.85, DeepSeek-V3 report); eagle and ngram have none, so such rows are not covered.
  Each row's line says which.
A row that cannot be expressed is not covered: `replay` returns it without a prediction and
with the reason. The rows' parameters: the engine's shipped profile, or the model's defaults.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ep_replay import ep_comm_for, gang_decode_s, gang_prefill_s
from tokenprobe.calibrate import load_profile, profile_name_for
from tokenprobe.calibrate.observations import (
    SkipRowError,
    dtype_name,
    engine_name,
    float_field,
    gpu_name,
    int_field,
)
from tokenprobe.calibrate.serving import _flag, _lengths, scheduler_for
from tokenprobe.cost import (
    BatchShape,
    Deployment,
    SpecDecode,
    Workload,
    estimate_deployment,
    make_deployment,
    step_cost,
)
from tokenprobe.errors import TokenprobeError
from tokenprobe.model import get_model
from tokenprobe.sim import simulate, simulate_fleet
from tokenprobe.units import MILLI
from tokenprobe.workload import Arrival, RequestSpec, fixed
from tokenprobe.workload import Workload as SimWorkload

__all__ = ["KINDS", "REPORTED", "Replay", "SkipRowError", "measured", "replay"]

KINDS = ("pd", "dpep", "spec")
REPORTED = ("pd", "pd-agg", "dpep", "spec")  # the kinds a summary lists, pd-agg: --aggregated
CLOSED_LOOP_STEPS = 8  # simulations per closed-loop row at most (module docstring)
CLOSED_LOOP_TOL = 0.03  # |log(r x E2E / C)| at which the closed-loop rate is taken
ITL_TRACE = 200  # requests whose token times the simulator keeps, for the median ITL
SERVING_CAP = 4  # a `serving` row simulates at most this many times its concurrency


@dataclass
class Replay:
    """One row: what was measured, what the tool predicts (None: not covered, `why` says why)."""

    source: str
    kind: str
    label: str
    measured: dict[str, float]
    predicted: dict[str, float] | None = None
    why: str = ""
    note: str = ""

    def errors(self) -> dict[str, float]:
        if self.predicted is None:
            return {}
        return {m: self.predicted[m] / v - 1.0 for m, v in self.measured.items()}


def deployment(row: Mapping[str, str], params: str, **kw: Any) -> Deployment:
    """The row's GPUs, precisions and parallelism, priced by the engine's shipped profile (or
    the defaults). NVFP4 checkpoints are `fp4`; the KV cache is 16-bit unless the row says fp8
    (SGLang's and TensorRT-LLM's "auto" follows the checkpoint, whose KV is not quantised)."""
    text = row.get("weight_precision", "")
    weight = "fp4" if "nvfp4" in text.lower() else (dtype_name(text) or "bf16")
    kv = "fp8" if dtype_name(row.get("kv_cache_precision", "")) == "fp8" else "bf16"
    gpu = gpu_name(row["gpu"], row["source_id"])
    profile = _profile(row) if params == "profile" else None
    try:
        return make_deployment(
            row.get("model_hf_id") or row["model"],
            gpu,
            tp=int_field(row, "tp", 1),
            weight_dtype=weight,
            kv_dtype=kv,
            efficiency=profile.efficiency if profile else None,
            power=profile.power if profile else None,
            nodes=int_field(row, "nodes", 1),
            gpus_per_node=int_field(row, "gpus_per_node", 8),
            **kw,
        )
    except TokenprobeError as exc:
        raise SkipRowError(f"not expressible: {exc}") from None


def _profile(row: Mapping[str, str]) -> Any:
    engine = engine_name(row["engine"], row.get("engine_version", ""))
    name = profile_name_for(engine, "nvidia")
    return load_profile(name) if name else None


def acceptance(row: Mapping[str, str]) -> tuple[SpecDecode, str]:
    """The row's speculative-decoding setting and where its acceptance comes from."""
    method, k = row["spec_method"], int_field(row, "spec_k")
    given, tau = float_field(row, "spec_acceptance"), float_field(row, "spec_acceptance_length")
    if given is not None:
        return SpecDecode.parse(f"{method}:{k}", given), f"acceptance {given:g} (source)"
    if tau is not None:
        a = acceptance_from_length(tau, k)
        return SpecDecode.parse(f"{method}:{k}", a), f"acceptance {a:.3f} (source's length {tau})"
    try:
        spec = SpecDecode.parse(f"{method}:{k}")
    except TokenprobeError:
        raise SkipRowError(f"{method}: no acceptance published and no default") from None
    return spec, f"acceptance {spec.acceptance:g} ({method} default)"


def acceptance_from_length(tau: float, k: int) -> float:
    """Per-token acceptance a with (1 - a^(k+1)) / (1 - a) = tau: 1 + a + ... + a^k rises
    monotonically from 1 (a = 0) to k + 1 (a = 1), so bisection finds it."""
    if not 1.0 <= tau <= k + 1:
        raise SkipRowError(f"acceptance length {tau} outside [1, {k + 1}] for k = {k}")
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if sum(mid**i for i in range(k + 1)) < tau:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


# ------------------------------------------------------------------------------ predictors


def closed_loop_trace(n: int, c: int, rate_per_s: float, isl: int, osl: int) -> Arrival:
    """C requests at t = 0, the rest at `rate_per_s` (the open-loop stand-in for C users)."""
    return Arrival(
        "trace",
        trace=tuple(
            RequestSpec(str(i), 0.0 if i < c else (i - c + 1) / rate_per_s, isl, osl)
            for i in range(n)
        ),
    )


def closed_loop(
    run: Callable[[Arrival], dict[str, Any]], n: int, c: int, isl: int, osl: int,
    first_rate_per_s: float | None = None,
) -> tuple[dict[str, Any], float, float]:  # fmt: skip
    """The run whose constant rate holds C requests in flight by its own E2E (docstring), with
    that rate (1/s) and the requests it holds in flight, r x E2E. Secant steps on x = log r
    for g(x) = log(r x E2E / C), which rises with r; once runs on both sides of g = 0 are
    known a step leaving that bracket bisects it instead. The run nearest g = 0 is kept.
    `first_rate_per_s`: the first guess (default C / 1 s), e.g. C over an estimated E2E."""
    x, prev = math.log(first_rate_per_s or float(c)), None  # first guess: r = C / (1 s)
    lo, hi = -math.inf, math.inf  # x known to give too few / too many requests in flight
    best: tuple[float, dict[str, Any], float] | None = None
    for _ in range(CLOSED_LOOP_STEPS):
        d = run(closed_loop_trace(n, c, math.exp(x), isl, osl))
        g = math.log(math.exp(x) * float(d["e2e_s"]["mean"]) / c)
        if best is None or abs(g) < abs(best[0]):
            best = (g, d, math.exp(x))
        if abs(g) < CLOSED_LOOP_TOL:
            break
        lo, hi = (max(lo, x), hi) if g < 0 else (lo, min(hi, x))
        step = -g  # as if E2E did not depend on r
        if prev is not None and prev[1] != g:
            step = -g * (x - prev[0]) / (g - prev[1])  # secant
        prev, x = (x, g), x + max(-2.0, min(2.0, step))
        if math.isfinite(lo) and math.isfinite(hi) and not lo < x < hi:
            x = (lo + hi) / 2
    assert best is not None
    g, d, rate_per_s = best
    return d, rate_per_s, c * math.exp(g)


def _fleet_metrics(d: Mapping[str, Any]) -> dict[str, float]:
    out = {"ttft": d["ttft_s"]["p50"], "throughput": d["output_tokens_per_s"]}
    if d["itl_s"]["p50"] is not None:
        out["itl"] = d["itl_s"]["p50"]
    return {k: float(v) for k, v in out.items()}


def predict_pd(
    row: Mapping[str, str], params: str, aggregated: bool = False
) -> tuple[dict[str, float], str]:
    """The row's PD fleet; `aggregated`: the same GPUs as P + D aggregated replicas behind a
    least-loaded router instead (what the tool could say before disaggregation was modelled)."""
    if row.get("prefill_tp") != row.get("decode_tp"):
        raise SkipRowError("prefill and decode workers of different tp (one deployment a fleet)")
    if not row["workload_type"].startswith("closed_loop_concurrency"):
        raise SkipRowError(f"load {row['workload_type'][:30]!r} not replayed here")
    dep = deployment(row, params)
    engine = engine_name(row["engine"], row.get("engine_version", ""))
    config = scheduler_for(engine, dep, row.get("notes", ""))
    isl, osl = (round(d.expected) for d in _lengths(row))
    split = f"{row['prefill_workers']}p{row['decode_workers']}d"
    fleet: dict[str, Any] = {"disaggregate": split}
    if aggregated:
        replicas = int_field(row, "prefill_workers") + int_field(row, "decode_workers")
        fleet, split = {"replicas": replicas, "router": "least-loaded"}, f"{replicas} replicas"

    def run(arrival: Arrival) -> dict[str, Any]:
        wl = SimWorkload(arrival, fixed(isl, "input_tokens"), fixed(osl, "output_tokens"))
        res = simulate_fleet(dep, wl, config=config, engine=engine, trace_requests=ITL_TRACE,
                             **fleet)  # fmt: skip
        return res.to_dict()

    n, c = int_field(row, "num_requests"), int_field(row, "concurrency")
    d, rate, held = closed_loop(run, n, c, isl, osl)
    handoff = d["config"].get("pd_handoff")  # SGLang's own for SGLang rows (sim/pd_handoff.py)
    split += f" ({handoff} handoff)" if handoff else ""
    return _fleet_metrics(d), f"{split}, c{c} as {rate:.3g} req/s: {held:.0f} in flight"


def predict_dpep(row: Mapping[str, str], params: str) -> tuple[dict[str, float], str]:
    if row.get("attention_dp") != "1":
        raise SkipRowError("not a DP-attention deployment")
    ep = ep_comm_for(row, _experts(row))  # DeepEP, two-batch overlap, EPLB (ep_replay.py)
    dep = deployment(row, params, expert_parallel=True, attention_dp=True, ep_comm=ep)
    phase = row["phase"]
    said = f"; EP {ep.label()}"
    if phase == "prefill":  # the ranks stepping together (ep_replay.gang_prefill_s)
        isl, batch = int_field(row, "isl"), int_field(row, "batch_size")
        t_s = gang_prefill_s(dep, isl, batch)
        tok_s = isl * batch / t_s / int_field(row, "nodes")
        return {"throughput": tok_s}, "one prefill pass of the ranks" + said
    if phase == "decode":
        return _gang_decode_throughput(row, dep), "one decode step of the ranks" + said
    if phase == "serving":
        return _serve_adp(row, dep), "simulated, ranks balanced" + said
    raise SkipRowError(f"phase {phase!r} not replayed for dpep")


def _experts(row: Mapping[str, str]) -> int | None:
    """The row's model's routed experts (None: not an MoE model or not in the catalog)."""
    try:
        moe = get_model(row.get("model_hf_id") or row["model"]).moe
    except TokenprobeError:
        return None
    return None if moe is None else moe.num_experts


def _gang_decode_throughput(row: Mapping[str, str], dep: Deployment) -> dict[str, float]:
    """_decode_throughput's figure from the ranks' step (ep_replay.gang_decode_s): at the
    row's KV length, or at the mean context of its output positions (isl + osl / 2: a decode
    step is linear in its context)."""
    batch, isl = int_field(row, "batch_size"), int_field(row, "isl")
    ctx = isl + (int_field(row, "osl") // 2 if row.get("osl") else 0)
    total = batch / gang_decode_s(dep, batch, ctx)
    scope = next((c for c in THROUGHPUT_COLUMNS["decode"] if row.get(c)), "output_tok_s")
    per = {"output_tok_s_per_node": int_field(row, "nodes"), "output_tok_s_per_gpu": dep.num_gpus}
    return {"throughput": total / per.get(scope, 1)}


def _decode_throughput(
    row: Mapping[str, str], dep: Deployment, spec: SpecDecode | None
) -> dict[str, float]:
    """Output tokens/s of the row's batch in its scope (per node, per rank or in all): at the
    row's KV length when it gives no output length, else averaged over the output positions
    (estimate's tpot)."""
    batch, isl = int_field(row, "batch_size"), int_field(row, "isl")
    if row.get("osl"):
        w = Workload(input_tokens=isl, output_tokens=int_field(row, "osl"), batch=batch)
        tpot_s = estimate_deployment(dep, w, find_compute_bound=False, spec=spec).tpot_s
    else:
        tpot_s = step_cost(dep, BatchShape.decode(batch, isl)).time_s
    total = batch / tpot_s
    scope = next((c for c in THROUGHPUT_COLUMNS["decode"] if row.get(c)), "output_tok_s")
    per = {"output_tok_s_per_node": int_field(row, "nodes"), "output_tok_s_per_gpu": dep.num_gpus}
    return {"throughput": total / per.get(scope, 1)}


def _serve_adp(row: Mapping[str, str], dep: Deployment) -> dict[str, float]:
    if not row.get("isl") or not row.get("osl"):
        raise SkipRowError("input/output lengths not stated")
    engine = engine_name(row["engine"], row.get("engine_version", ""))
    notes = row.get("notes", "")
    base = scheduler_for(engine, dep, notes)  # the per-rank flags, then times the ranks
    util = _flag(notes, "--kv_cache_free_gpu_mem_fraction")
    config = replace(
        base,
        max_num_seqs=base.max_num_seqs * dep.tp,
        max_num_batched_tokens=base.max_num_batched_tokens * dep.tp,
        gpu_memory_utilization=util or base.gpu_memory_utilization,
    )
    c = int_field(row, "concurrency")
    n = min(int_field(row, "num_requests"), SERVING_CAP * c)
    isl, osl = int_field(row, "isl"), int_field(row, "osl")
    wl = SimWorkload(Arrival("closed", concurrency=c), fixed(isl, "input_tokens"),
                     fixed(osl, "output_tokens"), num_requests=n)  # fmt: skip
    s = simulate(deployment=dep, workload=wl, config=config, trace_requests=0).summary()
    return {"throughput": float(s["output_tokens_per_s"])}


def predict_spec(row: Mapping[str, str], params: str) -> tuple[dict[str, float], str]:
    spec, said = acceptance(row)
    if row["phase"] == "decode":
        dep = deployment(row, params, expert_parallel=True, attention_dp=row["attention_dp"] == "1")
        return _decode_throughput(row, dep, spec), said
    if row["phase"] != "latency":
        raise SkipRowError(f"phase {row['phase']!r} not replayed for spec")
    # TensorRT-LLM's MoE TP8 with EP2/EP4 inside (MoE TP x EP) is not expressible: priced as
    # TP8, every expert split over the 8 GPUs (the same expert bytes per GPU in expectation)
    dep = deployment(row, params)
    isl, osl = int_field(row, "isl"), int_field(row, "osl")
    est = estimate_deployment(
        dep,
        Workload(input_tokens=isl, output_tokens=osl, batch=1),
        find_compute_bound=False,
        spec=spec,
    )
    return {"throughput": osl / est.e2e_s}, said + "; MoE TP x EP priced as TP"


PREDICTORS = {"pd": predict_pd, "dpep": predict_dpep, "spec": predict_spec}
# the throughput column each phase predicts, in order of preference (the scope the source gives)
THROUGHPUT_COLUMNS = {
    "serving": ("output_tok_s",),
    "prefill": ("input_tok_s_per_node",),
    "decode": ("output_tok_s_per_node", "output_tok_s_per_gpu", "output_tok_s"),
    "latency": ("output_tok_s_per_user",),
}


def measured(row: Mapping[str, str]) -> dict[str, float]:
    """Median TTFT, median ITL (else median TPOT) and the phase's throughput, in SI."""
    choices = (
        ("ttft", ("ttft_ms_median",), MILLI),
        ("itl", ("itl_ms_median", "tpot_ms_median"), MILLI),
        ("throughput", THROUGHPUT_COLUMNS.get(row["phase"], ()), 1.0),
    )
    out = {}
    for metric, columns, scale in choices:
        for column in columns:
            value = float_field(row, column)
            if value is not None:
                out[metric] = value * scale
                break
    return out


def replay(row: Mapping[str, str], params: str, aggregated: bool = False) -> Replay:
    """The row predicted; `aggregated` (pd rows only): by the aggregated stand-in, kind
    `pd-agg` (predict_pd)."""
    label = f"{row['model']} {row['gpu'].split(' ')[0]} {row['phase']} {row.get('isl')}/"
    label += f"{row.get('osl')}" + (f" c{row['concurrency']}" if row.get("concurrency") else "")
    kind = "pd-agg" if aggregated else row["kind"]
    r = Replay(row["source_id"], kind, label, measured(row))
    try:
        if aggregated:
            r.predicted, r.note = predict_pd(row, params, aggregated=True)
        else:
            r.predicted, r.note = PREDICTORS[row["kind"]](row, params)
    except SkipRowError as why:
        r.why = str(why)
    return r
