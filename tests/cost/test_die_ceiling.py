"""A board that runs another board's die at its clocks draws at most that die's dynamic range
(catalog/energy.toml `die_power_of`; cost/energy.py): GH200 runs H100 SXM's GH100."""

from __future__ import annotations

import copy

import pytest

from tokenprobe.cost import BatchShape, make_deployment, step_cost
from tokenprobe.cost.energy_figures import _catalog, _check, energy_figures
from tokenprobe.errors import SchemaError
from tokenprobe.hardware import get_gpu, gpu_names


def test_gh200_boards_take_h100_sxms_dynamic_range_and_no_other_board_changes() -> None:
    """H100 SXM: 700 W TDP − 70 W idle = 630 W (gpus.toml), the ceiling of both GH200 boards;
    every other board keeps its own power limit as the only ceiling."""
    for name in ("gh200", "gh200-144gb"):
        assert energy_figures(get_gpu(name)).die_limit_w == pytest.approx(630.0)
    others = [n for n in gpu_names() if n not in ("gh200", "gh200-144gb")]
    assert all(energy_figures(get_gpu(n)).die_limit_w is None for n in others)


def test_a_compute_bound_prefill_on_gh200_draws_h100s_range_above_its_own_idle() -> None:
    """Llama-3.1-8B, 8 x 4096 prompt tokens: a compute-bound step that holds an H100 SXM at its
    700 W limit. On a GH200 (90 W idle, 900 W limit) the same die at the same speed draws at
    most 90 + 630 = 720 W, not the 900 W its limit allows; the step takes H100's time (the same
    peaks and efficiencies; GH200's faster HBM3e only shortens memory-bound parts)."""
    shape = BatchShape.prefill(4096, 8)
    h100 = step_cost(make_deployment("llama-3.1-8b", "h100-sxm"), shape)
    gh200 = step_cost(make_deployment("llama-3.1-8b", "gh200-144gb"), shape)
    assert h100.power_w == pytest.approx(700.0)
    assert gh200.power_w == pytest.approx(720.0)
    assert gh200.time_s == pytest.approx(h100.time_s, rel=0.05)


def test_a_decode_step_far_below_the_ceiling_is_unchanged_by_it() -> None:
    """Batch-1 decode reads the weights at HBM speed and draws well under 720 W: the ceiling
    does not bind, so GH200's power there is what the formula gives (under its own limit)."""
    dep = make_deployment("llama-3.1-8b", "gh200-144gb")
    cost = step_cost(dep, BatchShape.decode(1, 1024))
    assert 90.0 < cost.power_w < 600.0


def test_die_power_of_must_name_a_gpu_of_the_same_generation() -> None:
    doc = copy.deepcopy(_catalog())
    doc["gpu"]["gh200"]["die_power_of"] = "b200"  # Blackwell's die on a Hopper board
    with pytest.raises(SchemaError, match="die_power_of"):
        _check(doc)
    doc["gpu"]["gh200"]["die_power_of"] = "h100-sxm9"
    with pytest.raises(SchemaError, match="die_power_of"):
        _check(doc)
