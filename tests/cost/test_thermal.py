"""Static power rises with die temperature at the same clock (cost/thermal.py, issue 19 item 2)."""

from __future__ import annotations

import math

import pytest

from tokenprobe.cost import DEFAULT_POWER, idle_power_at_w, thermal
from tokenprobe.cost.energy import GpuWork
from tokenprobe.cost.energy_figures import energy_figures
from tokenprobe.hardware import get_gpu


def test_catalog_figures_and_the_h100_by_hand() -> None:
    # Liao, He & Lepak's 65 nm table: ln(23.44 / 16.00) / 40 = 0.0095, ln(29.56 / 21.33) / 40 =
    # 0.0082 per K, mean 0.0088; the catalog's idle figures hold at 41 C
    t = thermal()
    assert t.leakage_per_kelvin == pytest.approx(
        (math.log(23.44 / 16.00) + math.log(29.56 / 21.33)) / 80, abs=1e-4
    )
    assert t.reference_temp_c == 41.0
    # an H100 (70 W idle) at 70 C: 70 x exp(0.0088 x 29) = 90.35 W; no temperature: 70 W
    assert idle_power_at_w(70.0, 70.0) == pytest.approx(70 * math.exp(0.0088 * 29))
    assert idle_power_at_w(70.0, None) == 70.0 == idle_power_at_w(70.0, 41.0)
    assert idle_power_at_w(70.0, 30.0) < 70.0  # a cooler die leaks less


def test_the_power_model_adds_the_leakage_rise_and_nothing_else() -> None:
    gpu = get_gpu("h100-sxm")
    figures = energy_figures(gpu)
    work = GpuWork("bf16", 1e12, 1e9, 0.0, 0.01, 0.01, gpu.idle_w, figures.die_dynamic_w(gpu))
    hot = GpuWork(**{**{f: getattr(work, f) for f in work.__slots__}, "temp_c": 70.0})
    rise = DEFAULT_POWER.power_w(hot, figures) - DEFAULT_POWER.power_w(work, figures)
    assert rise == pytest.approx(70 * (math.exp(0.0088 * 29) - 1))
