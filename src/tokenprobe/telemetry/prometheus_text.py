"""Parse Prometheus text exposition (dcgm-exporter, tokenprobe's own exporter, LLM servers).

`parse_exposition(text)` reads the text format (version 0.0.4): `# HELP`/`# TYPE` comments,
`name{label="value",...} value [timestamp_ms]`, with escaped label values and NaN/±Inf. A line it
cannot read (or longer than `MAX_LINE_CHARS`) is skipped and counted, never fatal. NaN and ±Inf
are kept in the `Metric`s (the format allows them: a gauge with no data, a histogram's +Inf
bucket), while `gpu_samples` and `server_sample` leave out a value that is not a reading of
theirs: not finite, negative (power, clocks, counts, ratios are >= 0), or a bit mask beyond 64
bits. A left-out value is a gap in that sample (the field stays None), as for a metric the
exporter does not send: the convention of measurement logs here.

`gpu_samples(text, t_s)` turns one scrape into one `TelemetrySample` per GPU (label `gpu`), from
dcgm-exporter's fields or tokenprobe's own `tokenprobe_gpu_*` gauges, converting units:

    DCGM_FI_DEV_POWER_USAGE               W
    DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION  mJ  -> J
    DCGM_FI_DEV_GPU_UTIL                  %   -> 0..1
    DCGM_FI_DEV_MEM_COPY_UTIL             %   -> 0..1
    DCGM_FI_DEV_FB_USED                   MiB -> bytes
    DCGM_FI_DEV_SM_CLOCK, _MEM_CLOCK      MHz -> Hz
    DCGM_FI_DEV_GPU_TEMP                  °C
    DCGM_FI_PROF_PCIE_TX_BYTES, _RX_BYTES bytes/s
    DCGM_FI_DEV_CLOCKS_EVENT_REASONS      bit mask (DCGM >= 3.3's name; it wins over the next)
    DCGM_FI_DEV_CLOCK_THROTTLE_REASONS    bit mask (the older name of the same field)
    DCGM_FI_DEV_ENFORCED_POWER_LIMIT      W   (the limit the driver enforces, all limiters
                                               taken into account; it wins over the next one)
    DCGM_FI_DEV_POWER_MGMT_LIMIT          W   (the power-management limit that is set)

Neither power limit is among dcgm-exporter's default counters: they are there when its counters
file lists them.

MIG: on a GPU with MIG enabled, dcgm-exporter also writes one series per GPU instance, labelled
`GPU_I_ID` / `GPU_I_PROFILE` on top of the same `gpu` label as the whole GPU's series (the A100
example of its docs has `DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",...,GPU_I_PROFILE="1g.5gb",
GPU_I_ID="13",...}` beside `DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",...}`). A `TelemetrySample` is
one whole GPU, so instance series are left out of it: an instance's figure (the activity of its
slice, the memory of its partition) is not the GPU's, and keeping it would overwrite the GPU's own
value of the same field depending on nothing but line order. It is the selection a per-GPU
PromQL query makes (`{GPU_I_ID=""}`: an empty label value counts as absent, here too). A field
that has only instance series stays None for the GPU rather than a slice's value posing as the
whole GPU's.

`server_sample(text, t_s)` reads an inference server's own view of queueing and capacity (vLLM,
SGLang, llama.cpp `/metrics`): running and waiting requests, KV-cache usage (0..1), preemptions,
the prefix cache's queries and hits, as a `records.ServerSample` (server_metrics.jsonl).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any

from tokenprobe.records import ServerSample, TelemetrySample
from tokenprobe.units import MEGA, MILLI, MiB

_LINE = re.compile(
    r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)"
    r"(?:\{(?P<labels>.*)\})?"
    r"\s+(?P<value>\S+)"
    r"(?:\s+(?P<ts>-?\d{1,19}))?\s*$"  # ms since the epoch fit 19 digits (int64)
)
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}
MAX_LINE_CHARS = 64 * 1024  # no exporter writes such a line; the regexes backtrack on long ones
MAX_BIT_MASK = 2**64 - 1


@dataclass(frozen=True, slots=True)
class Metric:
    """One exposition line: name, labels, value, and the optional timestamp in ms."""

    name: str
    labels: dict[str, str]
    value: float
    timestamp_ms: int | None = None


@dataclass(slots=True)
class Exposition:
    metrics: list[Metric] = field(default_factory=list)
    skipped_lines: int = 0
    skip_reasons: list[str] = field(default_factory=list)


def _labels(text: str) -> dict[str, str] | None:
    out: dict[str, str] = {}
    position = 0
    text = text.strip()
    while position < len(text):
        match = _LABEL.match(text, position)
        if match is None:
            return None
        value = re.sub(r"\\[\\\"n]", lambda m: _UNESCAPE[m.group(0)], match.group(2))
        out[match.group(1)] = value
        position = match.end()
    return out


def _number(text: str) -> float:
    lowered = text.lower()
    if lowered in ("+inf", "inf"):
        return math.inf
    if lowered == "-inf":
        return -math.inf
    return float(text)  # "NaN" parses too


def parse_exposition(text: str) -> Exposition:
    """Every metric line of a scrape; unreadable lines are counted in `skipped_lines`."""
    result = Exposition()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line) if len(line) <= MAX_LINE_CHARS else None
        labels = _labels(match.group("labels") or "") if match else None
        try:
            value = _number(match.group("value")) if match else None
        except ValueError:
            value = None
        if match is None or labels is None or value is None:
            result.skipped_lines += 1
            if len(result.skip_reasons) < 10:
                result.skip_reasons.append(f"line {number}: not a metric line: {line[:80]!r}")
            continue
        ts = match.group("ts")
        result.metrics.append(Metric(match.group("name"), labels, value, int(ts) if ts else None))
    return result


# metric name -> (TelemetrySample field, factor to SI)
GPU_METRICS: dict[str, tuple[str, float]] = {
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", 1.0),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("energy_j", MILLI),
    "DCGM_FI_DEV_GPU_UTIL": ("gpu_util", 0.01),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("mem_util", 0.01),
    "DCGM_FI_DEV_FB_USED": ("mem_used_bytes", MiB),
    "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_hz", MEGA),
    "DCGM_FI_DEV_MEM_CLOCK": ("mem_clock_hz", MEGA),
    "DCGM_FI_DEV_GPU_TEMP": ("temp_c", 1.0),
    "DCGM_FI_PROF_PCIE_TX_BYTES": ("pcie_tx_bytes_per_s", 1.0),
    "DCGM_FI_PROF_PCIE_RX_BYTES": ("pcie_rx_bytes_per_s", 1.0),
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": ("throttle_reasons", 1.0),  # DCGM >= 3.3
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": ("throttle_reasons", 1.0),  # its name before 3.3
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": ("power_limit_w", 1.0),
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": ("power_limit_w", 1.0),
    # tokenprobe's own exporter (exporter.py), already in SI units
    "tokenprobe_gpu_power_watts": ("power_w", 1.0),
    "tokenprobe_gpu_energy_joules": ("energy_j", 1.0),
    "tokenprobe_gpu_utilization_ratio": ("gpu_util", 1.0),
    "tokenprobe_gpu_memory_utilization_ratio": ("mem_util", 1.0),
    "tokenprobe_gpu_memory_used_bytes": ("mem_used_bytes", 1.0),
    "tokenprobe_gpu_sm_clock_hertz": ("sm_clock_hz", 1.0),
    "tokenprobe_gpu_memory_clock_hertz": ("mem_clock_hz", 1.0),
    "tokenprobe_gpu_temperature_celsius": ("temp_c", 1.0),
    "tokenprobe_gpu_pcie_tx_bytes_per_second": ("pcie_tx_bytes_per_s", 1.0),
    "tokenprobe_gpu_pcie_rx_bytes_per_second": ("pcie_rx_bytes_per_s", 1.0),
    "tokenprobe_gpu_throttle_reasons": ("throttle_reasons", 1.0),
    "tokenprobe_gpu_power_limit_watts": ("power_limit_w", 1.0),
}
# metrics whose value replaces one another metric gave the same field (in any line order)
PREFERRED_METRICS = frozenset(
    {"DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"}
)


# labels dcgm-exporter puts on the series of one MIG GPU instance (not the whole GPU)
MIG_INSTANCE_LABELS = ("GPU_I_ID", "GPU_I_PROFILE")


def is_mig_instance(metric: Metric) -> bool:
    """True for a dcgm-exporter series of one MIG GPU instance rather than of the whole GPU."""
    return any(metric.labels.get(label) for label in MIG_INSTANCE_LABELS)


def _reading(value: float, field: str) -> bool:
    """True for a value a sample can hold (module docstring)."""
    if not math.isfinite(value) or value < 0:
        return False
    return field != "throttle_reasons" or value <= MAX_BIT_MASK


def gpu_samples(text: str, t_s: float) -> list[TelemetrySample]:
    """One sample per `gpu` label found in a scrape taken at run-relative time `t_s`, from the
    whole-GPU series only (MIG instance series are left out: module docstring)."""
    per_gpu: dict[int | None, dict[str, Any]] = defaultdict(dict)
    preferred: set[tuple[int | None, str]] = set()  # (gpu, field) set by a PREFERRED_METRICS
    for metric in parse_exposition(text).metrics:
        target = GPU_METRICS.get(metric.name)
        if target is None or not _reading(metric.value, target[0]) or is_mig_instance(metric):
            continue
        gpu = metric.labels.get("gpu")
        # isdecimal, not isdigit: "²" is a digit int() cannot read
        index = int(gpu) if gpu is not None and gpu.isdecimal() and len(gpu) < 8 else None
        name, factor = target
        if metric.name in PREFERRED_METRICS:
            preferred.add((index, name))
        elif (index, name) in preferred:
            continue
        value = metric.value * factor
        per_gpu[index][name] = int(value) if name == "throttle_reasons" else value
    return [
        replace(TelemetrySample(t_s=t_s, gpu_index=index), **values)
        for index, values in sorted(per_gpu.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))
    ]


# metric -> (ServerSample field, server); all are already ratios or counts
SERVER_METRICS: dict[str, tuple[str, str]] = {
    "vllm:num_requests_running": ("requests_running", "vllm"),
    "vllm:num_requests_waiting": ("requests_waiting", "vllm"),
    "vllm:gpu_cache_usage_perc": ("kv_cache_usage", "vllm"),  # a 0..1 ratio despite the name
    "vllm:kv_cache_usage_perc": ("kv_cache_usage", "vllm"),
    "vllm:num_preemptions_total": ("preemptions_total", "vllm"),
    # prefix cache, in prompt tokens (vLLM V1 `vllm/v1/metrics/loggers.py`: counters
    # prefix_cache_queries / prefix_cache_hits, exposed with prometheus_client's _total)
    "vllm:prefix_cache_queries_total": ("prefix_cache_queries_total", "vllm"),
    "vllm:prefix_cache_hits_total": ("prefix_cache_hits_total", "vllm"),
    "vllm:gpu_prefix_cache_hit_rate": ("prefix_cache_hit_rate", "vllm"),  # V0's block hit rate
    "sglang:cache_hit_rate": ("prefix_cache_hit_rate", "sglang"),  # radix cache, a gauge
    "sglang:num_running_reqs": ("requests_running", "sglang"),
    "sglang:num_queue_reqs": ("requests_waiting", "sglang"),
    "sglang:token_usage": ("kv_cache_usage", "sglang"),
    "llamacpp:requests_processing": ("requests_running", "llama.cpp"),
    "llamacpp:requests_deferred": ("requests_waiting", "llama.cpp"),
    "llamacpp:kv_cache_usage_ratio": ("kv_cache_usage", "llama.cpp"),
}


def server_sample(text: str, t_s: float) -> ServerSample:
    """Sum each known metric over its label sets (several models or engines) into one sample."""
    values: dict[str, Any] = {}
    source: str | None = None
    for metric in parse_exposition(text).metrics:
        target = SERVER_METRICS.get(metric.name)
        if target is None or not _reading(metric.value, target[0]):
            continue
        name, source = target
        if name in ("kv_cache_usage", "prefix_cache_hit_rate"):  # ratios: the largest, no sum
            values[name] = max(values.get(name, 0.0), metric.value)
        else:
            values[name] = values.get(name, 0.0) + metric.value
    return replace(ServerSample(t_s=t_s, source=source), **values)
