"""AIPerf's per-request export (`profile_export.jsonl`) -> one imported Run.

Format (ai-dynamo/aiperf, docs/tutorials/working-with-profile-exports.md, models in
src/aiperf/common/models/record_models.py `MetricRecordInfo`): one JSON object a line,
`{"metadata": {...}, "metrics": {name: {"value": v, "unit": u}}, "error": null | {...}}`.
Used here:
- `metadata.request_start_ns` / `request_end_ns`: Unix epoch, ns (the request's send and end);
  `metadata.benchmark_phase`: only "profiling" records are measured ("warmup" ones are skipped);
  `metadata.x_request_id` (else `session_num`) names the request;
- `metrics.time_to_first_token` (ms), `metrics.inter_chunk_latency` (a list, ms: the gaps
  between streamed chunks, so token times are rebuilt as start + TTFT, then each gap added, as
  for vLLM's `itls`), `metrics.input_sequence_length` (or `error_isl` on a failed request) and
  `metrics.output_sequence_length` (else `output_token_count`), tokens;
- `error` {code, type, message}: a failed request ("http_<code>" when the code is an HTTP
  status, else "imported_error").
Every value's `unit` is honoured (ns, us, ms, s for times); a unit this module does not know is
refused. Each number goes through `files.finite`: a malformed line gives one SchemaError
naming the file and the line, never another exception.

AIPerf's `profile_export_aiperf.json` holds only aggregate statistics (with its
`input_config`): `is_aiperf_aggregate` recognises it, so that bench-import can say to import the
profile_export.jsonl beside it instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import accumulate
from typing import Any

from tokenprobe.errors import ConfigError, SchemaError
from tokenprobe.files import finite, parse_json
from tokenprobe.records import RequestRecord, Run, RunConfig

TIME_UNITS_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0}
MAX_COUNT = 2**53
NS = 1e-9


def is_aiperf_record(obj: object) -> bool:
    """True for one line of profile_export.jsonl (an object with metadata and metrics)."""
    return isinstance(obj, dict) and isinstance(obj.get("metadata"), dict) and "metrics" in obj


def is_aiperf_aggregate(obj: object) -> bool:
    """True for profile_export_aiperf.json (aggregate statistics, no per-request data)."""
    if not isinstance(obj, dict):
        return False
    return "input_config" in obj or ("aiperf_version" in obj and "request_throughput" in obj)


def import_aiperf_jsonl(text: str, where: str) -> Run:
    """The profiling requests of a profile_export.jsonl text -> one imported Run."""
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        here = f"{where}:{number}"
        obj = parse_json(line, here)
        if not is_aiperf_record(obj):
            raise SchemaError(here, "not an AIPerf record (metadata, metrics, error)")
        if obj["metadata"].get("benchmark_phase", "profiling") == "profiling":
            rows.append((obj, here))
    if not rows:
        raise SchemaError(where, "no AIPerf profiling records")
    starts = [_ns(obj["metadata"], "request_start_ns", here) for obj, here in rows]
    t0 = min(starts)
    records = [_record(obj, t0, here) for obj, here in rows]
    return Run(
        kind="imported",
        config=RunConfig.imported("aiperf", {}).to_dict(),
        wall_start_s=t0 * NS,
        records=records,
    )


def _ns(meta: Mapping[str, Any], key: str, where: str) -> int:
    """An epoch time in integer ns (differences are taken in ns: a float of 1.7e18 ns keeps
    only ~256 ns)."""
    value = meta.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        raise SchemaError(where, f"metadata.{key}={value!r:.80}: an epoch time in integer ns")
    return value


def _finite(value: object, where: str, name: str, lo: float | None = 0.0) -> float:
    try:
        return finite(name, value, lo=lo)
    except ConfigError as exc:
        raise SchemaError(where, f"{name}={value!r:.80}: {exc.allowed}") from None


def _metric(metrics: Mapping[str, Any], name: str, where: str) -> tuple[Any, str] | None:
    entry = metrics.get(name)
    if entry is None:
        return None
    if not isinstance(entry, dict) or "value" not in entry:
        raise SchemaError(where, f"metrics.{name} should be {{value, unit}}")
    return entry["value"], str(entry.get("unit", ""))


def _seconds(metrics: Mapping[str, Any], name: str, where: str) -> list[float] | float | None:
    found = _metric(metrics, name, where)
    if found is None:
        return None
    value, unit = found
    factor = TIME_UNITS_S.get(unit)
    if factor is None:
        raise SchemaError(where, f"metrics.{name}: unit {unit!r:.40} is not a time unit")
    if isinstance(value, list):
        return [_finite(v, where, f"metrics.{name}") * factor for v in value]
    return _finite(value, where, f"metrics.{name}") * factor


def _tokens(metrics: Mapping[str, Any], names: tuple[str, ...], where: str) -> int:
    for name in names:
        found = _metric(metrics, name, where)
        if found is None:
            continue
        value = found[0]
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
            raise SchemaError(where, f"metrics.{name}={value!r:.80}: a token count")
        return value
    return 0


def _record(obj: dict[str, Any], t0_ns: int, where: str) -> RequestRecord:
    meta, metrics, error = obj["metadata"], obj.get("metrics") or {}, obj.get("error")
    start_s = (_ns(meta, "request_start_ns", where) - t0_ns) * NS
    if not isinstance(metrics, dict):
        raise SchemaError(where, "metrics should be an object")
    end_s = (
        None
        if meta.get("request_end_ns") is None
        else (_ns(meta, "request_end_ns", where) - t0_ns) * NS
    )
    ttft = _seconds(metrics, "time_to_first_token", where)
    gaps = _seconds(metrics, "inter_chunk_latency", where)
    if isinstance(ttft, list) or isinstance(gaps, float):
        raise SchemaError(where, "time_to_first_token is one number, inter_chunk_latency a list")
    ok = error is None
    times = (
        []
        if not ok or ttft is None
        else [start_s + ttft + g for g in accumulate(gaps or [], initial=0.0)]
    )
    if times and end_s is not None and end_s < times[0]:
        raise SchemaError(where, "request_end_ns is before the first token")
    request_id = meta.get("x_request_id") or meta.get("session_num")
    return RequestRecord(
        request_id=str(request_id if request_id is not None else where)[:200],
        scheduled_s=start_s,
        sent_s=start_s,
        first_token_s=times[0] if times else None,
        finish_s=end_s if ok else None,
        input_tokens=_tokens(metrics, ("input_sequence_length", "error_isl"), where),
        output_tokens=_tokens(metrics, ("output_sequence_length", "output_token_count"), where)
        if ok
        else 0,
        token_times_s=times,
        error_kind=None if ok else _error_kind(error),
        error_message=None if ok else _error_message(error),
        token_count_source="usage",
    )


def _error_kind(error: object) -> str:
    code = error.get("code") if isinstance(error, dict) else None
    if isinstance(code, int) and not isinstance(code, bool) and 100 <= code <= 599:
        return f"http_{code}"
    return "imported_error"


def _error_message(error: object) -> str:
    if isinstance(error, dict):
        parts = [str(error.get(k)) for k in ("type", "message") if error.get(k) is not None]
        return (": ".join(parts) or "failed (no message)")[:1000]
    return str(error)[:1000]
