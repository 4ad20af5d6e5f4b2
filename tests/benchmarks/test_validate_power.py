"""benchmarks/validate_power.py: rows grouped by architecture and weight format, and each
observation counted in its own row's group (rows sharing a run key included)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from tokenprobe.calibrate import Observation, Row
from tokenprobe.cost import make_deployment

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import validate_power as vp  # noqa: E402


def _row(model: str, weight: str, label: str) -> Row:
    dep = make_deployment(model, "h100-sxm", weight_dtype=weight)
    return Row("src", "same-run", "vllm", label, dep, {"power_total": 500.0}, lambda d: {})


def test_groups_name_architecture_and_weights() -> None:
    assert vp.model_group(_row("llama-3.1-8b", "bf16", "a")) == "dense-bf16"
    assert vp.model_group(_row("gpt-oss-20b", "mxfp4", "b")) == "moe-mxfp4"
    assert vp.model_group(_row("qwen3-30b-a3b", "fp8", "c")) == "moe-fp8"


def test_each_observation_counts_in_its_own_rows_group() -> None:
    """Two rows of one run key (an fp8 and a bf16 checkpoint of the same model): +10 % on the
    first, -20 % on the second land in their own groups, not both in the last one's."""
    rows = [_row("qwen3-30b-a3b", "fp8", "fp8 B8"), _row("qwen3-30b-a3b", "bf16", "bf16 B8")]
    obs = [
        Observation("src", "same-run", "vllm", "power_total", "fp8 B8", 500.0, 550.0),
        Observation("src", "same-run", "vllm", "power_total", "bf16 B8", 500.0, 400.0),
    ]
    out = {(r["group"], r["metric"]): r for r in vp.energy_by_group(rows, obs)}
    assert out[("moe-fp8", "power")]["median_signed_pct"] == pytest.approx(10.0)
    assert out[("moe-bf16", "power")]["median_signed_pct"] == pytest.approx(-20.0)
    assert out[("moe-bf16", "power")]["rows"] == 1


def test_time_per_token_is_what_energy_holds_beside_power() -> None:
    """Energy +10 % with power +21 %: the time per output token is 1.10 / 1.21 − 1 = −9.09 %
    (E = P·t); a row with only power has no time figure."""
    implied = vp.time_errors({"energy/output token": [0.10, 0.0], "power": [0.21, -0.5]})
    assert implied == pytest.approx([1.10 / 1.21 - 1, 1.0 / 0.5 - 1])
    assert vp.time_errors({"power": [0.21]}) == []
    rows = [_row("llama-3.1-8b", "bf16", "B8"), _row("llama-3.1-8b", "bf16", "B16")]
    rows = [rows[0], dataclasses.replace(rows[1], run="other-run")]
    obs = [
        Observation("src", "same-run", "vllm", "energy_per_output_token", "B8", 1.0, 1.1),
        Observation("src", "same-run", "vllm", "power_total", "B8", 500.0, 605.0),
        Observation("src", "other-run", "vllm", "power_total", "B16", 500.0, 450.0),
    ]
    out = {(r["group"], r["metric"]): r for r in vp.energy_by_group(rows, obs)}
    time = out[("dense-bf16", "time/output token")]
    assert time["rows"] == 1
    assert time["median_signed_pct"] == pytest.approx(100 * (1.10 / 1.21 - 1), abs=0.05)


def test_the_gpu_count_table_groups_by_the_gpus_a_replica_spans() -> None:
    """The same model at TP1 and TP4: +5 % and +12 % power land in "1 gpu" and "4 gpus"."""
    one = _row("llama-3.1-70b", "bf16", "tp1")
    four = dataclasses.replace(
        one, label="tp4", deployment=make_deployment("llama-3.1-70b", "h100-sxm", tp=4)
    )
    assert (vp.gpu_count(one), vp.gpu_count(four)) == ("1 gpu", "4 gpus")
    obs = [
        Observation("src", "same-run", "vllm", "power_total", "tp1", 500.0, 525.0),
        Observation("src", "same-run", "vllm", "power_total", "tp4", 500.0, 560.0),
    ]
    out = {(r["group"], r["metric"]): r for r in vp.energy_by_group([one, four], obs, vp.gpu_count)}
    assert out[("1 gpu", "power")]["median_signed_pct"] == pytest.approx(5.0)
    assert out[("4 gpus", "power")]["median_signed_pct"] == pytest.approx(12.0)
