"""Measured rows and their predictions: the vocabulary `calibrate` and validation share.

A `Row` is one measured configuration: the deployment it ran on, what was measured (metric -> SI
value) and a function that predicts the same metrics from a deployment whose `efficiency` and
`power` are the parameters being fitted. `observe` pairs every measured metric with its
prediction. `sources.py` turns CSVs in the shared/validation schema into rows; `runs.py` does
the same for run folders. The field parsers here are shared by both.

Engines are named by era where the data shows a difference: `vllm` is vLLM >= 0.10 (V1 engine,
ML.ENERGY v3), `vllm-2024` the 0.5/0.6 releases Argonne ran; `tensorrt-llm` any version.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tokenprobe.cost import (
    DEFAULT_EFFICIENCY,
    DEFAULT_POWER,
    Deployment,
    Efficiency,
    PowerModel,
    engine_release,
    make_deployment,
)
from tokenprobe.errors import ConfigError, TokenprobeError
from tokenprobe.model import ModelSpec
from tokenprobe.sim import SchedulerConfig, capacity_blocks, engine_preset

Predictor = Callable[[Deployment], dict[str, float]]


class SkipRowError(Exception):
    """A row that cannot be run; the message is the reason (counted, not raised to users)."""


@dataclass(frozen=True)
class Row:
    """One measured configuration: what ran, what was measured, and how the model predicts it.

    `source` is the table (e.g. "argonne_all_results"), `run` the measured series the row belongs
    to (source/engine/model/gpu/parallelism: hold-out splits are by run or source, never by row),
    `measured` maps a metric name to its SI value (s, tokens/s, W, J).
    """

    source: str
    run: str
    engine: str
    label: str
    deployment: Deployment
    measured: Mapping[str, float]
    predict: Predictor = field(repr=False, compare=False)
    simulated: bool = False  # predicted by running the serving simulator (~0.1-1 s a call)
    load: float = 0.0  # the concurrency, batch or rate it ran at (sources.offered_load); 0: unknown

    def predictions(self, efficiency: Efficiency, power: PowerModel) -> dict[str, float]:
        return self.predict(replace(self.deployment, efficiency=efficiency, power=power))


@dataclass(frozen=True, slots=True)
class Observation:
    """One metric of one row with its prediction under some parameters."""

    source: str
    run: str
    engine: str
    metric: str
    label: str
    measured: float
    predicted: float

    @property
    def error(self) -> float:
        """Signed relative error (predicted − measured) / measured."""
        return (self.predicted - self.measured) / self.measured


@dataclass
class LoadResult:
    rows: list[Row] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)

    def extend(self, other: LoadResult) -> None:
        self.rows.extend(other.rows)
        self.skipped.update(other.skipped)


def observe(
    rows: Sequence[Row],
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
    power: PowerModel = DEFAULT_POWER,
) -> list[Observation]:
    """Every measured metric of every row, predicted with these parameters."""
    out = []
    for row in rows:
        predicted = row.predictions(efficiency, power)
        for metric, measured in row.measured.items():
            out.append(
                Observation(
                    row.source,
                    row.run,
                    row.engine,
                    metric,
                    row.label,
                    measured,
                    predicted[metric],
                )
            )
    return out


# ------------------------------------------------------------------------------ field parsing

VLLM_CURRENT_FROM = (0, 10, 0)  # the `vllm` profile's releases (V1 only, ML.ENERGY v3's 0.11.1)


def engine_name(engine: str, version: str) -> str:
    """Normalised engine (and era) name of a row: vllm, vllm-2024, tensorrt-llm, ..."""
    e = engine.strip().lower().replace(" ", "-")
    try:  # an era of the engine's preset (sim.PRESETS `eras`: SGLang 0.4, vLLM 0.7-0.9)
        era = engine_preset(e).era_of(version)
    except ConfigError:
        era = None
    if era is not None:
        return era
    if e == "vllm":  # the releases outside the eras (module docstring)
        release = engine_release(version)  # "v0.6.0", "0.10.1rc1 (ROCm)": read once, there
        if release is not None:
            return "vllm" if release >= VLLM_CURRENT_FROM else "vllm-2024"
        return "vllm-2024" if "2024" in version else "vllm"  # "not pinned (2024)"
    try:
        return engine_preset(e).name  # aliases live in the engine presets
    except ConfigError:
        return e


def gpu_name(text: str, source: str) -> str:
    t = text.upper()
    if "GH200" in t:
        return "gh200"
    if "MI300X" in t:
        return "mi300x"
    if "MI325X" in t:
        return "mi325x"
    if "MI355X" in t:
        return "mi355x"
    if "H200" in t:
        return "h200"
    if "H100" in t:
        return "h100-pcie" if "PCIE" in t else "h100-sxm"
    if "A100" in t:
        if "PCIE" in t:
            return "a100-pcie-80gb"
        return "a100-sxm-40gb" if source == "argonne" else "a100-sxm-80gb"
    if "L40S" in t:
        return "l40s"
    if "B200" in t:
        return "b200"
    raise SkipRowError(f"gpu not mapped: {text[:30]}")


def dtype_name(text: str) -> str | None:
    t = text.lower()
    for key, name in (
        ("mxfp4", "mxfp4"),
        ("nvfp4", "fp4"),  # precision.py: "fp4" is NVFP4 (e2m1, an e4m3 scale per 16)
        ("awq", "int4"),
        ("int4", "int4"),
        ("fp8", "fp8"),
        ("int8", "int8"),
        ("bfloat16", "bf16"),
        ("bf16", "bf16"),
        ("float16", "fp16"),
        ("fp16", "fp16"),
    ):
        if key in t:
            return name
    return None


# Every count in these tables (GPUs, parallel degrees, batch, tokens, requests) is >= 1 and far
# below 2^24 (16.8M, workload.MAX_LENGTH_TOKENS); every measured figure (s, tok/s, W, J) far
# below 10^15. A cell outside is a malformed row (skipped and counted), not a value to run.
MAX_COUNT = 2**24
MAX_FIGURE = 1e15


def _number(row: Mapping[str, str], key: str) -> float | None:
    value = row.get(key, "") or ""
    if not value:
        return None
    try:
        number = float(value)
    except ValueError:
        raise SkipRowError(f"{key}={value[:40]!r} is not a number") from None
    if not math.isfinite(number):
        raise SkipRowError(f"{key}={value!r} is not a finite number")
    return number


def int_field(row: Mapping[str, str], key: str, default: int | None = None) -> int:
    """A count cell (truncated to an integer) in [1, MAX_COUNT]; `default` when empty."""
    number = _number(row, key)
    if number is None:
        if default is None:
            raise SkipRowError(f"no {key}")
        return default
    if not 1 <= number <= MAX_COUNT:
        raise SkipRowError(f"{key}={row[key]!r} is not a count in [1, {MAX_COUNT}]")
    return int(number)


def float_field(row: Mapping[str, str], key: str) -> float | None:
    """A measured figure; None when empty or <= 0 (the tables' 'not measured')."""
    number = _number(row, key)
    if number is not None and number > MAX_FIGURE:
        raise SkipRowError(f"{key}={row[key]!r} is above {MAX_FIGURE:g}")
    return number if number is not None and number > 0 else None


def measured_fields(
    row: Mapping[str, str], fields: Sequence[tuple[str, str, float]]
) -> dict[str, float]:
    """{metric: value in SI} for each (metric, column, scale to SI) the row fills."""
    measured = {}
    for metric, column, scale in fields:
        value = float_field(row, column)
        if value:
            measured[metric] = value * scale
    return measured


def require_kv_room(dep: Deployment, config: SchedulerConfig, tokens: float) -> None:
    """Skip a row whose server (`config`) cannot hold one request of `tokens` in our memory
    model."""
    try:
        room = capacity_blocks(dep, config) * config.block_size
    except ConfigError:
        room = 0
    if room < tokens:
        raise SkipRowError("model leaves no KV room for one request in our memory model")


def row_deployment(
    model: str | ModelSpec, gpu: str, row: Mapping[str, str], **kw: Any
) -> Deployment:
    weight = dtype_name(row.get("weight_precision", "")) or "fp16"
    kv = dtype_name(row.get("kv_cache_precision", ""))
    if kv is None:
        kv = "fp8" if weight == "fp8" else ("bf16" if weight in ("bf16", "mxfp4") else "fp16")
    try:
        return make_deployment(
            model,
            gpu,
            tp=int_field(row, "tp", 1),
            pp=int_field(row, "pp", 1),
            weight_dtype=weight,
            kv_dtype=kv,
            **kw,
        )
    except TokenprobeError as exc:
        raise SkipRowError(f"not runnable: {exc}") from None


def run_key(source: str, engine: str, model: str, dep: Deployment) -> str:
    return f"{source}/{engine}/{model}/{dep.gpu.name}/tp{dep.tp}pp{dep.pp}"
