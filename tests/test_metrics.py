"""summarize(): hand-computed percentiles, failures excluded, throughput and goodput."""

from __future__ import annotations

import pytest

from tokenprobe.errors import ConfigError
from tokenprobe.metrics import (
    SUMMARY_KEYS,
    RateSearch,
    latency_arrays,
    latency_stats,
    slo_attainment,
    summarize,
    timeline_energy_j,
)
from tokenprobe.records import RequestRecord, Run, TimelinePoint


def _ok(
    rid: str, sent: float, first: float, finish: float, out: int, inp: int = 100
) -> RequestRecord:
    step = (finish - first) / (out - 1) if out > 1 else 0.0
    times = [first + i * step for i in range(out)]
    return RequestRecord(
        request_id=rid,
        scheduled_s=sent,
        sent_s=sent,
        first_token_s=first,
        finish_s=finish,
        input_tokens=inp,
        output_tokens=out,
        token_times_s=times,
        queue_s=0.0,
    )


def test_latency_stats_linear_interpolation() -> None:
    # values 1..5: p50 = 3; p90 at rank 0.9*4 = 3.6 -> 4 + 0.6*(5-4) = 4.6; p99: 4.96
    s = latency_stats([5.0, 1.0, 3.0, 2.0, 4.0])
    assert s == pytest.approx({"mean": 3.0, "p50": 3.0, "p90": 4.6, "p99": 4.96})
    assert latency_stats([]) == {"mean": None, "p50": None, "p90": None, "p99": None}


def _run() -> Run:
    records = [
        # ttft 0.1, tpot 0.01, e2e 0.2 (11 tokens)
        _ok("a", sent=0.0, first=0.1, finish=0.2, out=11),
        # ttft 0.3, tpot 0.02, e2e 0.5
        _ok("b", sent=1.0, first=1.3, finish=1.5, out=11),
        # ttft 0.5, one token: no TPOT, no ITL
        _ok("c", sent=2.0, first=2.5, finish=2.5, out=1),
        RequestRecord("d", 3.0, 3.0, None, None, 100, 0, error_kind="timeout"),
        RequestRecord("e", 3.0, 3.0, 3.1, None, 100, 3, [3.1, 3.2, 3.3], error_kind="disconnect"),
        RequestRecord("f", 3.5, 3.5, None, None, 100, 0, error_kind="timeout"),
    ]
    return Run(kind="measured", records=records, duration_s=5.0)


def test_summary_shape_and_values() -> None:
    s = summarize(_run())
    assert tuple(s) == SUMMARY_KEYS
    assert s["completed"] == 3 and s["failed"] == 3
    assert s["errors"] == {"disconnect": 1, "timeout": 2}
    # failed requests are out of the latency statistics
    assert s["ttft_s"] == pytest.approx({"mean": 0.3, "p50": 0.3, "p90": 0.46, "p99": 0.496})
    assert s["tpot_s"] == pytest.approx({"mean": 0.015, "p50": 0.015, "p90": 0.019, "p99": 0.0199})
    assert s["e2e_s"]["p50"] == pytest.approx(0.5)
    # ITL pooled: 10 gaps of 0.01 and 10 of 0.02
    assert s["itl_s"]["mean"] == pytest.approx(0.015)
    assert s["itl_s"]["p50"] == pytest.approx(0.015)
    assert s["queue_s"]["mean"] == 0.0
    assert s["duration_s"] == 5.0
    assert s["requests_per_s"] == pytest.approx(3 / 5)
    assert s["input_tokens"] == 300 and s["output_tokens"] == 23
    assert s["output_tokens_per_s"] == pytest.approx(23 / 5)
    assert s["total_tokens_per_s"] == pytest.approx(323 / 5)
    assert s["goodput_requests_per_s"] is None


def test_goodput_counts_requests_meeting_every_given_slo() -> None:
    run = _run()
    # TTFT <= 0.35 keeps a, b; TPOT <= 0.015 drops b; c (one token) meets any TPOT SLO
    assert summarize(run, slo_ttft_s=0.35)["goodput_requests_per_s"] == pytest.approx(2 / 5)
    assert summarize(run, slo_tpot_s=0.015)["goodput_requests_per_s"] == pytest.approx(2 / 5)
    both = summarize(run, slo_ttft_s=0.35, slo_tpot_s=0.015)
    assert both["goodput_requests_per_s"] == pytest.approx(1 / 5)
    with pytest.raises(ConfigError, match="slo_ttft_s"):
        summarize(run, slo_ttft_s=0.0)


def test_duration_derived_from_records_when_unset() -> None:
    run = _run()
    run.duration_s = None
    # first start 0.0; last end: e's last token 3.3 vs b's... c finishes 2.5, e ends 3.3, f sent 3.5
    assert summarize(run)["duration_s"] == pytest.approx(3.5)
    assert summarize(Run(kind="simulated"))["requests_per_s"] is None


def test_timeline_energy_piecewise_constant() -> None:
    tl = [
        TimelinePoint(t_s=0.0, batch_size=0, kv_blocks_used=0, queue_len=0, power_w=100.0),
        TimelinePoint(t_s=2.0, batch_size=4, kv_blocks_used=9, queue_len=0, power_w=400.0),
    ]
    assert timeline_energy_j(tl, end_s=3.0) == pytest.approx(100 * 2 + 400 * 1)
    assert timeline_energy_j([], end_s=3.0) == 0.0


def _search(threshold: float, **kw: float) -> RateSearch:
    search = RateSearch(**kw)  # type: ignore[arg-type]
    while (rate := search.next_rate()) is not None:
        search.record(rate, rate <= threshold)
    return search


def test_rate_search_brackets_then_bisects_to_the_knee() -> None:
    """Knee at 5.3 req/s, start 1: up 1, 2, 4, 8 (fails); then geometric midpoints
    sqrt(4*8) = 5.66 (fails), sqrt(4*5.66) = 4.76, sqrt(4.76*5.66) = 5.19 (pass); 5.66/5.19 =
    1.09 < 1.1: done after 7 runs, best 5.19."""
    search = _search(5.3, start_rate_per_s=1.0)
    rates = [round(r, 2) for r, _ in search.tried]
    assert rates == [1.0, 2.0, 4.0, 8.0, 5.66, 4.76, 5.19]
    assert search.best == pytest.approx(5.19, abs=0.01)


@pytest.mark.parametrize("threshold", [0.3, 1.0, 7.7, 40.0])
def test_rate_search_ends_within_its_tolerance_below_the_knee(threshold: float) -> None:
    search = _search(threshold, start_rate_per_s=1.0, max_points=12)
    assert search.best is not None and threshold / 1.1 <= search.best <= threshold
    assert len(search.tried) <= 12


def test_rate_search_keeps_to_its_budget_and_says_when_nothing_passes() -> None:
    assert len(_search(1e9, start_rate_per_s=1.0, max_points=3).tried) == 3  # 1, 2, 4: all pass
    none = _search(-1.0, start_rate_per_s=1.0, min_rate_per_s=0.1, max_points=50)
    assert none.best is None and [r for r, _ in none.tried] == [1.0, 0.5, 0.25, 0.125]
    with pytest.raises(ConfigError, match="rate"):
        RateSearch(0.0)


def test_slo_attainment_counts_failed_requests_as_missed() -> None:
    """8 of 10 sent within the SLOs (2 failed): goodput 0.8 req/s over 10 s -> 0.8 attained."""
    summary = {"goodput_requests_per_s": 0.8, "duration_s": 10.0, "completed": 8, "failed": 2}
    assert slo_attainment(summary) == pytest.approx(0.8)
    assert slo_attainment({**summary, "goodput_requests_per_s": None}) is None
    # 27 of 30 over 2.9 s: (27 / 2.9) x 2.9 / 30 is 0.8999999999999999 in floating point; it
    # reads 0.9, so a run exactly at the 90 % attainment meets it
    tight = {"goodput_requests_per_s": 27 / 2.9, "duration_s": 2.9, "completed": 30, "failed": 0}
    assert slo_attainment(tight) == 0.9


def test_latency_arrays_are_the_records_properties() -> None:
    """The summary's vectorized TTFT, TPOT, E2E and queue equal RequestRecord's properties to
    the bit, in the records' order, leaving out the records without them (no first token, no
    finish, a one-token reply, an unknown queue time)."""
    records = [
        _ok("a", 0.1, 0.35, 1.7, 9),
        _ok("b", 0.3, 0.31, 0.31, 1),  # one token: no TPOT
        RequestRecord("c", 0.2, 0.2, None, None, 10, 0, queue_s=None),  # nothing came back
        RequestRecord("d", 0.4, 0.45, 0.9, None, 10, 3, queue_s=0.05),  # first token, no end
        _ok("e", 1.0 / 3.0, 2.0 / 7.0 + 1.0, 3.1, 37),
    ]
    ttft, tpot, e2e, queue = latency_arrays(records)
    for got, name in ((ttft, "ttft_s"), (tpot, "tpot_s"), (e2e, "e2e_s"), (queue, "queue_s")):
        want = [v for r in records if (v := getattr(r, name)) is not None]
        assert got.tolist() == want, name  # exact equality: the same arithmetic in doubles
    assert len(tpot) == 2 and len(ttft) == 4 and len(e2e) == 3 and len(queue) == 4
