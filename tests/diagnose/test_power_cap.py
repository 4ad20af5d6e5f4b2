"""The power-cap branch of the throttling rule, and compute-bound's deference to it, at their
edges. The real cases (a power-capped T4 scrape, an H100 under gpu-burn at its max clock) are in
test_public_traces_rules.py; here SYNTHETIC samples (built in the test, not measured) put one
figure at a time on either side of a mark: the power limit recorded or not, the clock just above
or below CAPPED_CLOCK_OF_BOOST, the time at the limit just under or over THROTTLE_SHARE, a GPU
without a catalog boost clock, two GPUs whose power and clock must not be mixed; and the
clock-drop and power-cap checks judged per GPU (steady GPUs at different clocks, one falling
clock, one capped GPU among four), each firing GPU named.
"""

from __future__ import annotations

from dataclasses import replace
from statistics import median

import pytest

from diagnose.runs import gpu_log
from tokenprobe.diagnose import Verdict, diagnose
from tokenprobe.diagnose.context import (
    CAPPED_CLOCK_OF_BOOST,
    HIGH_POWER_OF_TDP,
    POWER_CAP_OF_LIMIT,
    THROTTLE_SHARE,
)
from tokenprobe.hardware import get_gpu
from tokenprobe.records import Run, TelemetrySample

H100_BOOST_MHZ = 1980.0  # catalog h100-sxm boost clock (= nvidia-smi clocks.max.sm)


def _run(
    rows: list[tuple[float, float]],
    gpu: str = "h100-sxm",
    limit_w: float | None = None,
    gpu_index: int | None = 0,
) -> Run:
    """An imported run of 1-s samples (power W, SM clock MHz) at 99 % utilization, throttle
    reasons 0x0 (so only the power-cap branch can fire), optionally with an enforced limit."""
    samples = [
        TelemetrySample(
            t_s=float(i),
            gpu_index=gpu_index,
            power_w=power,
            gpu_util=0.99,
            sm_clock_hz=clock_mhz * 1e6,
            throttle_reasons=0,
            power_limit_w=limit_w,
        )
        for i, (power, clock_mhz) in enumerate(rows)
    ]
    return Run(kind="imported", config={"gpu": gpu}, telemetry=samples)


def _verdict(run: Run, rule: str) -> Verdict:
    return next(v for v in diagnose(run).verdicts if v.rule == rule)


def test_the_marks() -> None:
    assert (POWER_CAP_OF_LIMIT, CAPPED_CLOCK_OF_BOOST, THROTTLE_SHARE) == (0.9, 0.85, 0.1)
    assert get_gpu("h100-sxm").sm_clock_hz == H100_BOOST_MHZ * 1e6


def test_a_lowered_enforced_limit_from_the_telemetry_is_the_limit() -> None:
    """An H100 capped by `nvidia-smi -pl 300`: 295 W of the 300 W enforced limit (98 %) at
    1200 MHz (61 % of boost) fires, judged against the recorded limit, not the 700 W TDP."""
    verdict = _verdict(_run([(295.0, 1200.0)] * 20, limit_w=300.0), "throttling")
    assert verdict.status == "fired", verdict.reason
    assert verdict.finding is not None
    ev = verdict.finding.evidence
    assert ev["power_limit_w"] == 300.0
    assert ev["power_limit_source"] == "enforced, from the telemetry"
    assert ev["power_of_limit_busy"] == pytest.approx(round(295 / 300, 3))
    assert ev["sm_clock_hz_at_power_limit"] == 1200e6
    assert ev["sm_clock_of_boost_at_power_limit"] == pytest.approx(round(1200 / 1980, 3))
    assert ev["throttled_sample_share"] == 0.0 and ev["sm_clock_drop_fraction"] == 0.0
    assert verdict.finding.summary == (
        "Power-capped: SM clock 1200 MHz = 61% of the 1980 MHz boost clock at 295.0 W = 98% of "
        "the 300 W power limit (enforced, from the telemetry)"
    )


def test_without_the_recorded_limit_the_same_samples_are_not_at_the_tdp() -> None:
    """Must not fire: the same 295 W / 1200 MHz with no limit recorded are 42 % of the catalog's
    700 W TDP, so the low clock is not laid at the power limit's door."""
    verdict = _verdict(_run([(295.0, 1200.0)] * 20), "throttling")
    assert verdict.status == "clear", verdict.reason
    assert verdict.reason == (
        "throttled 0% of samples, clock drop 0%; power 42% of the 700 W power limit (catalog "
        "TDP of h100-sxm): not at it"
    )


@pytest.mark.parametrize(
    ("clock_mhz", "fires"),
    [(1670.0, True), (1700.0, False)],
    ids=["84%-of-boost", "86%-of-boost"],
)
def test_the_clock_mark_at_the_power_limit(clock_mhz: float, fires: bool) -> None:
    """690 W of 700 W (99 %), steady clock: 1670 MHz (84.3 % of 1980) fires, 1700 MHz (85.9 %)
    does not; compute-bound is the mirror image (clear when capped, fired when not)."""
    assert (clock_mhz / H100_BOOST_MHZ < CAPPED_CLOCK_OF_BOOST) is fires
    run = _run([(690.0, clock_mhz)] * 20)
    throttling = _verdict(run, "throttling")
    assert (throttling.status == "fired") is fires, throttling.reason
    compute = _verdict(run, "compute-bound")
    assert compute.status == ("clear" if fires else "fired"), compute.reason
    if fires:
        assert "but power-capped" in compute.reason and "(see throttling)" in compute.reason
    else:
        assert "at >= 90% of the 700 W power limit" in throttling.reason


@pytest.mark.parametrize(("at_limit", "fires"), [(1, False), (3, True)], ids=["5%", "15%"])
def test_the_time_at_the_limit_must_reach_the_throttle_share(at_limit: int, fires: bool) -> None:
    """20 samples at 400 W and 1980 MHz, of which `at_limit` in the middle at 690 W and 1500 MHz:
    5 % of the busy time at the limit (< 10 %) stays clear, 15 % fires, with the share said."""
    rows = [(400.0, 1980.0)] * 20
    rows[8 : 8 + at_limit] = [(690.0, 1500.0)] * at_limit
    verdict = _verdict(_run(rows), "throttling")
    assert (verdict.status == "fired") is fires, verdict.reason
    if fires:
        assert verdict.finding is not None
        assert verdict.finding.evidence["at_power_limit_share"] == 0.15
        assert verdict.finding.summary.endswith("for 15% of the busy time")
    else:
        assert "5% of the busy time with SM clock 1500 MHz" in verdict.reason


def test_a_gpu_without_a_catalog_boost_clock_is_not_judged_for_a_power_cap() -> None:
    """The catalog's h200 has no boost clock: the power cap is not judged (said in the reason),
    and the other evidence still decides (clear here)."""
    assert get_gpu("h200").sm_clock_hz is None
    verdict = _verdict(_run([(690.0, 1000.0)] * 20, gpu="h200"), "throttling")
    assert verdict.status == "clear", verdict.reason
    assert verdict.reason.endswith("power cap not judged: the catalog has no boost clock for h200")


def test_power_and_clock_are_paired_sample_by_sample() -> None:
    """Must not fire: two GPUs, GPU 0 at 690 W with its clock at 1980 MHz, GPU 1 at 300 W and
    1000 MHz (a low clock far from the limit). The samples at the limit are GPU 0's, at full
    clock; GPU 1's low clock is not set against GPU 0's power. (4 samples each: fewer than the
    10 busy samples per GPU the clock-drop check needs.)"""
    run = _run([(690.0, 1980.0)] * 4, gpu_index=0)
    other = _run([(300.0, 1000.0)] * 4, gpu_index=1)
    run.telemetry.extend(other.telemetry)
    verdict = _verdict(run, "throttling")
    assert verdict.status == "clear", verdict.reason
    assert "50% of the busy time with SM clock 1980 MHz = 100%" in verdict.reason


def test_the_handwritten_throttled_log_still_fires_on_its_reasons_not_as_power_capped() -> None:
    """LOG throttled: ~690 W at the 700 W cap, reasons 0x4 / 0x24 in 80 % of samples, clock
    1980 -> 1592 MHz. It fires as before, with the same summary; the median clock at the limit
    (1830 MHz, 92 % of boost) keeps the power-cap branch quiet, so compute-bound still fires."""
    result = diagnose(gpu_log("throttled"))
    verdict = next(v for v in result.verdicts if v.rule == "throttling")
    assert verdict.status == "fired" and verdict.finding is not None
    assert verdict.finding.summary == (
        "Power/thermal throttling in 80% of samples; SM clock fell 17% from the first to the "
        "last fifth of the busy time"
    )
    ev = verdict.finding.evidence
    assert ev["power_capped"] is False
    assert ev["sm_clock_hz_at_power_limit"] == 1830e6
    assert ev["at_power_limit_share"] == 1.0
    assert "compute-bound" in result.kinds()


@pytest.mark.parametrize("name", ["membound", "starved"])
def test_the_handwritten_busy_and_starved_logs_are_not_at_the_limit(name: str) -> None:
    """LOG membound (~365 W, 52 %) and starved (~118 W, 17 %) at a steady 1980 MHz: not at the
    700 W limit, nothing to cap."""
    verdict = _verdict(gpu_log(name), "throttling")
    assert verdict.status == "clear", verdict.reason
    assert verdict.reason.endswith("of the 700 W power limit (catalog TDP of h100-sxm): not at it")


def _gpus(per_gpu: list[list[tuple[float, float]]], interleave: bool = True) -> Run:
    """One imported run of several GPUs (index = position in `per_gpu`) built with `_run`:
    sampled at the same 1-s ticks (interleaved) or one GPU after another (`interleave` False)."""
    runs = [_run(rows, gpu_index=i) for i, rows in enumerate(per_gpu)]
    if not interleave:
        for i, run in enumerate(runs[1:], start=1):
            offset = sum(len(rows) for rows in per_gpu[:i])
            run.telemetry[:] = [replace(s, t_s=s.t_s + offset) for s in run.telemetry]
    run = runs[0]
    for other in runs[1:]:
        run.telemetry.extend(other.telemetry)
    run.telemetry.sort(key=lambda s: (s.t_s, s.gpu_index or 0))
    return run


@pytest.mark.parametrize("interleave", [True, False], ids=["interleaved", "one-after-another"])
def test_two_steady_gpus_at_different_clocks_are_no_clock_drop(interleave: bool) -> None:
    """Must not fire: GPU 0 steady at 1980 MHz, GPU 1 steady at 1600 MHz (both at 400 W, far
    from the 700 W limit), 20 samples each. Pooled, the first fifth of the busy time would be GPU
    0's 1980 MHz and the last GPU 1's 1600 MHz: a 19 % "drop" that no GPU shows."""
    run = _gpus([[(400.0, 1980.0)] * 20, [(400.0, 1600.0)] * 20], interleave)
    verdict = _verdict(run, "throttling")
    assert verdict.status == "clear", verdict.reason
    assert verdict.reason.startswith("throttled 0% of samples, clock drop 0%;")


def test_one_gpu_whose_clock_falls_fires_and_is_named() -> None:
    """GPU 0 steady at 1980 MHz; GPU 1 from 1980 to 1500 MHz over the run (20 samples each,
    400 W, no reasons, not at the limit): the drop is GPU 1's (21 %), and the finding names it."""
    falling = [(400.0, 1980.0 - (1980.0 - 1500.0) * i / 19) for i in range(20)]
    run = _gpus([[(400.0, 1980.0)] * 20, falling])
    verdict = _verdict(run, "throttling")
    assert verdict.status == "fired", verdict.reason
    assert verdict.finding is not None
    ev = verdict.finding.evidence
    assert ev["sm_clock_drop_gpus"] == "GPU 1"
    assert ev["power_capped"] is False and ev["power_capped_gpus"] is None
    clocks = [clock for _, clock in falling]
    first, last = median(clocks[:4]), median(clocks[-4:])  # first and last fifth of 20 samples
    assert ev["sm_clock_drop_fraction"] == pytest.approx(round((first - last) / first, 3))
    assert verdict.finding.summary == (
        "Power/thermal throttling in 0% of samples; GPU 1: SM clock fell 21% from the first to "
        "the last fifth of the busy time"
    )


@pytest.mark.parametrize(
    "healthy_w", [400.0, 680.0], ids=["others-under-the-limit", "others-at-the-limit-full-clock"]
)
def test_one_power_capped_gpu_among_four_is_not_outvoted(healthy_w: float) -> None:
    """4 GPUs, 20 samples each: GPU 2 at 690 W of the 700 W TDP (99 %) with its clock at
    1188 MHz (60 % of boost); GPUs 0, 1, 3 at full boost clock, either at 400 W (pooled, GPU 2's
    samples were the only ones at the limit, but no GPU was named) or at 680 W (97 %: pooled,
    their 1980 MHz set the median clock at the limit and outvoted GPU 2). Judged per GPU, GPU 2
    is capped: fires, naming GPU 2 with GPU 2's own figures; compute-bound (at 680 W, over 80 %
    of TDP) defers to it."""
    capped_mhz = 0.6 * H100_BOOST_MHZ
    healthy = [(healthy_w, H100_BOOST_MHZ)] * 20
    run = _gpus([healthy, healthy, [(690.0, capped_mhz)] * 20, healthy])
    result = diagnose(run)
    verdict = next(v for v in result.verdicts if v.rule == "throttling")
    assert verdict.status == "fired", verdict.reason
    assert verdict.finding is not None
    ev = verdict.finding.evidence
    assert ev["power_capped"] is True and ev["power_capped_gpus"] == "GPU 2"
    assert ev["sm_clock_hz_at_power_limit"] == round(capped_mhz * 1e6)
    assert ev["at_power_limit_share"] == 1.0
    assert ev["sm_clock_drop_fraction"] == 0.0 and ev["sm_clock_drop_gpus"] is None
    assert verdict.finding.summary == (
        "GPU 2 (1 of 4 GPUs): Power-capped: SM clock 1188 MHz = 60% of the 1980 MHz boost clock "
        "at 690.0 W = 99% of the 700 W power limit (catalog TDP of h100-sxm)"
    )
    compute = next(v for v in result.verdicts if v.rule == "compute-bound")
    assert compute.status == "clear", compute.reason
    if healthy_w >= HIGH_POWER_OF_TDP * 700:  # busy power over 80 % of TDP: would fire uncapped
        assert "but power-capped: GPU 2 (1 of 4 GPUs): SM clock 1188 MHz" in compute.reason
