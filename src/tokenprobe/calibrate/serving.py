"""Online-serving benchmark rows -> `Row`s predicted by the serving simulator.

Rows in the common validation schema from serving clients (`vllm bench serve`,
`sglang.bench_serving`; benchmarks/data/README.md lists the sources) whose `workload_type` is one
of three load kinds, each replayed through `tokenprobe.sim` on the row's deployment:
- `offline_max_throughput...`: every request sent at t = 0 (request rate inf); measured output
  tokens/s and median TPOT (TTFT there is queueing behind ~1000 requests, left out). For
  ShareGPT the throughput is left out too: an offline run lasts until its longest answers end,
  so its tokens/s depends on the tail of the length distribution, which mean lengths do not
  give (the median TPOT, set by the running batch, does not).
- `closed_loop_concurrency`: `concurrency` users, each sending the next request when its last one
  ends; median TTFT, median TPOT (or ITL) and output tokens/s.
- `online_poisson_qps`: Poisson arrivals at `request_rate_qps`; the same metrics.
At most `SIM_REQUESTS` requests are simulated (the row's count when smaller).

Lengths: `random ... uniform in [1, L]` datasets (sglang.bench_serving's random_range_ratio 0)
draw uniform lengths, as do datasets that state both ranges ("input uniform in [a, b], output
uniform in [c, d]", InferenceMAX's range ratio 0.8); otherwise fixed lengths at the row's mean
(`isl_mean`/`osl_mean`, derived by the source or from its totals), since ShareGPT and
early-stopping random rows have no fixed length. Rows with neither are skipped.

Engine settings the sources do not restate are the engines' own defaults
(`tokenprobe.sim.engines.engine_defaults`, which says where each comes from; a vLLM row of a
version that ran the V0 engine, before 0.8.0, gets V0's, and an MLA model on vLLM before 0.8.0 that
version's KV bytes and extra weights, `tokenprobe.sim.vllm_version_defaults`), overridden by
flags found in the row's notes (the serving command), spelled as the engine's preset says
(`tokenprobe.sim.PRESETS`): vLLM --max-num-seqs, --max-num-batched-tokens,
--gpu-memory-utilization; SGLang --max-running-requests, --chunked-prefill-size,
--mem-fraction-static, --max-prefill-tokens, --schedule-conservativeness, --enable-mixed-chunk,
--scheduler-recv-interval (sim/sglang_recv.py) and --disable-radix-cache (then no prefix
caching, and SGLang admits by the exact peak check of ignore_eos requests:
sim/sglang_scheduler.py); TensorRT-LLM --max_batch_size, --max_num_tokens. vLLM's
--async-scheduling sets `overlap_schedule` (host work hidden under the GPU, sim/sglang_overlap.py)
for the held-out sources that ask for it (`overlap`, scheduler_for).
Each engine sizes its KV cache by its own rule (`SchedulerConfig.memory_rule`; vLLM's from the
profile run at the server's own limits) and keeps prefix caching on (vLLM v1, SGLang's radix
cache, TensorRT-LLM's block reuse), so a preempted request finds its computed blocks again
(TensorRT-LLM never preempts).
A row that publishes a median ITL is predicted by the median gap between the tokens of
`ITL_TRACE_REQUESTS` traced requests (the typical step), not by the median TPOT (which also
carries the prefills that stall a request). Rows marked COPIED BLOCK in their notes repeat
another GPU's figures (benchmarks/data/README.md) and are left out.
The KV cache is 16-bit unless the command passes --kv-cache-dtype fp8 (vLLM's and SGLang's
"auto" is the model's activation dtype, also for FP8 checkpoints). MoE rows with ep > 1 spread
experts over the TP GPUs with tensor-parallel attention; SGLang data-parallel attention rows
(dp > 1) are skipped unless the source's mapper asks for them (`dp_attention`: then each rank
schedules its own requests and the ranks step together, `simulate_fleet(dp=N)`, round-robin as
SGLang's DataParallelController sends them; SGLang 0.4 rows get that version's chunk default and
its --enable-dp-attention settings, sim/sglang_dp.py), as are speculative-decoding runs (the
sources leave them out) and runs of at most `MIN_OUTPUT_TOKENS` output tokens per request
(GPUStack's 128/4 runs: 1000 requests of 4 tokens finish at 44 requests/s on vLLM, a rate set
by the API server's CPU per request, which the simulator does not model; `estimate` prices host
CPU separately, E8).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from dataclasses import replace

from tokenprobe.calibrate.observations import (
    Row,
    SkipRowError,
    engine_name,
    float_field,
    gpu_name,
    int_field,
    measured_fields,
    require_kv_room,
    row_deployment,
    run_key,
)
from tokenprobe.cost import Deployment
from tokenprobe.sim import (
    SchedulerConfig,
    engine_defaults,
    engine_preset,
    rank_router_for,
    server_config,
    simulate,
    simulate_fleet,
    vllm_version_defaults,
)
from tokenprobe.units import MILLI
from tokenprobe.workload import Arrival, LengthDist, Workload, fixed

SIM_REQUESTS = 3000
ITL_TRACE_REQUESTS = 500  # requests whose every token time is kept, for the median ITL
MIN_OUTPUT_TOKENS = 8
COPIED_BLOCK = "COPIED BLOCK"  # marks a row whose figures repeat another GPU's (data README)
# source tables as named in reports: the collection, then the engine (one table mixes engines)
SOURCE_PREFIX = {
    "gpustack_performance_lab": "gpustack",
    "datacrunch_h200_sglang": "datacrunch",
    "sglang_benchmark_vllm_060": "sglang_v0.3_bench",
    # DeepSeek-V3/R1 runs of early 2025 (benchmarks/data/deepseek_2025h1.csv)
    "dstack_deepseek_r1_online": "dstack_online",
    "dstack_deepseek_r1_offline": "dstack_offline",
    "sglang_dsv3_h200_v041": "sglang_dsv3",
    "vllm_issue_12568": "vllm_issue",
}
SERVING_FIELDS = (
    ("output_throughput", "output_tok_s", 1.0),
    ("ttft_median", "ttft_ms_median", MILLI),
    ("tpot_median", "tpot_ms_median", MILLI),
    ("itl_median", "itl_ms_median", MILLI),
)
LOADS = ("offline_max_throughput", "closed_loop_concurrency", "online_poisson_qps")


def _flag(notes: str, *names: str) -> float | None:
    """The value of the first of `names` given in the serving command (`--x 5` or `--x=5`)."""
    for name in names:
        m = re.search(rf"{re.escape(name)}[ =]([0-9.]+)(?![0-9.])", notes)
        if m:
            return float(m.group(1))
    return None


def scheduler_for(
    engine: str, dep: Deployment, notes: str, version: str = "", overlap: bool = False
) -> SchedulerConfig:
    """The engine's default scheduler on this GPU (`sim.engines.engine_defaults`; for a vLLM
    `version` of the early-2025 era, `sim.vllm_version_defaults`), with the serving command's
    overrides (module docstring), as the server of that version runs them (`sim.server_config`:
    SGLang 0.4's settings, applied after the command's, as its server_args.py does). With
    `overlap`, a switch that overlaps host and GPU work (vLLM's --async-scheduling) sets
    `overlap_schedule`; off for the sources the shipped profiles were fitted on, which were
    fitted with that host time in series (GPUStack's 31 --async-scheduling rows: re-recording
    the `vllm` profile under it is that profile's call)."""
    base = _base_scheduler(engine, dep, notes, version)
    flags = engine_preset(engine).flags  # the preset's spellings of each setting
    seqs = _flag(notes, *flags.get("max_num_seqs", ()))
    chunk_flag = _flag(notes, *flags.get("max_num_batched_tokens", ()))
    util = _flag(notes, *flags.get("gpu_memory_utilization", ()))
    max_seqs = int(seqs or base.max_num_seqs)
    tokens = int(chunk_flag or base.max_num_batched_tokens)
    config = replace(
        base,
        max_num_seqs=max_seqs,
        # vLLM and TensorRT-LLM need a step budget of at least one token a sequence; SGLang's
        # chunk bounds prefill tokens only
        max_num_batched_tokens=tokens if base.scheduling == "sglang" else max(tokens, max_seqs),
        gpu_memory_utilization=util or base.gpu_memory_utilization,
    )
    if overlap and _switch(notes, *flags.get("overlap_schedule", ())):
        config = replace(config, overlap_schedule=True)
    config = _sglang_flags(config, notes, flags) if base.scheduling == "sglang" else config
    return server_config(engine, dep, config, version, chunk_flag=chunk_flag is not None)


def _switch(notes: str, *names: str) -> bool:
    """Whether a flag without a value (`--async-scheduling`) is in the serving command."""
    return any(re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", notes) for n in names)


def _base_scheduler(engine: str, dep: Deployment, notes: str, version: str) -> SchedulerConfig:
    if engine_preset(engine).name != "vllm" or not version:
        return engine_defaults(engine, dep.gpu, dep.tp)
    # V0 sizes its step budget by max_model_len: the command's, else the model's context; the
    # env settings may sit in the version cell ("0.7.0 (VLLM_USE_V1=1)") or the command
    max_len = _flag(notes, "--max-model-len", "--max_model_len")
    return vllm_version_defaults(dep, version, f"{version} {notes}", int(max_len or 0) or None)


def _sglang_flags(
    config: SchedulerConfig, notes: str, flags: Mapping[str, tuple[str, ...]]
) -> SchedulerConfig:
    """SGLang's scheduler settings in the serving command (sim/sglang_scheduler.py)."""
    prefill = _flag(notes, *flags.get("max_prefill_tokens", ()))
    conservativeness = _flag(notes, *flags.get("schedule_conservativeness", ()))
    recv = _flag(notes, *flags.get("scheduler_recv_interval", ()))
    return replace(
        config,
        scheduler_recv_interval=int(recv or config.scheduler_recv_interval),
        max_prefill_tokens=int(prefill or config.max_prefill_tokens),
        schedule_conservativeness=(
            config.schedule_conservativeness if conservativeness is None else conservativeness
        ),
        enable_mixed_chunk=config.enable_mixed_chunk or "--enable-mixed-chunk" in notes,
        prefix_caching=config.prefix_caching and "--disable-radix-cache" not in notes,
    )


# a dataset cell that states both ranges, e.g. InferenceMAX's --random-range-ratio 0.8 rows:
# "input uniform in [819, 1024], output uniform in [819, 1024]"
UNIFORM_RANGES = re.compile(
    r"input uniform in \[(\d+), (\d+)\].*output uniform in \[(\d+), (\d+)\]"
)


def _lengths(row: Mapping[str, str]) -> tuple[LengthDist, LengthDist]:
    ranges = UNIFORM_RANGES.search(row.get("dataset", ""))
    if ranges:
        lo_in, hi_in, lo_out, hi_out = (int(g) for g in ranges.groups())
        return (
            LengthDist("uniform", low=lo_in, high=hi_in, name="input_tokens"),
            LengthDist("uniform", low=lo_out, high=hi_out, name="output_tokens"),
        )
    if "uniform in [1, L]" in row.get("dataset", ""):
        top_in, top_out = int_field(row, "isl"), int_field(row, "osl")
        return (
            LengthDist("uniform", low=1, high=top_in, name="input_tokens"),
            LengthDist("uniform", low=1, high=top_out, name="output_tokens"),
        )
    isl = float_field(row, "isl_mean") or float_field(row, "isl")
    osl = float_field(row, "osl_mean") or float_field(row, "osl")
    if isl is None or osl is None:
        raise SkipRowError("no input/output lengths (neither mean nor nominal)")
    return fixed(max(1, round(isl)), "input_tokens"), fixed(max(1, round(osl)), "output_tokens")


def _arrival(row: Mapping[str, str]) -> tuple[str, Arrival]:
    kind = row.get("workload_type", "")
    if kind.startswith("offline_max_throughput"):
        return "offline", Arrival("offline")
    if kind.startswith("closed_loop_concurrency"):
        return "closed", Arrival("closed", concurrency=int_field(row, "concurrency"))
    if kind.startswith("online_poisson_qps"):
        rate = float_field(row, "request_rate_qps")
        if rate is None:
            raise SkipRowError("Poisson row without a request rate")
        return "poisson", Arrival("poisson", rate_per_s=rate)
    raise SkipRowError(f"workload not one of {', '.join(LOADS)}: {kind[:40]}")


def _serve(
    dep: Deployment,
    workload: Workload,
    config: SchedulerConfig,
    trace: int = 0,
    engine: str | None = None,
    exact_steps: bool = True,
) -> dict[str, float]:
    if dep.attention_dp:  # its ranks each schedule their own requests (sim/sglang_dp.py)
        # dispatched and padded as `engine` does (its preset: SGLang round-robins, no padding),
        # the call validate_dp_rows.py makes
        fleet = simulate_fleet(
            dep, workload, dp=dep.dp, router=rank_router_for(engine), config=config,
            engine=engine, trace_requests=trace,
        )  # fmt: skip
        s = fleet.to_dict()
    else:
        # every step priced exactly (no StepMemo interpolation): a fit's residuals near its
        # minimum are of the memo's size (<= 0.5 %), and the shipped profiles were fitted so;
        # a source held out of every fit may take the memo (`serving_rows(exact_steps=False)`)
        result = simulate(
            deployment=dep,
            workload=workload,
            config=config,
            trace_requests=trace,
            exact_steps=exact_steps,
        )
        s = result.summary()
    out = {"output_throughput": float(s["output_tokens_per_s"])}
    for metric, key in (
        ("ttft_median", "ttft_s"),
        ("tpot_median", "tpot_s"),
        ("itl_median", "itl_s"),
    ):
        value = s[key]["p50"]
        if value is not None:
            out[metric] = float(value)
    return out


def serving_rows(
    row: Mapping[str, str],
    dp_attention: bool = False,
    exact_steps: bool = True,
    overlap: bool = False,
) -> Iterator[Row]:
    """One row of an online-serving benchmark (module docstring). With `dp_attention` a row of
    dp > 1 runs attention data-parallel over its tp GPUs with the experts spread over them
    (`Deployment.attention_dp`; SGLang 0.4's --enable-dp-attention sets dp = tp, server_args.py,
    and split its MoE by TP, which moves the same expert bytes); without, it is skipped."""
    if COPIED_BLOCK in row.get("notes", ""):
        raise SkipRowError("a copied result block (benchmarks/data/README.md)")
    dp = int_field(row, "dp", 1)
    if dp > 1 and not dp_attention:
        raise SkipRowError("data-parallel attention (SGLang --enable-dp-attention)")
    engine = engine_name(row["engine"], row.get("engine_version", ""))
    notes = row.get("notes", "")
    model = row.get("model_hf_id") or row["model"]
    kv = "fp8" if re.search(r"--kv[-_]cache[-_]dtype[ =]fp8", notes) else "bf16"
    ep = int_field(row, "ep", 1)
    dep = row_deployment(
        model,
        gpu_name(row["gpu"], row["source_id"]),
        {**row, "kv_cache_precision": kv},
        expert_parallel=ep > 1 or dp > 1,
        attention_dp=dp > 1,
    )
    load, arrival = _arrival(row)
    input_len, output_len = _lengths(row)
    if output_len.expected <= MIN_OUTPUT_TOKENS:
        raise SkipRowError("front-end-bound: a few output tokens per request (module docstring)")
    requests = min(int_field(row, "num_requests", SIM_REQUESTS), SIM_REQUESTS)
    workload = Workload(arrival, input_len, output_len, num_requests=requests, name=load)
    left_out = set()
    if load == "offline":
        left_out.add("ttft_median")
        if "sharegpt" in row.get("dataset", "").lower():
            left_out.add("output_throughput")
    measured = measured_fields(row, [f for f in SERVING_FIELDS if f[0] not in left_out])
    if "tpot_median" in measured:  # vllm bench serve's ITL splits chunks; TPOT is the cleaner one
        measured.pop("itl_median", None)
    if not measured:
        raise SkipRowError("no throughput or latency figure")
    source = f"{SOURCE_PREFIX.get(row['source_id'], row['source_id'])}_{engine}"
    version = row.get("engine_version", "")
    config = scheduler_for(engine, dep, notes, version, overlap=overlap)
    require_kv_room(dep, config, input_len.expected + output_len.expected)
    label = f"{row['model']} {dep.gpu.name} tp{dep.tp} {load} {input_len.expected:.0f}/"
    label += f"{output_len.expected:.0f}"
    label += f" c{arrival.concurrency}" if load == "closed" else ""
    label += f" {arrival.rate_per_s:g}qps" if load == "poisson" else ""
    # the median gap between tokens is the typical step, not the mean per request: it needs the
    # token times of (a sample of) requests
    trace = ITL_TRACE_REQUESTS if "itl_median" in measured else 0
    predict = functools.partial(
        _serve,
        workload=workload,
        config=config,
        trace=trace,
        engine=engine,
        exact_steps=exact_steps,
    )
    key = f"{run_key(source, engine, model, dep)}/{load}"
    yield Row(source, key, engine, label, dep, measured, predict, simulated=True)
