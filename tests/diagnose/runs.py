"""The runs the diagnosis tests look at, and where each comes from.

- SIMULATED (`sim_run`): `tokenprobe.simulate` on catalog models and GPUs; power, KV use and queue
  come from the simulator's timeline, i.e. from the cost model. Cached per process.
- REAL (`real_run`): tests/data/runs/llamacpp_cpu_*, recorded by tests/diagnose/
  record_llamacpp_runs.py with `tokenprobe bench --telemetry` against the real llama.cpp server
  (SmolLM2-135M, 1 thread, CPU only): host samples, llama.cpp /metrics samples, no GPU.
- HANDWRITTEN GPU logs (`gpu_log`): tests/data/telemetry/nvidia_smi_h100_*.csv, written by hand
  (a formula, not a measurement; see that folder's README) in nvidia-smi's CSV format and imported
  with `read_nvidia_smi_csv`. `with_gpu_log` lays one over a real run's clock (a COMPOSED run:
  real requests and host samples, handwritten GPU samples), to test rules that need both.
- PUBLIC GPU telemetry (`public_dcgm_run`, `public_smi_moment`): the real recordings
  tests/data/telemetry/real_public_* (sources and licenses in that folder's README), imported.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path
from typing import Any

from tokenprobe.records import Run, read_run
from tokenprobe.sim import SchedulerConfig, simulate
from tokenprobe.telemetry import read_nvidia_smi_csv
from tokenprobe.telemetry.prometheus_text import gpu_samples

DATA = Path(__file__).resolve().parent.parent / "data"

SIM_CASES: dict[str, dict[str, Any]] = {
    # decode-heavy, 8 in flight: memory-bound (cost model), power ~53% of TDP
    "decode": dict(input_tokens=128, output_tokens=512, concurrency=8, num_requests=64),
    # long prompts, 64 in flight: compute-bound, ~84% of TDP
    "prefill": dict(input_tokens=4096, output_tokens=4, concurrency=64, num_requests=400),
    # KV for ~30k tokens against 64 x 1.5k: preemption thrash and a queue
    "tiny_kv": dict(
        input_tokens=1024,
        output_tokens=512,
        concurrency=64,
        num_requests=200,
        config=SchedulerConfig(gpu_memory_utilization=0.26),
    ),
    # gamma arrivals with shape 0.05 (very bursty) vs Poisson at the same mean rate
    "bursty": dict(
        input_tokens=512, output_tokens=128, rate_per_s=4, burstiness=0.05, num_requests=400
    ),
    "poisson": dict(input_tokens=512, output_tokens=128, rate_per_s=4, num_requests=400),
    # Poisson far above what one replica serves: arrivals end at ~82 s, the queue drains to ~334 s
    "overloaded": dict(
        model="llama-3.1-70b",
        tp=2,
        input_tokens=1024,
        output_tokens=1024,
        rate_per_s=2,
        num_requests=150,
    ),
    # 0.2 req/s of short requests: the GPU waits most of the time
    "sparse": dict(input_tokens=256, output_tokens=64, rate_per_s=0.2, num_requests=40),
    # 70B over 8 PCIe L40S: all-reduce over PCIe
    "tp8_pcie": dict(
        model="llama-3.1-70b",
        gpu="l40s",
        tp=8,
        input_tokens=512,
        output_tokens=128,
        concurrency=16,
        num_requests=64,
    ),
}


@functools.cache
def _simulate(name: str) -> Run:
    kw = {"model": "llama-3.1-8b", "gpu": "h100-sxm", **SIM_CASES[name]}
    return simulate(**kw).run()


def sim_run(name: str) -> Run:
    """A simulated run (cached; a shallow copy so a test may change its config)."""
    run = _simulate(name)
    return replace(run, config=dict(run.config))


def real_run(name: str) -> Run:
    """A real llama.cpp run folder of tests/data/runs (name without the prefix)."""
    return read_run(DATA / "runs" / f"llamacpp_cpu_{name}")


def gpu_log(name: str, config: dict[str, Any] | None = None) -> Run:
    """A handwritten nvidia-smi log (tests/data/telemetry/nvidia_smi_h100_<name>.csv) as an
    imported run of an H100 SXM."""
    imported = read_nvidia_smi_csv(DATA / "telemetry" / f"nvidia_smi_h100_{name}.csv")
    return imported.to_run({"gpu": "h100-sxm", **(config or {})})


def with_gpu_log(run: Run, name: str) -> Run:
    """A COMPOSED run: `run`'s records and host samples with a handwritten GPU log from t=0."""
    log = gpu_log(name)
    return replace(run, telemetry=log.telemetry, config={**run.config, "gpu": "h100-sxm"})


def public_dcgm_run(name: str, gpu: str) -> Run:
    """A real dcgm-exporter scrape (real_public_dcgm_exporter_<name>.txt) as a one-sample
    imported run of the catalog GPU `gpu`."""
    text = (DATA / "telemetry" / f"real_public_dcgm_exporter_{name}.txt").read_text()
    return Run(kind="imported", config={"gpu": gpu}, telemetry=gpu_samples(text, 0.0))


def public_smi_moment(name: str, which: int) -> Run:
    """Row `which` of a real nvidia-smi capture (real_public_nvidia_smi_<name>.csv: 0 idle,
    1 under gpu-burn) as a one-sample imported run of an H100 SXM."""
    path = DATA / "telemetry" / f"real_public_nvidia_smi_{name}.csv"
    run = read_nvidia_smi_csv(path).to_run({"gpu": "h100-sxm"})
    return replace(run, telemetry=[run.telemetry[which]])
