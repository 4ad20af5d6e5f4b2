"""The record types of a run (see the package docstring for what each field means)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, TypeVar

from tokenprobe.errors import SchemaError

RunKind = Literal["simulated", "measured", "imported"]
RUN_KINDS: tuple[str, ...] = ("simulated", "measured", "imported")
TOKEN_COUNT_SOURCES: tuple[str, ...] = ("usage", "tokenizer", "chunks", "sim")


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One request, simulated or measured.

    Times (s, run-relative, one monotonic clock):
    - `scheduled_s`: when the workload said the request should be sent (open loop) or arrive.
    - `sent_s`: when it was really sent (measured) or arrived at the server (simulated).
    - `first_token_s`, `finish_s`: first output token seen, last byte of the response seen.
    - `token_times_s`: output arrival times, in order. The simulator writes one entry per token.
      The load generator writes one entry per text-bearing streamed chunk (it cannot know how
      many tokens a chunk holds), so its list can be shorter than `output_tokens` (several tokens
      in a chunk, or special tokens streamed as empty text); ITL is then chunk to chunk, as
      vLLM's benchmark counts it, and TPOT uses `output_tokens`. May be empty when not recorded (the
      simulator keeps them only for a sample of requests on big runs); then ITL is not known for
      this request but TTFT/TPOT/E2E still are.
    - `queue_s`: server-side waiting before the first scheduling, when known (the simulator knows).
    - `frontend_wait_s`: waiting in front of the server's API-server process before it started
      parsing the request (the simulator's front end, sim/frontend.py; None when not modelled).

    `error_kind` None means success; otherwise e.g. "http_500", "timeout", "disconnect",
    "malformed_stream", "rejected_too_long". `token_count_source` says where `output_tokens` came
    from: "usage" (server's usage block), "tokenizer", "chunks" (one per streamed chunk) or "sim".
    `extra` holds server-reported timings and other scalars (SI units, suffix in the key).
    """

    request_id: str
    scheduled_s: float
    sent_s: float
    first_token_s: float | None
    finish_s: float | None
    input_tokens: int
    output_tokens: int
    token_times_s: list[float] = field(default_factory=list)
    queue_s: float | None = None
    error_kind: str | None = None
    error_message: str | None = None
    token_count_source: str = "usage"
    extra: dict[str, float | str] = field(default_factory=dict)
    frontend_wait_s: float | None = None

    @property
    def ok(self) -> bool:
        """True when the request succeeded (no error recorded)."""
        return self.error_kind is None

    @property
    def ttft_s(self) -> float | None:
        """Time to first token: first_token_s - sent_s."""
        if self.first_token_s is None:
            return None
        return self.first_token_s - self.sent_s

    @property
    def e2e_s(self) -> float | None:
        """End-to-end latency: finish_s - sent_s."""
        if self.finish_s is None:
            return None
        return self.finish_s - self.sent_s

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first: (finish - first) / (output_tokens - 1).

        vLLM's benchmark_serving definition ((latency - ttft) / (output_len - 1)); None when
        fewer than two tokens were produced or a time is missing.
        """
        if self.first_token_s is None or self.finish_s is None or self.output_tokens < 2:
            return None
        return (self.finish_s - self.first_token_s) / (self.output_tokens - 1)

    @property
    def itl_s(self) -> list[float]:
        """Inter-token latencies: gaps between successive token *arrivals*.

        The k tokens of one chunk share an arrival time and count as one arrival, so the gaps are
        chunk to chunk, as vLLM's benchmark_serving counts them. Empty when token times were not
        recorded.
        """
        times = self.token_times_s
        return [b - a for a, b in itertools.pairwise(times) if b != a]

    def to_dict(self) -> dict[str, Any]:
        # shallow: dataclasses.asdict deep-copies and costs ~1.5 ms for a 512-token record,
        # the load generator's largest per-request cost
        d = {name: getattr(self, name) for name in _RECORD_FIELDS}
        d["token_times_s"] = list(self.token_times_s)
        d["extra"] = dict(self.extra)
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "record") -> RequestRecord:
        """Build from a JSON object; raise SchemaError naming `where` on a bad key or type."""
        record = _from_dict(cls, data, where, _RECORD_TYPES)
        _check_record(record, where)
        for t in record.token_times_s:
            if isinstance(t, bool) or not isinstance(t, float | int) or _bad_number(t) or t < 0:
                raise SchemaError(where, f"token_times_s holds {t!r:.40}, not a finite time >= 0")
        for key, value in record.extra.items():
            if (
                isinstance(value, bool)
                or not isinstance(value, float | int | str)
                or _bad_number(value)
            ):
                raise SchemaError(where, f"extra[{key!r}]={value!r} should be a number or string")
        return record


_RECORD_FIELDS = tuple(f.name for f in fields(RequestRecord))


@dataclass(frozen=True, slots=True)
class TelemetrySample:
    """One reading of a GPU's counters (NVML, nvidia-smi CSV, DCGM...). Only `t_s` is required.

    Units: power W (instantaneous or averaged as the source gives it), energy J (a cumulative
    counter since an arbitrary origin, e.g. NVML's total energy), utilizations are fractions 0..1,
    memory in bytes, clocks in Hz, temperature in °C, PCIe in bytes/s. `throttle_reasons` is the
    vendor's bit mask (NVML clocksThrottleReasons) when known. `power_limit_w` is the power limit
    the board enforces (W: NVML's enforced limit, nvidia-smi's `enforced.power.limit`, DCGM's
    DCGM_FI_DEV_ENFORCED_POWER_LIMIT) when the source reports it.
    """

    t_s: float
    gpu_index: int | None = None
    power_w: float | None = None
    energy_j: float | None = None
    gpu_util: float | None = None
    mem_util: float | None = None
    mem_used_bytes: float | None = None
    sm_clock_hz: float | None = None
    mem_clock_hz: float | None = None
    temp_c: float | None = None
    pcie_tx_bytes_per_s: float | None = None
    pcie_rx_bytes_per_s: float | None = None
    throttle_reasons: int | None = None
    power_limit_w: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "telemetry") -> TelemetrySample:
        return _from_dict(cls, data, where, _TELEMETRY_TYPES)


@dataclass(frozen=True, slots=True)
class TimelinePoint:
    """The server's state from `t_s` until the next point's `t_s` (piecewise constant).

    Kept apart from TelemetrySample because it describes the scheduler (what a simulator knows and
    a measurement usually does not): running batch size, KV blocks in use, requests waiting.
    `power_w` is the electrical power of ALL GPUs of the deployment over the interval, so the
    energy of a run is sum(power_w * (t_next - t)) (the last point holds until the run's end).
    `prefill_tokens` / `decode_seqs` describe the step that starts at `t_s` (0 when idle).
    """

    t_s: float
    batch_size: int
    kv_blocks_used: int
    queue_len: int
    power_w: float
    prefill_tokens: int = 0
    decode_seqs: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "timeline") -> TimelinePoint:
        return _from_dict(cls, data, where, _TIMELINE_TYPES)


@dataclass(frozen=True, slots=True)
class HostSample:
    """One reading of the host: CPU per core, RAM, network counters, a process, RAPL energy.

    Units: fractions 0..1 (CPU per core; the process's CPU as a share of ONE core, so 2.0 means
    two busy cores), bytes (RAM; network counters are cumulative since boot), joules for RAPL (a
    cumulative counter per zone since the reader opened, wrap-arounds already unrolled).
    """

    t_s: float
    cpu_util_per_core: tuple[float, ...] = ()
    ram_used_bytes: float | None = None
    ram_total_bytes: float | None = None
    net_sent_bytes: float | None = None
    net_recv_bytes: float | None = None
    process_cpu_util: float | None = None
    rapl_energy_j: dict[str, float] = field(default_factory=dict)

    @property
    def cpu_util(self) -> float | None:
        """Mean over cores (0..1), None when per-core figures are missing."""
        cores = self.cpu_util_per_core
        return sum(cores) / len(cores) if cores else None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["cpu_util_per_core"] = list(self.cpu_util_per_core)
        return {k: v for k, v in out.items() if v is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "host") -> HostSample:
        sample = _from_dict(cls, data, where, _HOST_TYPES)
        cores = sample.cpu_util_per_core
        if any(_not_number(c) for c in cores):
            raise SchemaError(where, f"cpu_util_per_core holds a non-number: {cores!r}")
        rapl = sample.rapl_energy_j
        if any(not isinstance(k, str) or _not_number(v) for k, v in rapl.items()):
            raise SchemaError(where, f"rapl_energy_j should map zone names to joules: {rapl!r}")
        return _replace_cores(sample, tuple(float(c) for c in cores))


@dataclass(frozen=True, slots=True)
class ServerSample:
    """The inference server's own view at `t_s`, scraped from its Prometheus `/metrics`.

    Requests running and waiting (counts), KV-cache use (0..1), preemptions so far (a counter),
    the prefix cache's prompt tokens queried and hit so far (counters, vLLM V1) or its hit rate
    (a 0..1 gauge: vLLM V0, SGLang); None where the server does not export the figure.
    `source` names the server ("vllm", "sglang", "llama.cpp"); `error` says why a scrape failed
    (then every figure is None).
    """

    t_s: float
    requests_running: float | None = None
    requests_waiting: float | None = None
    kv_cache_usage: float | None = None
    preemptions_total: float | None = None
    source: str | None = None
    error: str | None = None
    # after `error`, so samples built positionally before these fields keep their meaning
    prefix_cache_queries_total: float | None = None
    prefix_cache_hits_total: float | None = None
    prefix_cache_hit_rate: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "server") -> ServerSample:
        return _from_dict(cls, data, where, _SERVER_TYPES)


@dataclass(slots=True)
class Run:
    """A simulated, measured or imported run: config, per-request records and time series.

    `duration_s` is the run's length on its clock (None: metrics derive it from the records).
    `host` and `server` are the host and server-metrics samples on the same clock;
    `telemetry_notes` what the sampler had to say (period_s, missed_ticks, gaps, notes).
    `warnings` lists what `read_run` had to tolerate (e.g. a truncated last line).
    """

    kind: RunKind
    config: dict[str, Any] = field(default_factory=dict)
    wall_start_s: float = 0.0
    records: list[RequestRecord] = field(default_factory=list)
    telemetry: list[TelemetrySample] = field(default_factory=list)
    timeline: list[TimelinePoint] = field(default_factory=list)
    duration_s: float | None = None
    warnings: list[str] = field(default_factory=list)
    host: list[HostSample] = field(default_factory=list)
    server: list[ServerSample] = field(default_factory=list)
    telemetry_notes: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in RUN_KINDS:
            raise SchemaError("run.kind", f"{self.kind!r} is not one of {', '.join(RUN_KINDS)}")


# ---------------------------------------------------------------- (de)serialisation helpers

_T = TypeVar("_T")
_FLOAT = (float, int)
_OPT_FLOAT = (float, int, type(None))
_OPT_INT = (int, type(None))
_OPT_STR = (str, type(None))

_RECORD_TYPES: dict[str, tuple[type, ...]] = {
    "request_id": (str,),
    "scheduled_s": _FLOAT,
    "sent_s": _FLOAT,
    "first_token_s": _OPT_FLOAT,
    "finish_s": _OPT_FLOAT,
    "input_tokens": (int,),
    "output_tokens": (int,),
    "token_times_s": (list,),
    "queue_s": _OPT_FLOAT,
    "error_kind": _OPT_STR,
    "error_message": _OPT_STR,
    "token_count_source": (str,),
    "extra": (dict,),
    "frontend_wait_s": _OPT_FLOAT,
}
_TELEMETRY_TYPES: dict[str, tuple[type, ...]] = {
    f.name: (_FLOAT if f.name == "t_s" else _OPT_FLOAT) for f in fields(TelemetrySample)
}
_TELEMETRY_TYPES.update({"gpu_index": _OPT_INT, "throttle_reasons": _OPT_INT})
_HOST_TYPES: dict[str, tuple[type, ...]] = {
    "t_s": _FLOAT,
    "cpu_util_per_core": (list, tuple),
    "ram_used_bytes": _OPT_FLOAT,
    "ram_total_bytes": _OPT_FLOAT,
    "net_sent_bytes": _OPT_FLOAT,
    "net_recv_bytes": _OPT_FLOAT,
    "process_cpu_util": _OPT_FLOAT,
    "rapl_energy_j": (dict,),
}
_SERVER_TYPES: dict[str, tuple[type, ...]] = {
    f.name: (_FLOAT if f.name == "t_s" else _OPT_FLOAT) for f in fields(ServerSample)
}
_SERVER_TYPES.update({"source": _OPT_STR, "error": _OPT_STR})
_TIMELINE_TYPES: dict[str, tuple[type, ...]] = {
    "t_s": _FLOAT,
    "batch_size": (int,),
    "kv_blocks_used": (int,),
    "queue_len": (int,),
    "power_w": _FLOAT,
    "prefill_tokens": (int,),
    "decode_seqs": (int,),
}


MAX_INT = 2**64  # a JSON integer beyond this (throttle bit masks are 64-bit) overflows floats


def _bad_number(value: object) -> bool:
    """A number JSON can carry that no record holds: inf (1e999 parses as it), NaN, a huge int."""
    if isinstance(value, float):
        return not math.isfinite(value)
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT


def _check_record(r: RequestRecord, where: str) -> None:
    """Run-relative times are >= 0 and in order (sent <= first token <= finish), counts >= 0:
    a record that breaks this is not one tokenprobe wrote, and metrics would report negative
    latencies from it."""
    for name in (
        "scheduled_s",
        "sent_s",
        "first_token_s",
        "finish_s",
        "queue_s",
        "frontend_wait_s",
    ):
        value = getattr(r, name)
        if value is not None and value < 0:
            raise SchemaError(where, f"{name}={value!r} is a negative time")
    for name in ("input_tokens", "output_tokens"):
        if getattr(r, name) < 0:
            raise SchemaError(where, f"{name}={getattr(r, name)!r} is a negative count")
    first, finish = r.first_token_s, r.finish_s
    if first is not None and first < r.sent_s:
        raise SchemaError(where, f"first_token_s={first!r} is before sent_s={r.sent_s!r}")
    if finish is not None and finish < (first if first is not None else r.sent_s):
        raise SchemaError(where, f"finish_s={finish!r} is before the first token or sending")


def _not_number(value: object) -> bool:
    return isinstance(value, bool) or not isinstance(value, float | int) or _bad_number(value)


def _replace_cores(sample: HostSample, cores: tuple[float, ...]) -> HostSample:
    return HostSample(
        t_s=sample.t_s,
        cpu_util_per_core=cores,
        ram_used_bytes=sample.ram_used_bytes,
        ram_total_bytes=sample.ram_total_bytes,
        net_sent_bytes=sample.net_sent_bytes,
        net_recv_bytes=sample.net_recv_bytes,
        process_cpu_util=sample.process_cpu_util,
        rapl_energy_j=dict(sample.rapl_energy_j),
    )


def _from_dict(
    cls: Callable[..., _T], data: Mapping[str, Any], where: str, types: dict[str, tuple[type, ...]]
) -> _T:
    if not isinstance(data, Mapping):
        raise SchemaError(where, f"expected a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - set(types))
    if unknown:
        raise SchemaError(where, f"unknown keys {unknown}; known: {sorted(types)}")
    for key, value in data.items():
        allowed = types[key]
        # bool is an int subclass in Python; a JSON true is never a valid number here
        if isinstance(value, bool) or not isinstance(value, allowed):
            names = "/".join("null" if t is type(None) else t.__name__ for t in allowed)
            raise SchemaError(where, f"{key}={value!r:.80} should be {names}")
        if _bad_number(value):
            raise SchemaError(where, f"{key}={value!r:.80} is not a finite number")
    try:
        return cls(**data)
    except TypeError as exc:  # a required key is missing
        raise SchemaError(where, str(exc)) from None
