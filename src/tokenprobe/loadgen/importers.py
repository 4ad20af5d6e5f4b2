"""Bring other tools' results into Runs (kind "imported"): `vllm bench serve`, GuideLLM and
AIPerf (`loadgen.aiperf_import`). `detect_format` tells them apart by their keys: a GuideLLM
report has `benchmarks`, a vLLM result the per-request lists (`ttfts`, `input_lens`...), an
AIPerf profile_export.jsonl one {metadata, metrics, error} object a line; `import_runs` with
source "auto" uses it, and a source given that the file contradicts is one clear SchemaError
naming the format the file is.

vLLM (`vllm bench serve --save-result --save-detailed`, and benchmark_serving.py before it):
per-request lists `input_lens`, `output_lens`, `ttfts` (s), `itls` (list of chunk gaps, s per
request), `errors` ("" = success), and in recent versions `start_times` (perf_counter, s).
Token times are rebuilt exactly as vLLM measured them: first token at start + ttft, then each
chunk gap added. Without `start_times` every request is placed at 0 and the run's duration is
vLLM's `duration`, so rates still match vLLM's.

GuideLLM (`guidellm benchmark ... --outputs benchmarks.json`): `benchmarks[i].requests` with
`successful`, `incomplete` and `errored` lists; each request has `info.timings` (Unix times:
targeted_start, request_start, first_token_iteration, last_token_iteration, request_end) and
`prompt_tokens` / `output_tokens`. GuideLLM keeps no per-token times, so token_times_s is empty
(ITL unknown; TTFT, TPOT, E2E known). One Run per benchmark in the file.

The file is read by `tokenprobe.files` and every number in it goes through `files.finite`: any
document, however malformed (wrong types, NaN, 1e999, negative times or counts), gives Runs or
one SchemaError naming the file and the place, never another exception.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import accumulate
from pathlib import Path
from typing import Any

from tokenprobe.errors import ConfigError, SchemaError
from tokenprobe.files import finite, parse_json, read_text
from tokenprobe.loadgen.aiperf_import import (
    import_aiperf_jsonl,
    is_aiperf_aggregate,
    is_aiperf_record,
)
from tokenprobe.records import RequestRecord, Run, RunConfig

FORMATS: tuple[str, ...] = ("vllm", "guidellm", "aiperf")
SOURCES: tuple[str, ...] = ("auto", *FORMATS)
VLLM_LISTS: tuple[str, ...] = ("input_lens", "output_lens", "ttfts", "itls")
MAX_COUNT = 2**53


def import_runs(path: str | Path, source: str = "auto") -> list[Run]:
    """Every run in the file: one for vLLM and AIPerf, one per benchmark for GuideLLM."""
    if source not in SOURCES:
        raise ConfigError("from", source, f"one of {', '.join(SOURCES)}")
    where = str(path)
    text = read_text(Path(path))
    if source == "auto":
        detected, doc = detect_format(text, where)
    else:
        detected, doc = _given(text, where, source)
    if source not in ("auto", detected):
        raise SchemaError(
            where, f"this is a {detected} result, not {source}: give --from {detected} or omit it"
        )
    if detected == "aiperf":
        return [import_aiperf_jsonl(text, where)]
    if detected == "vllm":
        return [import_vllm(doc, where)]
    return import_guidellm(doc, where)


def _given(text: str, where: str, source: str) -> tuple[str, dict[str, Any]]:
    """The detected format, or, where the file is none of them, the given one (whose importer
    then says what the file lacks)."""
    try:
        return detect_format(text, where)
    except SchemaError:
        if source == "aiperf":
            return source, {}
        doc = parse_json(text, where)
        if not isinstance(doc, dict):
            raise SchemaError(where, "expected a JSON object") from None
        return source, doc


def detect_format(text: str, where: str) -> tuple[str, dict[str, Any]]:
    """("vllm" | "guidellm" | "aiperf", the JSON document; {} for AIPerf's JSONL)."""
    try:
        doc = parse_json(text, where)
    except SchemaError:
        first = next((line for line in text.splitlines() if line.strip()), "")
        try:
            line = parse_json(first, f"{where}:1")
        except SchemaError:
            raise SchemaError(where, f"neither JSON nor JSON lines; {_KNOWN}") from None
        if is_aiperf_record(line):
            return "aiperf", {}
        raise SchemaError(
            where, f"JSON lines, but not AIPerf's profile_export.jsonl; {_KNOWN}"
        ) from None
    if is_aiperf_record(doc):
        return "aiperf", {}
    if not isinstance(doc, dict):
        raise SchemaError(where, f"expected a JSON object; {_KNOWN}")
    if "benchmarks" in doc:
        return "guidellm", doc
    if any(k in doc for k in VLLM_LISTS):
        return "vllm", doc
    if is_aiperf_aggregate(doc):
        raise SchemaError(
            where,
            "AIPerf's aggregate statistics (profile_export_aiperf.json) hold no per-request "
            "data: import the profile_export.jsonl beside it",
        )
    raise SchemaError(where, f"not a known result; {_KNOWN}")


_KNOWN = (
    "expected a `vllm bench serve --save-result --save-detailed` JSON, a GuideLLM "
    "benchmarks JSON or AIPerf's profile_export.jsonl"
)


def import_vllm(doc: Mapping[str, Any], where: str = "vllm result") -> Run:
    """A `vllm bench serve` result JSON (saved with --save-detailed) -> one imported Run."""
    missing = [k for k in VLLM_LISTS if not isinstance(doc.get(k), list)]
    if missing:
        raise SchemaError(where, f"no per-request lists {missing} (save with --save-detailed)")
    n = len(doc["ttfts"])
    errors = _list_or(doc, "errors", [""] * n, where)
    starts = _list_or(doc, "start_times", [0.0] * n, where)
    lists = [doc[k] for k in VLLM_LISTS]
    if any(len(x) != n for x in (*lists, errors, starts)):
        raise SchemaError(where, "per-request lists have different lengths")
    starts = [_num(x, where, f"start_times[{i}]") for i, x in enumerate(starts)]
    t0 = min(starts, default=0.0)
    ins, outs, ttfts, itls = lists
    records = [
        _vllm_record(i, starts[i] - t0, ins[i], outs[i], ttfts[i], itls[i], errors[i], where)
        for i in range(n)
    ]
    keys = ("model_id", "backend", "request_rate", "burstiness", "max_concurrency")
    settings: dict[str, Any] = {k: _scalar(doc.get(k)) for k in keys}
    model = settings["model_id"] if isinstance(settings["model_id"], str) else None
    return Run(
        kind="imported",
        config=RunConfig.imported("vllm bench serve", settings, model).to_dict(),
        records=records,
        duration_s=_optional_num(doc.get("duration"), where, "duration"),
    )


def _list_or(doc: Mapping[str, Any], key: str, default: list[Any], where: str) -> list[Any]:
    value = doc.get(key)
    if value is None:
        return default
    if not isinstance(value, list):
        raise SchemaError(where, f"{key} should be a list")
    return value


def _vllm_record(
    i: int,
    start_s: float,
    input_len: Any,
    output_len: Any,
    ttft: Any,
    itl: Any,
    error: Any,
    where: str,
) -> RequestRecord:
    if not isinstance(itl, list):
        raise SchemaError(where, f"request {i}: itls[{i}] must be a list of numbers")
    ttft = _num(ttft, where, f"ttfts[{i}]")
    gaps = [_num(x, where, f"itls[{i}]") for x in itl]
    ok = not error and ttft > 0
    times = [start_s + ttft + gap for gap in accumulate(gaps, initial=0.0)] if ok else []
    if times and not all(map(_is_finite, times)):
        raise SchemaError(where, f"request {i}: its token times overflow")
    return RequestRecord(
        request_id=str(i),
        scheduled_s=start_s,
        sent_s=start_s,
        first_token_s=times[0] if times else None,
        finish_s=times[-1] if times else None,
        input_tokens=_count(input_len, where, i),
        output_tokens=_count(output_len, where, i) if ok else 0,
        token_times_s=times,
        error_kind=None if ok else "imported_error",
        error_message=None if ok else (str(error) or "failed (no message)")[:1000],
        token_count_source="usage",
    )


def import_guidellm(doc: Mapping[str, Any], where: str = "guidellm report") -> list[Run]:
    """A GuideLLM benchmarks report -> one imported Run per benchmark."""
    benchmarks = doc.get("benchmarks")
    if not isinstance(benchmarks, list) or not benchmarks:
        raise SchemaError(where, "no 'benchmarks' list: not a GuideLLM report")
    return [_guidellm_run(b, f"{where}: benchmarks[{i}]") for i, b in enumerate(benchmarks)]


def _guidellm_run(bench: Any, where: str) -> Run:
    groups = bench.get("requests") if isinstance(bench, dict) else None
    if not isinstance(groups, dict):
        raise SchemaError(where, "no 'requests' object")
    tagged = [(req, status) for status in STATUSES for req in _group(groups, status, where)]
    timings = [_timings(req, where) for req, _ in tagged]
    # the earliest of the targeted and the real starts: GuideLLM's targeted_start can precede
    # request_start (a request sent late), and no run-relative time may be negative
    starts = [
        x
        for t in timings
        for x in (_time(t, "request_start", where), _time(t, "targeted_start", where))
    ]
    t0 = min((s for s in starts if s is not None), default=0.0)
    records = [
        _guidellm_record(req, t, status, t0, where)
        for (req, status), t in zip(tagged, timings, strict=True)
    ]
    assert isinstance(bench, dict)
    benchmark_id = bench.get("id") or bench.get("run_id")
    config = RunConfig.imported(
        "guidellm", {"benchmark_id": _scalar(benchmark_id or None)}
    ).to_dict()
    duration = _optional_num(bench.get("duration"), where, "duration")
    return Run(
        kind="imported", config=config, wall_start_s=t0, records=records, duration_s=duration
    )


STATUSES: tuple[str, ...] = ("successful", "incomplete", "errored")


def _group(groups: Mapping[str, Any], status: str, where: str) -> list[Any]:
    value = groups.get(status)
    if value is None:
        return []
    if not isinstance(value, list):
        raise SchemaError(where, f"requests.{status} should be a list")
    return value


def _time(timings: Mapping[str, Any], key: str, where: str) -> float | None:
    """A Unix time of info.timings (None when absent or null; 0 is GuideLLM's "not set")."""
    value = _optional_num(timings.get(key), where, f"info.timings.{key}")
    return value or None


def _timings(req: Any, where: str) -> dict[str, Any]:
    info = req.get("info") if isinstance(req, dict) else None
    timings = info.get("timings") if isinstance(info, dict) else None
    if not isinstance(timings, dict):
        raise SchemaError(where, "a request without info.timings")
    return timings


def _guidellm_record(
    req: dict[str, Any], t: dict[str, Any], status: str, t0: float, where: str
) -> RequestRecord:
    def rel(key: str) -> float | None:
        value = _time(t, key, where)
        return None if value is None else value - t0

    sent = rel("request_start") if rel("request_start") is not None else rel("targeted_start")
    if sent is None:
        raise SchemaError(where, f"request {req.get('request_id')}: no request_start time")
    scheduled = rel("targeted_start")
    ok = status == "successful"
    error = req["info"].get("error")  # info is an object: _timings checked it
    return RequestRecord(
        request_id=str(req.get("request_id", ""))[:200],
        scheduled_s=scheduled if scheduled is not None else sent,
        sent_s=sent,
        first_token_s=rel("first_token_iteration"),
        finish_s=rel("request_end") or rel("last_token_iteration"),
        input_tokens=_count(req.get("prompt_tokens") or 0, where, 0),
        output_tokens=_count(req.get("output_tokens") or 0, where, 0),
        error_kind=None if ok else ("incomplete" if status == "incomplete" else "imported_error"),
        error_message=None if ok else str(error or status)[:1000],
        token_count_source="usage",
    )


def _num(value: object, where: str, name: str) -> float:
    """A finite number of the file (NaN, 1e999, strings, booleans refused as SchemaError)."""
    if isinstance(value, str):
        raise SchemaError(where, f"{name}={value!r:.80}: a number, not a string")
    try:
        return finite(name, value)
    except ConfigError as exc:
        raise SchemaError(where, f"{name}={value!r:.80}: {exc.allowed}") from None


def _optional_num(value: object, where: str, name: str) -> float | None:
    return None if value is None else _num(value, where, name)


def _scalar(value: object) -> str | int | float | bool | None:
    """A config value as JSON can hold it (vLLM writes an infinite rate as "inf")."""
    if value is None or isinstance(value, str | bool | int):
        return value if not isinstance(value, str) else value[:200]
    if isinstance(value, float) and _is_finite(value):
        return value
    return str(value)[:200]


def _is_finite(x: float) -> bool:
    return x - x == 0.0


def _count(value: Any, where: str, i: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise SchemaError(where, f"request {i}: token count {value!r:.80} is not a count")
    return value
