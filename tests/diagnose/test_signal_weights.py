"""How `signals_of` weighs telemetry samples in time (tokenprobe.diagnose.signals docstring), on
small inline runs: every sample holds until the next one of its GPU; the last one holds for that
GPU's median period, cut at the run's end when the run has one. The real two-row nvidia-smi
capture is checked in test_public_traces_rules.py."""

from __future__ import annotations

import pytest

from tokenprobe.diagnose import signals_of
from tokenprobe.records import Run, TelemetrySample


def _run(samples: list[tuple[float, int, float]], duration_s: float | None = None) -> Run:
    """An imported run of (t_s, gpu_index, gpu_util) samples, without requests."""
    telemetry = [TelemetrySample(t_s=t, gpu_index=g, gpu_util=u) for t, g, u in samples]
    return Run(kind="imported", telemetry=telemetry, duration_s=duration_s)


def _util(run: Run) -> tuple[list[float], float | None]:
    series = signals_of(run).gpu_util
    assert series is not None
    return list(series.dt_s), series.mean()


def test_without_a_run_end_the_last_sample_holds_for_the_median_period() -> None:
    """Samples at 0, 1 and 3 s (gaps 1 and 2, median 1.5), busy only in the last one: it counts
    for 1.5 of 4.5 s, where giving it no weight read an idle GPU."""
    weights, mean = _util(_run([(0.0, 0, 0.0), (1.0, 0, 0.0), (3.0, 0, 1.0)]))
    assert weights == pytest.approx([1.0, 2.0, 1.5])
    assert mean == pytest.approx(1.5 / 4.5)


def test_a_known_run_end_cuts_the_last_sample() -> None:
    """Same samples in a run of 3.5 s: the last one holds 0.5 s, not the 1.5 s period; a run
    that ends at the last sample gives it nothing (it describes time after the run)."""
    samples = [(0.0, 0, 0.0), (1.0, 0, 0.0), (3.0, 0, 1.0)]
    weights, mean = _util(_run(samples, duration_s=3.5))
    assert weights == pytest.approx([1.0, 2.0, 0.5])
    assert mean == pytest.approx(0.5 / 3.5)
    weights, mean = _util(_run(samples, duration_s=3.0))
    assert weights == pytest.approx([1.0, 2.0, 0.0])
    assert mean == pytest.approx(0.0)


def test_each_gpu_uses_its_own_period() -> None:
    """GPU 0 sampled every 1 s (busy), GPU 1 every 2 s (idle): each last sample holds for its
    own GPU's period, so each GPU counts for its 3 s and 6 s and the mean is 3 / 9 busy."""
    gpu0 = [(0.0, 0, 1.0), (1.0, 0, 1.0), (2.0, 0, 1.0)]
    gpu1 = [(0.0, 1, 0.0), (2.0, 1, 0.0), (4.0, 1, 0.0)]
    weights, mean = _util(_run(gpu0 + gpu1))
    assert weights == pytest.approx([1.0, 1.0, 1.0, 2.0, 2.0, 2.0])
    assert mean == pytest.approx(3.0 / 9.0)


def test_a_lone_sample_without_a_run_end_holds_for_the_other_gpus_period() -> None:
    """GPU 1 has one sample and the run no end: it holds for GPU 0's period (2 s), so it is not
    drowned by (or drowning) GPU 0's samples."""
    weights, mean = _util(_run([(0.0, 0, 1.0), (2.0, 0, 1.0), (1.0, 1, 0.0)]))
    assert weights == pytest.approx([2.0, 2.0, 2.0])
    assert mean == pytest.approx(2.0 / 3.0)
