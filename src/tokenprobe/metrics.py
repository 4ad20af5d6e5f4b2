"""Records -> latency percentiles, throughput and goodput: one summary for sim and measurement.

Definitions follow vLLM's `benchmarks/benchmark_serving.py` (`calculate_metrics`):
- TTFT = first_token_s - sent_s; E2E = finish_s - sent_s.
- TPOT per request = (E2E - TTFT) / (output_tokens - 1), only for requests with >= 2 tokens.
- ITL = every gap between successive token arrivals, pooled over all successful requests
  (a chunk of k tokens is one arrival; see `RequestRecord.itl_s`).
- Percentiles with numpy's default linear interpolation (`np.percentile`), as vLLM does.
- Goodput = successful requests meeting every SLO that was given (TTFT <= slo_ttft_s and
  TPOT <= slo_tpot_s; a one-token request meets any TPOT SLO, vLLM counts its TPOT as 0)
  divided by the duration; None when no SLO is given.
- Throughputs count successful requests only; failed ones are counted by `error_kind` and kept out
  of every latency statistic and token total.
- Prefix-cache hit rate (`prefix_cache_hit_rate`) = prompt tokens answered from the server's
  prefix cache / prompt tokens, from the records where they say it (a server's usage block
  `prompt_tokens_details.cached_tokens`, the simulator's own count), else from the server's
  /metrics: the growth of vLLM's hit and query counters over the run, else the mean of a hit-rate
  gauge (vLLM V0, SGLang). None when nothing says it.
- SLO attainment (`slo_attainment`) = requests within the SLOs / all requests sent, failed ones
  included; a load "meets the SLOs" at `SLO_ATTAINMENT` (90 %, the attainment DistServe (Zhong
  et al., OSDI 2024) plans for). The knee of a sweep and `bench --sweep rate=auto` use it.

`RateSearch` finds the highest request rate that passes a check with few measurements (each one
is a benchmark run): from a start rate it doubles while the rate passes (or halves while it
fails) until a passing and a failing rate bracket the knee, then bisects the bracket
geometrically until its ends are within `rel_tol` of each other, spending at most `max_points`
runs. The simulator's capacity search bisects the same way with its own upper bracket.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from operator import attrgetter, itemgetter
from typing import Any

import numpy as np

from tokenprobe.errors import ConfigError
from tokenprobe.records import RequestRecord, Run, TimelinePoint

_OK, _TOKEN_TIMES, _INPUT_TOKENS, _OUTPUT_TOKENS = (
    attrgetter("ok"),
    attrgetter("token_times_s"),
    attrgetter("input_tokens"),
    attrgetter("output_tokens"),
)
_EXTRA, _CACHED = attrgetter("extra"), itemgetter("server_cached_tokens")
PERCENTILES: tuple[int, ...] = (50, 90, 99)
SLO_ATTAINMENT = 0.9
LATENCY_KEYS: tuple[str, ...] = ("ttft_s", "tpot_s", "itl_s", "e2e_s", "queue_s")
SUMMARY_KEYS: tuple[str, ...] = (
    "completed",
    "failed",
    "errors",
    *LATENCY_KEYS,
    "duration_s",
    "requests_per_s",
    "input_tokens",
    "output_tokens",
    "output_tokens_per_s",
    "total_tokens_per_s",
    "goodput_requests_per_s",
    "prefix_cache_hit_rate",
)


def latency_stats(values: Sequence[float] | np.ndarray) -> dict[str, float | None]:
    """{mean, p50, p90, p99} of `values` (s); every entry None when there is no value."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        return {"mean": None, **{f"p{p}": None for p in PERCENTILES}}
    out: dict[str, float | None] = {"mean": float(arr.mean())}
    for p, v in zip(PERCENTILES, np.percentile(arr, PERCENTILES), strict=True):
        out[f"p{p}"] = float(v)
    return out


def _times(records: list[RequestRecord], name: str) -> np.ndarray:
    """The field `name` of every record as doubles, NaN where it is None (record times are
    finite: records/types.py refuses NaN and infinity)."""
    return np.array(list(map(attrgetter(name), records)), dtype=np.float64)


def latency_arrays(
    records: list[RequestRecord],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(TTFT, TPOT, E2E, queue) of the records that have each, in the records' order: the
    values of RequestRecord's `ttft_s`, `tpot_s`, `e2e_s` and `queue_s`, the same subtractions
    and division in doubles over whole arrays (10^6 records a fleet: a property call per
    record and value took a third of a summary). tests/test_metrics.py checks them against
    the properties."""
    sent, first, finish = (_times(records, k) for k in ("sent_s", "first_token_s", "finish_s"))
    out = np.fromiter(map(_OUTPUT_TOKENS, records), np.int64, len(records))
    has_first, has_finish = ~np.isnan(first), ~np.isnan(finish)
    timed = has_first & has_finish & (out >= 2)
    queue = _times(records, "queue_s")
    return (
        (first - sent)[has_first],
        (finish[timed] - first[timed]) / (out[timed] - 1),
        (finish - sent)[has_finish],
        queue[~np.isnan(queue)],
    )


def run_duration_s(run: Run) -> float:
    """The run's duration: `run.duration_s` when set, else last end minus first start.

    End of a record = finish_s, else its last token, else sent_s; start = min(scheduled, sent).
    """
    if run.duration_s is not None:
        return run.duration_s
    if not run.records:
        return 0.0
    start = min(min(r.scheduled_s, r.sent_s) for r in run.records)
    end = max(_record_end_s(r) for r in run.records)
    return max(end - start, 0.0)


def _record_end_s(record: RequestRecord) -> float:
    if record.finish_s is not None:
        return record.finish_s
    if record.token_times_s:
        return record.token_times_s[-1]
    return record.sent_s


def _meets_slo(record: RequestRecord, slo_ttft_s: float | None, slo_tpot_s: float | None) -> bool:
    if slo_ttft_s is not None:
        ttft = record.ttft_s
        if ttft is None or ttft > slo_ttft_s:
            return False
    if slo_tpot_s is not None:
        tpot = record.tpot_s
        if tpot is not None and tpot > slo_tpot_s:
            return False
    return True


def _check_slo(name: str, value: float | None) -> None:
    if value is not None and not value > 0:
        raise ConfigError(name, value, "an SLO must be a positive number of seconds")


def _rate(count: float, duration_s: float) -> float | None:
    return count / duration_s if duration_s > 0 else None


def summarize(
    run: Run, slo_ttft_s: float | None = None, slo_tpot_s: float | None = None
) -> dict[str, Any]:
    """The summary of a run, exactly in the shape of `SUMMARY_KEYS` (rules: module docstring).

    Latency entries are {mean, p50, p90, p99} in seconds (None without data); rates per second
    over `run_duration_s(run)` (None when the duration is 0).
    """
    _check_slo("slo_ttft_s", slo_ttft_s)
    _check_slo("slo_tpot_s", slo_tpot_s)
    # (filters and maps of attrgetters: no Python frame per record, 10^6 of them a fleet)
    ok = list(filter(_OK, run.records))
    failed = len(run.records) - len(ok)
    errors = Counter(r.error_kind for r in run.records if not r.ok)
    itl = [gap for r in filter(_TOKEN_TIMES, ok) for gap in r.itl_s]  # (untraced: none)
    duration = run_duration_s(run)
    # the record's fields, read through attrgetter (10^6 records: no generator frame)
    input_tokens = sum(map(_INPUT_TOKENS, ok))
    output_tokens = sum(map(_OUTPUT_TOKENS, ok))
    ttft, tpot, e2e, queue = latency_arrays(ok)
    if slo_ttft_s is None and slo_tpot_s is None:
        goodput = None
    else:
        good = sum(1 for r in ok if _meets_slo(r, slo_ttft_s, slo_tpot_s))
        goodput = _rate(good, duration)
    return {
        "completed": len(ok),
        "failed": failed,
        "errors": {str(kind): n for kind, n in sorted(errors.items())},
        "ttft_s": latency_stats(ttft),
        "tpot_s": latency_stats(tpot),
        "itl_s": latency_stats(itl),
        "e2e_s": latency_stats(e2e),
        "queue_s": latency_stats(queue),
        "duration_s": duration,
        "requests_per_s": _rate(len(ok), duration),
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "output_tokens_per_s": _rate(output_tokens, duration),
        "total_tokens_per_s": _rate(input_tokens + output_tokens, duration),
        "goodput_requests_per_s": goodput,
        "prefix_cache_hit_rate": prefix_cache_hit_rate(run),
    }


def prefix_cache_hit_rate(run: Run) -> float | None:
    """Share of the run's prompt tokens answered from the prefix cache (module docstring)."""
    told = [r for r in run.records if "server_cached_tokens" in r.extra and r.ok]
    inputs = list(map(_INPUT_TOKENS, told))
    prompt: int = sum(inputs)
    if told and prompt > 0:  # each min(cached, prompt), summed in order (maps: no frame)
        cached = map(float, map(_CACHED, map(_EXTRA, told)))
        return float(sum(map(min, cached, inputs))) / prompt
    queries = [s.prefix_cache_queries_total for s in run.server]
    hits = [s.prefix_cache_hits_total for s in run.server]
    pairs = [(q, h) for q, h in zip(queries, hits, strict=True) if q is not None and h is not None]
    if len(pairs) >= 2 and pairs[-1][0] > pairs[0][0]:
        return (pairs[-1][1] - pairs[0][1]) / (pairs[-1][0] - pairs[0][0])
    gauge = [s.prefix_cache_hit_rate for s in run.server if s.prefix_cache_hit_rate is not None]
    return float(np.mean(gauge)) if gauge else None


def timeline_energy_j(timeline: Sequence[TimelinePoint], end_s: float) -> float:
    """Energy of a piecewise-constant power timeline: sum(power_w * (t_next - t)), last to end_s.

    Each TimelinePoint holds from its t_s to the next one's (see records.TimelinePoint).
    """
    if not timeline:
        return 0.0
    t = np.fromiter((p.t_s for p in timeline), dtype=np.float64, count=len(timeline))
    p = np.fromiter((p.power_w for p in timeline), dtype=np.float64, count=len(timeline))
    ends = np.append(t[1:], max(end_s, float(t[-1])))
    return float(np.sum(p * (ends - t)))


def slo_attainment(summary: dict[str, Any]) -> float | None:
    """Share of a run's requests (failed ones included) that met its SLOs, from its summary;
    None when no SLO was given (no goodput) or nothing was sent."""
    goodput, duration = summary.get("goodput_requests_per_s"), summary.get("duration_s")
    sent = (summary.get("completed") or 0) + (summary.get("failed") or 0)
    if goodput is None or duration is None or sent <= 0:
        return None
    # goodput x duration is a count again, up to rounding (9 of 10 must read 0.9, not 0.8999...)
    return round(float(goodput) * float(duration) / sent, 9)


class RateSearch:
    """The highest passing rate, by bracketing then geometric bisection (module docstring).

    Use: `while (rate := search.next_rate()) is not None: search.record(rate, passed(rate))`;
    then `search.best` is the highest rate that passed (None if none did)."""

    def __init__(
        self,
        start_rate_per_s: float = 1.0,
        *,
        max_points: int = 8,
        rel_tol: float = 0.1,
        factor: float = 2.0,
        min_rate_per_s: float = 1e-3,
        max_rate_per_s: float = 1e6,
    ) -> None:
        lo, hi = min_rate_per_s, max_rate_per_s
        if not (start_rate_per_s > 0 and lo > 0 and hi >= start_rate_per_s >= lo):
            raise ConfigError("rate", start_rate_per_s, f"a rate in [{lo:g}, {hi:g}] req/s")
        if max_points < 1:
            raise ConfigError("max_points", max_points, "at least 1")
        if not (rel_tol > 0 and factor > 1):
            raise ConfigError("rel_tol", rel_tol, "rel_tol > 0 and factor > 1")
        self.start_rate_per_s, self.max_points, self.rel_tol = start_rate_per_s, max_points, rel_tol
        self.factor, self.min_rate_per_s, self.max_rate_per_s = factor, lo, hi
        self.tried: list[tuple[float, bool]] = []

    @property
    def best(self) -> float | None:
        passed = [r for r, ok in self.tried if ok]
        return max(passed) if passed else None

    def _lowest_fail(self) -> float | None:
        failed = [r for r, ok in self.tried if not ok]
        return min(failed) if failed else None

    def next_rate(self) -> float | None:
        """The next rate to run, or None when the search is done."""
        if len(self.tried) >= self.max_points:
            return None
        if not self.tried:
            return self.start_rate_per_s
        lo, hi = self.best, self._lowest_fail()
        if lo is None:  # nothing passed yet: go down
            assert hi is not None
            rate = hi / self.factor
            return rate if rate >= self.min_rate_per_s else None
        if hi is None:  # nothing failed yet: go up
            rate = lo * self.factor
            return rate if rate <= self.max_rate_per_s else None
        if hi <= lo * (1 + self.rel_tol):
            return None
        return math.sqrt(lo * hi)

    def record(self, rate: float, passed: bool) -> None:
        self.tried.append((rate, passed))
