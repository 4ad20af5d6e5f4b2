"""The fitter: recovers known parameters, never ends worse than it starts, reports what it
cannot see."""

from __future__ import annotations

import math

import pytest

from tokenprobe.calibrate import Params, fit, load_rows, observe, summarize
from tokenprobe.calibrate.fit import BOUNDS
from tokenprobe.errors import ConfigError

from .conftest import TRUE_VALUES


def test_recovers_known_parameters_from_noise_free_measurements(truth, make_rows) -> None:
    rows = make_rows(truth)
    result = fit(rows, list(TRUE_VALUES), ridge=0.0, max_iterations=60)
    for name, true in TRUE_VALUES.items():
        assert result.values[name] == pytest.approx(true, rel=0.03), name


def test_recovers_within_a_few_percent_under_measurement_noise(truth, make_rows) -> None:
    rows = make_rows(truth, noise=0.02, seed=3)
    result = fit(rows, list(TRUE_VALUES))
    # the two overheads are nearly collinear at these shapes; the bandwidth/compute ones are not
    for name in ("compute_prefill", "memory", "attention_memory", "power.busy_power_fraction"):
        assert result.values[name] == pytest.approx(TRUE_VALUES[name], rel=0.05), name


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fitted_error_never_ends_worse(truth, make_rows, seed: int) -> None:
    # a start far from the truth, noisy data and a mis-specified parameter set
    rows = make_rows(truth, noise=0.15, seed=seed)
    start = Params().with_values({"memory": 0.4, "step_overhead_s": 5e-3})
    result = fit(rows, ["memory", "kernel_overhead_s", "power.busy_power_fraction"], start)
    assert result.objective_end <= result.objective_start
    before = summarize(observe(rows, start.efficiency, start.power))
    after = summarize(observe(rows, result.params.efficiency, result.params.power))
    fitted_metrics = [g for g in before if g.metric != "energy_per_output_token"]
    assert sum(g.mdape for g in after if g.metric != "energy_per_output_token") <= sum(
        g.mdape for g in fitted_metrics
    )


def test_parameters_no_measurement_depends_on_stay_put(truth, make_rows) -> None:
    rows = make_rows(truth)  # one GPU each: no all-reduce, no experts
    result = fit(rows, ["memory", "link", "moe_memory"])
    assert set(result.not_identifiable) == {"link", "moe_memory"}
    assert result.values["link"] == Params().get("link")


def test_fitted_values_stay_inside_their_bounds(truth, make_rows) -> None:
    rows = make_rows(truth, noise=0.3, seed=9)
    result = fit(rows, list(BOUNDS))
    for name, value in result.values.items():
        lo, hi = BOUNDS[name]
        assert lo <= value <= hi and math.isfinite(value), name


def test_unknown_parameter_is_rejected_naming_the_choices(truth, make_rows) -> None:
    with pytest.raises(ConfigError, match="compute_prefill"):
        fit(make_rows(truth), ["dvfs_exponent"])


def test_a_parameter_starting_on_its_bound_is_fitted_continuously() -> None:
    """request_overhead_s starts at 0, its lower bound; the fit starts just inside the bound and
    every evaluation must see that same point, or the finite differences see a jump."""
    import numpy as np

    from tokenprobe.calibrate.fit import Objective

    line = {
        "source_id": "gpustack_performance_lab",
        "engine": "SGLang",
        "model": "Qwen3-8B",
        "model_hf_id": "Qwen/Qwen3-8B",
        "gpu": "H100-SXM",
        "tp": "1",
        "weight_precision": "bf16",
        "workload_type": "closed_loop_concurrency",
        "isl_mean": "233",
        "osl_mean": "64",
        "concurrency": "1",
        "num_requests": "8",
        "ttft_ms_median": "40.0",
    }
    rows = load_rows([line]).rows
    obj = Objective(rows, ["request_overhead_s"], Params())
    r0 = obj.log_errors(obj.z0)
    slopes = []
    for dz in (1e-3, 1e-2):
        slopes.append(float((obj.log_errors(obj.z0 + dz) - r0)[0] / dz))
    assert slopes[0] > 0 and slopes[0] == pytest.approx(slopes[1], rel=0.05)
    fitted = fit(rows, ["request_overhead_s"])
    # a 233-token prefill takes ~5 ms on an H100: the rest of the 40 ms is front end
    assert 0.025 < fitted.values["request_overhead_s"] < 0.040
    assert np.isfinite(fitted.objective_end)
