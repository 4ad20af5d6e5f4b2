"""TokenPowerBench's GH200 runs (benchmarks/data/tokenpowerbench_gh200.csv) -> `Row`s: a second
energy-per-token source, independent of ML.ENERGY, on a GPU the power model was not fitted on.

Source: github:chenxuniu/TokenPowerBench@29ed987725d9a06d8276755469754c26093fbc0a:
docs/gh200-validation.md. vLLM 0.10.1.1 (NGC image 25.09) on one GH200 144GB HBM3e, energy
integrated from NVML samples of the selected GPU only (the tool's `gpu_only` scope; the IPMI node
readings are not used). Each run sends its requests one after another (the runner finishes each
before submitting the next), so a request is a batch of one, priced as `tokenprobe estimate`
prices a static batch (`estimate_deployment`); the "ordinary batch" rows run `batch_size`
requests at once. Metrics predicted:
- `single_batch_latency` / `offline_static_batch`: energy per output token (the whole run's GPU
  energy over its output tokens, prefill included), GPU power (that energy over the run's time),
  TTFT and request latency where the row gives them.
- `single_batch_decode_window`: the same run's decode windows only (first token to completion):
  time per output token, power and energy per decode token. The source warns that NVML's ~1 s
  averaging blurs the ~1 s prefill windows into these, so the whole-run row is the exact one.
Nothing is fitted on these rows (the power model keeps its H100 fit): benchmarks/validate.py
prints them in "energy by GPU" as transferred. Rows of a model the catalog lacks (the smoke runs'
Qwen2.5-0.5B) are skipped and counted.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping

from tokenprobe.calibrate.observations import (
    Row,
    SkipRowError,
    engine_name,
    int_field,
    measured_fields,
    row_deployment,
    run_key,
)
from tokenprobe.cost import Deployment, Workload, estimate_deployment
from tokenprobe.errors import TokenprobeError
from tokenprobe.model import get_model
from tokenprobe.units import MILLI

TOKENPOWERBENCH_SOURCE = "tokenpowerbench_gh200"
WHOLE_RUN = ("single_batch_latency", "offline_static_batch")
DECODE_WINDOW = "single_batch_decode_window"
RUN_FIELDS = [
    ("energy_per_output_token", "energy_J_per_output_token", 1.0),
    ("power_per_gpu", "power_W_total", 1.0),  # one GPU per run
    ("ttft", "ttft_ms_mean", MILLI),
    ("batch_latency", "e2e_latency_ms_mean", MILLI),
]
DECODE_FIELDS = [
    ("energy_per_output_token", "energy_J_per_output_token", 1.0),
    ("power_per_gpu", "power_W_total", 1.0),
    ("tpot_mean", "tpot_ms_mean", MILLI),
]


def _whole_run(dep: Deployment, isl: int, osl: int, batch: int) -> dict[str, float]:
    """A batch of `batch` requests of isl/osl tokens, prefill and decode together."""
    est = estimate_deployment(dep, Workload(isl, osl, batch), find_compute_bound=False)
    gpu_j = est.prefill.energy_j + (est.decode.energy_j if est.decode else 0.0)
    return {
        "energy_per_output_token": gpu_j / (batch * osl),
        "power_per_gpu": gpu_j / est.e2e_s / dep.num_gpus,
        "ttft": est.ttft_s,
        "batch_latency": est.e2e_s,
    }


def _decode_window(dep: Deployment, isl: int, osl: int, batch: int) -> dict[str, float]:
    """The decode phase alone: the osl − 1 tokens after the first, from first token to end."""
    est = estimate_deployment(dep, Workload(isl, osl, batch), find_compute_bound=False)
    if est.decode is None or osl < 2:
        raise SkipRowError("no decode phase")
    decode_s = est.e2e_s - est.ttft_s
    return {
        "energy_per_output_token": est.decode.energy_j / (batch * (osl - 1)),
        "power_per_gpu": est.decode.energy_j / decode_s / dep.num_gpus,
        "tpot_mean": decode_s / (osl - 1),
    }


def tokenpowerbench_rows(row: Mapping[str, str]) -> Iterator[Row]:
    """The Row of one CSV line (module docstring)."""
    model = row["model_hf_id"] or row["model"]
    try:
        get_model(model)
    except TokenprobeError:
        raise SkipRowError(f"model not in catalog: {model}") from None
    kind = row["workload_type"]
    if kind not in (*WHOLE_RUN, DECODE_WINDOW):
        raise SkipRowError(f"TokenPowerBench workload_type {kind!r} not mapped")
    dep = row_deployment(model, row["gpu"], row)  # "GH200 144G HBM3e" is gh200-144gb's alias
    batch, isl, osl = int_field(row, "batch_size"), int_field(row, "isl"), int_field(row, "osl")
    decode = kind == DECODE_WINDOW
    measured = measured_fields(row, DECODE_FIELDS if decode else RUN_FIELDS)
    if not measured:
        raise SkipRowError("no metric")
    engine = engine_name(row["engine"], row.get("engine_version", ""))
    predict = _decode_window if decode else _whole_run
    phase = "decode window" if decode else "whole run"
    yield Row(
        TOKENPOWERBENCH_SOURCE,
        f"{run_key(TOKENPOWERBENCH_SOURCE, engine, model, dep)}/B{batch}",
        engine,
        f"{row['model']} {dep.gpu.name} B{batch} {isl}/{osl} {phase}",
        dep,
        measured,
        functools.partial(predict, isl=isl, osl=osl, batch=batch),
    )
