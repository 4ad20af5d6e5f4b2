"""Bring other tools' results into Runs (kind "imported"): `vllm bench serve` and GuideLLM.

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
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from itertools import accumulate
from pathlib import Path
from typing import Any

from tokenprobe.errors import ConfigError, SchemaError
from tokenprobe.records import RequestRecord, Run

FORMATS: tuple[str, ...] = ("vllm", "guidellm")
VLLM_LISTS: tuple[str, ...] = ("input_lens", "output_lens", "ttfts", "itls")


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError("path", str(path), f"cannot be read: {exc.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SchemaError(str(path), f"not valid JSON: {exc}") from None


def import_runs(path: str | Path, source: str) -> list[Run]:
    """Every run in the file: one for vLLM, one per benchmark for GuideLLM."""
    if source not in FORMATS:
        raise ConfigError("from", source, f"one of {', '.join(FORMATS)}")
    doc = read_json(Path(path))
    if not isinstance(doc, dict):
        raise SchemaError(str(path), "expected a JSON object")
    if source == "vllm":
        return [import_vllm(doc, str(path))]
    return import_guidellm(doc, str(path))


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
    t0 = min(starts, default=0.0)
    ins, outs, ttfts, itls = lists
    records = [
        _vllm_record(i, starts[i] - t0, ins[i], outs[i], ttfts[i], itls[i], errors[i], where)
        for i in range(n)
    ]
    config = {k: doc.get(k) for k in ("model_id", "backend", "request_rate", "burstiness")}
    config.update(source="vllm bench serve", max_concurrency=doc.get("max_concurrency"))
    duration = doc.get("duration")
    return Run(
        kind="imported",
        config=config,
        records=records,
        duration_s=float(duration) if isinstance(duration, int | float) else None,
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
    if not isinstance(itl, list) or not all(_number(x) for x in (start_s, ttft, *itl)):
        raise SchemaError(where, f"request {i}: ttfts/itls/start_times must be numbers")
    ok = not error and ttft > 0
    times = [start_s + ttft + gap for gap in accumulate(itl, initial=0.0)] if ok else []
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
    tagged = [
        (req, status)
        for status in ("successful", "incomplete", "errored")
        for req in groups.get(status) or []
    ]
    timings = [_timings(req, where) for req, _ in tagged]
    starts = [_as_float(t.get("request_start") or t.get("targeted_start")) for t in timings]
    t0 = min((s for s in starts if s is not None), default=0.0)
    records = [
        _guidellm_record(req, t, status, t0, where)
        for (req, status), t in zip(tagged, timings, strict=True)
    ]
    config = {"source": "guidellm", "benchmark_id": bench.get("id") or bench.get("run_id")}
    duration = _as_float(bench.get("duration"))
    return Run(
        kind="imported", config=config, wall_start_s=t0, records=records, duration_s=duration
    )


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
        value = _as_float(t.get(key))
        return None if value is None else value - t0

    sent = rel("request_start") if rel("request_start") is not None else rel("targeted_start")
    if sent is None:
        raise SchemaError(where, f"request {req.get('request_id')}: no request_start time")
    scheduled = rel("targeted_start")
    ok = status == "successful"
    error = (req.get("info") or {}).get("error")
    return RequestRecord(
        request_id=str(req.get("request_id", "")),
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


def _as_float(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _count(value: Any, where: str, i: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SchemaError(where, f"request {i}: token count {value!r} is not a count")
    return value
