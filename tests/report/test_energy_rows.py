"""The energy table of a measured run's report: the join's figures and its prefill/decode split
with the standard errors, each line naming its basis (the GPU)."""

from __future__ import annotations

import numpy as np

from test_energy_join import _random_requests, _samples, _true_rates
from tokenprobe.energy_join import join_energy
from tokenprobe.metrics import summarize
from tokenprobe.records import Run
from tokenprobe.report import run_sections


def _energy_table(decode_j: float):
    rng = np.random.default_rng(3)
    records = _random_requests(rng, 60, 200.0)
    fine = np.arange(0.0, 200.0, 0.001)
    prefill, decode = _true_rates(records, fine)
    power = 80.0 + 0.02 * prefill + decode_j * decode + 5.0 * rng.standard_normal(len(fine))
    counter = np.concatenate([[0.0], np.cumsum(power[:-1] * 0.001)])
    take = slice(0, None, 100)
    run = Run("measured", records=records, telemetry=_samples(fine[take], energy=counter[take]))
    summary = {**summarize(run), "energy": join_energy(run).to_dict()}
    section = next(s for s in run_sections(run, summary) if s.title == "Energy")
    return dict(section.tables[0].rows)


def test_the_split_is_shown_with_its_standard_errors() -> None:
    rows = _energy_table(0.6)
    value, se = rows["J per output token (GPU, prefill/decode split)"].split(" ± ")
    assert abs(float(value) - 0.6) < 0.02 and 0 < float(se) < 0.02
    assert float(rows["R² of the split"]) > 0.9


def test_a_coefficient_held_at_zero_says_so() -> None:
    rows = _energy_table(-0.5)
    assert rows["J per output token (GPU, prefill/decode split)"].startswith("0 (held at 0")
