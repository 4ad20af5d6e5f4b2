"""diagnose prices the catalog's static power at the run's measured die temperature
(diagnose/thermal.py, cost/thermal.py: issue 19 item 2)."""

from __future__ import annotations

import pytest

from tokenprobe.diagnose import diagnose
from tokenprobe.records import Run, TelemetrySample


def _gpu_log(temp_c: float) -> Run:
    samples = [
        TelemetrySample(float(t), 0, power_w=120.0, gpu_util=0.0, temp_c=temp_c) for t in range(121)
    ]
    return Run("measured", config={"gpu": "h100-sxm"}, telemetry=samples)


def test_idle_waste_prices_the_catalog_static_power_at_the_measured_temperature() -> None:
    # a GPU log without records has no idle stretch: static power is the catalog's 70 W, at the
    # log's 70 C 90.35 W, i.e. 75 % of the 120 W drawn instead of 58 %
    cool, hot = diagnose(_gpu_log(41.0)), diagnose(_gpu_log(70.0))
    ev = {
        name: next(v for v in d.verdicts if v.rule == "idle-waste").finding
        for name, d in (("cool", cool), ("hot", hot))
    }
    assert ev["cool"] is not None and ev["hot"] is not None
    assert ev["cool"].evidence["static_power_w"] == pytest.approx(70.0, abs=0.05)
    assert ev["hot"].evidence["static_power_w"] == pytest.approx(90.35, abs=0.1)
    assert "70 °C" in str(ev["hot"].evidence["static_power_method"])
