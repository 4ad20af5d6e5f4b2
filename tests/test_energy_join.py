"""The energy join over synthetic runs whose true figures are known by construction."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenprobe.energy_join import cumulative_work, join_energy, phases_of
from tokenprobe.errors import ConfigError
from tokenprobe.metrics import timeline_energy_j
from tokenprobe.records import RequestRecord, Run, TelemetrySample, TimelinePoint


def _request(rid: str, sent: float, first: float, finish: float, n_in: int, n_out: int):
    return RequestRecord(rid, sent, sent, first, finish, n_in, n_out)


def _samples(times, power=None, energy=None, clock=None, gpu=0):
    out = []
    for i, t in enumerate(times):
        out.append(
            TelemetrySample(
                t_s=float(t),
                gpu_index=gpu,
                power_w=None if power is None else float(power[i]),
                energy_j=None if energy is None else float(energy[i]),
                sm_clock_hz=None if clock is None else float(clock[i]),
            )
        )
    return out


def _grid(duration_s: float, period_s: float) -> np.ndarray:
    n = round(duration_s / period_s)
    return np.linspace(0.0, n * period_s, n + 1)


@settings(max_examples=60, deadline=None)
@given(
    power_w=st.floats(1.0, 1000.0),
    duration_s=st.floats(1.0, 3600.0),
    period_s=st.floats(0.05, 2.0),
    use_counter=st.booleans(),
)
def test_constant_power_over_duration_gives_power_times_duration(
    power_w, duration_s, period_s, use_counter
):
    t = _grid(duration_s, period_s)
    if use_counter:
        samples = _samples(t, energy=1234.0 + power_w * t)  # counter with an arbitrary origin
    else:
        samples = _samples(t, power=np.full_like(t, power_w))
    run = Run("measured", telemetry=samples, duration_s=float(t[-1]))
    report = join_energy(run)
    assert report.energy_j == pytest.approx(power_w * t[-1], rel=1e-9)
    assert report.energy_source == ("counter" if use_counter else "integral")
    assert report.coverage == pytest.approx(1.0)


def test_counter_and_integral_agree_on_a_smooth_load_and_the_counter_wins():
    t = _grid(60.0, 0.1)
    power = 250.0 + 100.0 * np.sin(2 * math.pi * t / 20.0)
    exact = 250.0 * t + 100.0 * 20.0 / (2 * math.pi) * (1 - np.cos(2 * math.pi * t / 20.0))
    run = Run("measured", telemetry=_samples(t, power, exact), duration_s=60.0)
    report = join_energy(run)
    assert report.energy_source == "counter"
    assert report.energy_j == pytest.approx(exact[-1], rel=1e-12)
    assert report.counter_energy_j == pytest.approx(exact[-1], rel=1e-12)
    assert abs(report.counter_integral_disagreement) < 1e-4


def test_a_counter_reading_ten_percent_high_shows_as_disagreement():
    t = _grid(30.0, 0.1)
    power = np.full_like(t, 200.0)
    run = Run("measured", telemetry=_samples(t, power, 1.1 * 200.0 * t), duration_s=30.0)
    report = join_energy(run)
    assert report.energy_j == pytest.approx(1.1 * 200.0 * 30.0)
    assert report.counter_integral_disagreement == pytest.approx(1 / 1.1 - 1)


def _step_run():
    """20 s idle at 60 W, then one request keeps the GPU at 300 W from 20 s to 60 s."""
    t = _grid(60.0, 0.5)
    power = np.where(t <= 20.0, 60.0, 300.0)
    energy = np.where(t <= 20.0, 60.0 * t, 1200.0 + 300.0 * (t - 20.0))
    record = _request("r0", 20.0, 21.0, 60.0, 1000, 400)
    return Run("measured", records=[record], telemetry=_samples(t, power, energy), duration_s=60.0)


def test_idle_baseline_comes_from_time_with_no_request_in_flight():
    report = join_energy(_step_run())
    assert report.idle_baseline_method == "no request in flight"
    assert report.idle_baseline_w == pytest.approx(60.0)
    assert report.energy_j == pytest.approx(1200.0 + 300.0 * 40.0)
    assert report.idle_time_energy_j == pytest.approx(1200.0)
    assert report.static_energy_j == pytest.approx(60.0 * 60.0)
    assert report.static_share == pytest.approx(3600.0 / 13200.0)
    assert report.active_energy_j == pytest.approx(12000.0)
    assert report.request_energy_j["r0"] == pytest.approx(12000.0)


def test_idle_baseline_falls_back_to_a_low_percentile_when_never_idle():
    run = _step_run()
    run.records.append(_request("early", 0.0, 1.0, 20.0, 10, 100))
    report = join_energy(run)
    assert report.idle_baseline_method == "p5 of power"
    assert report.idle_baseline_w == pytest.approx(60.0)


def _random_requests(rng: np.random.Generator, n: int, horizon_s: float):
    records = []
    for i in range(n):
        sent = float(rng.uniform(0, horizon_s * 0.8))
        first = sent + float(rng.uniform(0.05, 1.5))
        finish = first + float(rng.uniform(0.5, horizon_s * 0.2))
        records.append(
            _request(
                f"r{i}", sent, first, finish, int(rng.integers(16, 4000)), int(rng.integers(2, 800))
            )
        )
    return records


def test_per_request_energy_sums_to_the_active_energy():
    rng = np.random.default_rng(7)
    t = _grid(120.0, 0.1)
    power = 100.0 + 200.0 * rng.random(len(t))
    records = _random_requests(rng, 40, 120.0)
    run = Run("measured", records=records, telemetry=_samples(t, power), duration_s=120.0)
    report = join_energy(run)
    assert sum(report.request_energy_j.values()) == pytest.approx(report.active_energy_j, rel=1e-9)
    assert report.active_energy_j + report.idle_time_energy_j == pytest.approx(report.energy_j)
    assert all(e >= 0 for e in report.request_energy_j.values())


def test_identical_concurrent_requests_share_energy_equally():
    t = _grid(10.0, 0.1)
    records = [_request(rid, 1.0, 2.0, 9.0, 100, 300) for rid in ("a", "b")]
    run = Run("measured", records=records, telemetry=_samples(t, np.full_like(t, 200.0)))
    report = join_energy(run, prefill_token_weight=1.0)
    assert report.request_energy_j["a"] == pytest.approx(report.request_energy_j["b"])
    assert report.request_energy_j["a"] == pytest.approx(200.0 * 8.0 / 2)


def test_failed_request_without_a_first_token_gets_no_energy():
    t = _grid(10.0, 0.1)
    records = [
        _request("ok", 1.0, 2.0, 9.0, 100, 300),
        RequestRecord("fail", 1.0, 1.0, None, 5.0, 100, 0, error_kind="http_500"),
    ]
    run = Run("measured", records=records, telemetry=_samples(t, np.full_like(t, 200.0)))
    report = join_energy(run)
    assert report.request_energy_j["fail"] == 0.0
    assert report.request_energy_j["ok"] == pytest.approx(report.active_energy_j)


def _true_rates(records, t):
    """Prefill and decode token rates at each time in `t`, computed directly per request."""
    prefill = np.zeros_like(t)
    decode = np.zeros_like(t)
    for r in records:
        in_prefill = (t >= r.sent_s) & (t < r.first_token_s)
        prefill[in_prefill] += r.input_tokens / (r.first_token_s - r.sent_s)
        in_decode = (t >= r.first_token_s) & (t < r.finish_s)
        decode[in_decode] += (r.output_tokens - 1) / (r.finish_s - r.first_token_s)
    return prefill, decode


@pytest.mark.parametrize("noise_w", [0.0, 5.0])
def test_regression_recovers_known_prefill_and_decode_coefficients(noise_w):
    rng = np.random.default_rng(11)
    records = _random_requests(rng, 60, 200.0)
    fine = np.arange(0.0, 200.0, 0.001)
    prefill, decode = _true_rates(records, fine)
    power = 80.0 + 0.02 * prefill + 0.6 * decode + noise_w * rng.standard_normal(len(fine))
    counter = np.concatenate([[0.0], np.cumsum(power[:-1] * 0.001)])
    take = slice(0, None, 100)  # 10 Hz samples of the exact energy counter
    run = Run("measured", records=records, telemetry=_samples(fine[take], energy=counter[take]))
    fit = join_energy(run).fit
    assert fit is not None
    assert fit.static_w == pytest.approx(80.0, rel=0.02)
    assert fit.j_per_prefill_token == pytest.approx(0.02, rel=0.05)
    assert fit.j_per_decode_token == pytest.approx(0.6, rel=0.02)
    assert fit.r2 > (0.999 if noise_w == 0 else 0.9)


def test_the_split_standard_errors_match_the_spread_of_repeated_runs():
    """The same requests measured 24 times with fresh white noise on the power (independent
    between 0.1 s intervals, so the ordinary least-squares formula holds): the reported
    standard error of J per decode token is the spread of the 24 estimates, within the
    sampling error of a 24-sample standard deviation (+-30 % at ~2 sigma)."""
    rng = np.random.default_rng(5)
    records = _random_requests(rng, 60, 200.0)
    fine = np.arange(0.0, 200.0, 0.001)
    prefill, decode = _true_rates(records, fine)
    clean = 80.0 + 0.02 * prefill + 0.6 * decode
    estimates, errors = [], []
    for _ in range(24):
        power = clean + 20.0 * rng.standard_normal(len(fine))
        counter = np.concatenate([[0.0], np.cumsum(power[:-1] * 0.001)])
        take = slice(0, None, 100)
        run = Run("measured", records=records, telemetry=_samples(fine[take], energy=counter[take]))
        fit = join_energy(run).fit
        assert fit is not None and fit.j_per_decode_token_se is not None
        estimates.append(fit.j_per_decode_token)
        errors.append(fit.j_per_decode_token_se)
    spread = float(np.std(estimates, ddof=1))
    assert 0.7 < float(np.mean(errors)) / spread < 1.4, (np.mean(errors), spread)
    assert abs(np.mean(estimates) - 0.6) < 3 * spread / np.sqrt(24)


def test_a_coefficient_held_at_zero_has_no_standard_error():
    """Power falls as decode rises (no physics does that): the decode energy is held at 0 and
    its error is one-sided, so none is given; the free ones keep theirs."""
    rng = np.random.default_rng(2)
    records = _random_requests(rng, 60, 200.0)
    fine = np.arange(0.0, 200.0, 0.001)
    prefill, decode = _true_rates(records, fine)
    power = 300.0 + 0.02 * prefill - 0.5 * decode + rng.standard_normal(len(fine))
    counter = np.concatenate([[0.0], np.cumsum(power[:-1] * 0.001)])
    take = slice(0, None, 100)
    run = Run("measured", records=records, telemetry=_samples(fine[take], energy=counter[take]))
    fit = join_energy(run).fit
    assert fit is not None and "j_per_decode_token" in fit.at_zero
    assert fit.j_per_decode_token_se is None and fit.static_w_se is not None


def test_regression_is_none_without_variation():
    t = _grid(60.0, 0.1)
    run = Run("measured", telemetry=_samples(t, np.full_like(t, 100.0)))
    report = join_energy(run)
    assert report.fit is None
    assert any("not identifiable" in note for note in report.notes)


def test_seed_003_scene_a_280_w_at_60_tokens_per_s_is_1_3_kwh_per_million():
    # seed 003 §4: long outputs, about 280 W, about 60 tokens/s -> about 1.3 kWh per million tokens
    t = _grid(600.0, 1.0)
    records = [
        _request(f"r{i}", 60.0 * i, 60.0 * i + 0.2, 60.0 * (i + 1), 50, 3600) for i in range(10)
    ]
    run = Run("measured", records=records, telemetry=_samples(t, np.full_like(t, 280.0)))
    report = join_energy(run)
    assert report.kwh_per_million_output_tokens == pytest.approx(280.0 / 60.0 / 3.6, rel=1e-9)
    assert report.kwh_per_million_output_tokens == pytest.approx(1.3, abs=0.01)


def _drift_run(clock_fall: float, speed_fall: float):
    """20 minutes at 300 W, one request after another; the last 5 minutes optionally slower."""
    t = _grid(1200.0, 1.0)
    clock = np.where(t >= 900.0, 1.98e9 * (1 - clock_fall), 1.98e9)
    records = []
    for i in range(20):
        start = 60.0 * i
        rate = 100.0 * (1 - speed_fall) if start >= 900 else 100.0
        records.append(
            _request(f"r{i}", start, start + 0.5, start + 60.0, 100, int(rate * 59.5) + 1)
        )
    telemetry = _samples(t, np.full_like(t, 300.0), clock=clock)
    return Run("measured", records=records, telemetry=telemetry, duration_s=1200.0)


def test_thermal_drift_is_flagged_when_clock_and_tokens_per_s_fall():
    drift = join_energy(_drift_run(clock_fall=0.12, speed_fall=0.15)).drift
    assert drift is not None
    assert drift.window_s == 300.0
    assert drift.drifted
    assert drift.last.sm_clock_hz == pytest.approx(1.98e9 * 0.88)
    assert drift.last.tokens_per_s == pytest.approx(85.0, rel=0.01)
    assert any("SM clock" in s for s in drift.signals)
    assert any("J per output token" in s for s in drift.signals)


def test_steady_run_shows_no_thermal_drift():
    drift = join_energy(_drift_run(clock_fall=0.0, speed_fall=0.0)).drift
    assert drift is not None
    assert not drift.drifted
    assert drift.first.tokens_per_s == pytest.approx(drift.last.tokens_per_s, rel=0.01)


def test_short_run_has_no_drift_check():
    t = _grid(30.0, 0.1)
    run = Run("measured", telemetry=_samples(t, np.full_like(t, 100.0)))
    assert join_energy(run).drift is None


def test_a_sampling_gap_lowers_coverage_and_is_noted():
    t = np.concatenate([_grid(40.0, 0.1), 60.0 + _grid(40.0, 0.1)])
    run = Run("measured", telemetry=_samples(t, np.full_like(t, 100.0)), duration_s=100.0)
    report = join_energy(run)
    assert report.coverage == pytest.approx(0.8)
    assert report.period_s == pytest.approx(0.1)
    assert any("covers 80%" in note for note in report.notes)


def test_samples_outside_the_run_window_are_clipped():
    t = np.arange(-5.0, 15.01, 0.5)
    run = Run("measured", telemetry=_samples(t, np.full_like(t, 100.0)), duration_s=10.0)
    assert join_energy(run).energy_j == pytest.approx(1000.0)


def test_two_gpus_add_up():
    t = _grid(10.0, 0.1)
    telemetry = _samples(t, np.full_like(t, 100.0), gpu=0) + _samples(
        t, np.full_like(t, 300.0), gpu=1
    )
    report = join_energy(Run("measured", telemetry=telemetry, duration_s=10.0))
    assert report.gpus == 2
    assert report.energy_j == pytest.approx(4000.0)


def test_simulated_timeline_energy_matches_metrics():
    points = [TimelinePoint(0.0, 0, 0, 0, 90.0), TimelinePoint(2.0, 4, 10, 0, 400.0, 0, 4)]
    points.append(TimelinePoint(7.5, 0, 0, 0, 90.0))
    run = Run("simulated", timeline=points, duration_s=10.0)
    report = join_energy(run)
    assert report.energy_source == "timeline"
    assert report.energy_j == pytest.approx(timeline_energy_j(points, 10.0))


def test_run_without_power_is_rejected_with_the_field_named():
    with pytest.raises(ConfigError, match=r"run\.telemetry"):
        join_energy(Run("measured", telemetry=[TelemetrySample(0.0, 0, temp_c=40.0)]))


def test_cumulative_work_counts_every_token_once():
    records = [_request("a", 0.0, 1.0, 5.0, 100, 41), _request("b", 2.0, 2.5, 4.0, 50, 31)]
    phases = phases_of(records)
    ends = cumulative_work(phases, phases.is_prefill, 1.0, np.array([0.0, 10.0]))
    assert ends[1] - ends[0] == pytest.approx(150.0)
    decode = cumulative_work(phases, ~phases.is_prefill, 1.0, np.array([0.0, 3.0, 10.0]))
    assert decode[-1] == pytest.approx(40 + 30)
    assert decode[1] == pytest.approx(40 * 2 / 4 + 30 * 0.5 / 1.5)


def test_a_stream_cut_short_decodes_until_its_last_token():
    cut = RequestRecord("cut", 0.0, 0.0, 1.0, None, 10, 5, token_times_s=[1.0, 2.0, 3.0, 4.0, 5.0])
    phases = phases_of([cut])
    assert list(phases.end_s) == [1.0, 5.0]
    assert list(phases.tokens) == [10.0, 4.0]


def test_report_is_json_serialisable_with_the_derived_figures():
    import json

    report = join_energy(_drift_run(clock_fall=0.1, speed_fall=0.1))
    doc = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert doc["energy_j"] == pytest.approx(300.0 * 1200.0)
    assert doc["drift"]["drifted"] is True
    assert doc["kwh_per_million_output_tokens"] == pytest.approx(
        report.energy_j / 3.6e6 / (report.output_tokens / 1e6)
    )
    assert set(doc["request_energy_j"]) == {f"r{i}" for i in range(20)}


def test_the_split_fit_is_nonnegative_least_squares() -> None:
    from tokenprobe.energy_join import nonnegative_lstsq

    # unconstrained: x = (1, -1); over x >= 0 the optimum is (0.5, 0) (min (x-1)^2 + x^2)
    a, b = np.array([[1.0, 0.0], [1.0, 1.0]]), np.array([1.0, 0.0])
    assert np.allclose(nonnegative_lstsq(a, b), [0.5, 0.0])
    rng = np.random.default_rng(7)
    for _ in range(200):
        a = rng.normal(size=(12, 3))
        b = rng.normal(size=12)
        x = nonnegative_lstsq(a, b)
        grad = a.T @ (a @ x - b)  # KKT: grad = 0 where x > 0, grad >= 0 where x = 0
        assert np.all(x >= 0)
        assert np.allclose(grad[x > 0], 0, atol=1e-8)
        assert np.all(grad[x == 0] >= -1e-8)
        free, *_ = np.linalg.lstsq(a, b, rcond=None)
        if np.all(free >= 0):  # inside the orthant both fits agree
            assert np.allclose(x, free)
