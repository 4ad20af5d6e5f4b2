"""The `tensorrt-llm-2025h1` profile: TensorRT-LLM 0.17's PyTorch back end serving DeepSeek-R1.

Data: dstack's 8 x H200 runs (benchmarks/data/deepseek_2025h1.csv, `dstack_deepseek_r1_online`,
TensorRT-LLM "0.17.post1.dev (PyTorch backend, commit 9b931c0f)"; `trtllm-serve --backend pytorch
--max_batch_size 512 --max_num_tokens 16384 --tp_size 8 --ep_size 4`), closed loop at 4-128 users,
3,200 tokens in, 800-6,400 out. The `tensorrt-llm` profile (fitted on the C++ back end's TRT
engines, Llama) prices them 237 % too fast, decode 56 % and TTFT 79 % low.

Mechanisms, each sized on the rows before anything is derived (cost model, `step_cost`):
1. Kernels launched from Python. The era's `PyTorchConfig` defaults `use_cuda_graph = False` and
   `enable_overlap_scheduler = False` (NVIDIA/TensorRT-LLM `tensorrt_llm/_torch/pyexecutor/
   config.py`, the early-2025 version whose `PyTorchConfig` also has `print_iter_log = True`;
   read from a stored copy without its commit, so 9b931c0f's own file is not quoted here;
   the disaggregated launcher of that era, `launch_server(..., use_cuda_graph=False,
   enable_overlap_scheduler=False)`), and dstack's command sets neither: every kernel of a
   decode step is dispatched by eager PyTorch and the host work of a step runs in series with
   the GPU. At 4 users the median TPOT is 55.1 ms where the `tensorrt-llm` profile's decode step
   of 4 sequences is 11.8 ms (5.6 ms of it launch and host time); at 8 and 16 users it is
   55.9 and 57.6 ms: flat, as a launch-bound step is. A slower MoE kernel instead (its HBM rate
   cut to give 55 ms at 4) would read 130 ms at 16 users, where more experts are touched, so
   the gap is per-kernel host time: `kernel_overhead_s`, ~47 us per counted kernel (ops.py
   counts 17 per MoE layer, where eager PyTorch launches several ops for each).
2. The era's block-FP8 grouped GEMMs at prefill sizes. At 4 users the fixed-length users send
   together and stay in waves (as the README says for vLLM V0's rows), and without chunked
   context for MLA (engines.TRTLLM_SERVE_2025H1) the wave's 4 x 3,200 tokens are one step:
   median TTFT 1.04 s, against 0.30 s priced (of which the experts' GEMMs are 54 ms). vLLM 0.7.4
   on the same machines measures 0.97 s there (its `vllm-2025h1` profile fits `fp8_moe` 0.23).
   The experts' HBM rate is not what is slow (mechanism 1's flat decode), so the experts'
   tensor rate is: `moe_compute`. These kernels predate DeepSeek's DeepGEMM
   (deepseek-ai/DeepGEMM, Feb 2025), the first fast Hopper block-FP8 grouped GEMM.
Not modelled (measured, left for the held-out figures to show): the KV pool. At 128 users the
running batch (output tokens/s x TPOT) times the whole length each request reserves
(guaranteed-no-evict) is 346k, 353k, 358k and 369k tokens at 800, 1,600, 3,200 and 6,400 output
tokens: a pool of ~355k tokens, where the memory model gives 827k (0.9 of what weights and a
max_num_tokens activation estimate leave, 70,272 B a token of MLA latent). The era's
`estimate_max_kv_cache_tokens` sizes the pool from the peak of a dummy max_num_tokens forward in
eager PyTorch; what that peak was (or whether that commit's pool still held K and V halves for
the latent) is not in the sources read, so the long-output rows' TTFT (queueing for KV) stays far
low. Replayed with a pool of 355k tokens instead (gpu_memory_utilization 0.9 x 355 / 827), the
four 128-user runs read within 11 % on throughput, TPOT and TTFT (142-1,056 s): the pool is the
whole of their gap, but its size is read off held-out rows, so it is not shipped.

Derivation (no search over the simulator): both parameters from the 4-user run alone, by
bisection on the cost model's step time, alternated until both hold (the prefill step pays the
launches too): decode step of 4 sequences at the mean context (3,200 + 800 / 2) = measured
median TPOT; request overhead (the `tensorrt-llm` profile's) + the wave's prefill step =
measured median TTFT. Every other row is held out (benchmarks/fit_profiles.py records both).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence
from dataclasses import replace

from tokenprobe.calibrate import Profile, Row
from tokenprobe.cost import BatchShape, Deployment, step_cost

NAME = "tensorrt-llm-2025h1"
START = "tensorrt-llm"
PARAMETERS = ("kernel_overhead_s", "moe_compute")
FIT_LABEL = "* c4"  # the derivation's run: 4 users
# every other load of dstack's TRT-LLM runs (calibrate.split `label:` patterns)
HOLDOUT = [f"label:* c{c}" for c in (8, 16, 32, 64, 128)]
VERSION = "0.17.post1.dev PyTorch back end (dstack, DeepSeek-R1 8 x H200): fitted on 4 users"
NOTES = (
    "derived by benchmarks/fit_trtllm_era.py from the 4-user run (decode step and the wave's "
    "prefill step by the cost model); the other loads held out; [power]: power_of"
)
BISECT_STEPS = 60
ALTERNATIONS = 4


def _bisect(f: Callable[[float], float], lo: float, hi: float) -> float:
    """The root of an increasing-or-decreasing `f` on [lo, hi] (its sign differs at the ends)."""
    f_lo = f(lo)
    for _ in range(BISECT_STEPS):
        mid = 0.5 * (lo + hi)
        f_mid = f(mid)
        if (f_mid > 0) == (f_lo > 0):
            lo, f_lo = mid, f_mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def shapes(users: int, isl: int, osl: int) -> tuple[BatchShape, BatchShape]:
    """(decode step of `users` sequences at their mean context, the wave's whole-prompt prefill)."""
    decode = BatchShape(decode_seqs=users, decode_context_tokens=round(users * (isl + osl / 2)))
    prefill = BatchShape(
        prefill_tokens=users * isl,
        prefill_attn_pairs=users * isl * (isl + 1) / 2,
        prefill_seqs=users,
    )
    return decode, prefill


def derive(
    dep: Deployment, tpot_s: float, ttft_s: float, users: int, isl: int, osl: int
) -> dict[str, float]:
    """`kernel_overhead_s` and `moe_compute` that make the decode step `tpot_s` and request
    overhead + prefill step `ttft_s` on `dep` (its efficiency the start)."""
    decode, prefill = shapes(users, isl, osl)
    eff = dep.efficiency
    values = {name: getattr(eff, name) for name in PARAMETERS}

    def at(**changed: float) -> Deployment:
        return replace(dep, efficiency=eff.with_overrides({**values, **changed}))

    for _ in range(ALTERNATIONS):
        values["kernel_overhead_s"] = _bisect(
            lambda a: step_cost(at(kernel_overhead_s=a), decode).time_s - tpot_s, 0.0, 1e-3
        )
        values["moe_compute"] = _bisect(
            lambda m: (
                eff.request_overhead_s + step_cost(at(moe_compute=m), prefill).time_s - ttft_s
            ),
            1e-3,
            1.0,
        )
    return values


def fit_row(rows: Sequence[Row]) -> Row:
    """The derivation's row: the 4-user run with both a TPOT and a TTFT."""
    found = [
        r
        for r in rows
        if fnmatch.fnmatchcase(r.label, FIT_LABEL)
        and {"tpot_median", "ttft_median"} <= set(r.measured)
    ]
    if len(found) != 1:
        raise SystemExit(f"{NAME}: expected one 4-user row, found {len(found)}")
    return found[0]


def fit_profile(rows: Sequence[Row], start: Profile) -> Profile:
    """The era profile (parameters derived, no error records yet)."""
    row = fit_row(rows)
    dep = replace(row.deployment, efficiency=start.efficiency, power=start.power)
    workload = row.predict.keywords["workload"]  # type: ignore[attr-defined]  # serving replay
    isl, osl = round(workload.input_len.expected), round(workload.output_len.expected)
    users = int(workload.arrival.concurrency)
    values = derive(dep, row.measured["tpot_median"], row.measured["ttft_median"], users, isl, osl)
    return Profile(
        name=NAME,
        version=VERSION,
        engine="tensorrt-llm",
        vendor="nvidia",
        power_of=START,
        fitted_on=(row.source,),
        notes=NOTES,
        efficiency=start.efficiency.with_overrides(values),
        power=start.power,
        parameters=PARAMETERS,
    )
