"""`vllm-blackwell`: vLLM 0.11's kernels on Blackwell GPUs, picked by GPU generation, with the
power model of `vllm` by reference (`power_of`); its recorded errors on ML.ENERGY's B200 runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tokenprobe.calibrate import (
    dumps_profile,
    load_csv,
    load_profile,
    observe,
    parse_profile,
    profile_of,
    select_profile,
    split,
    summarize,
)
from tokenprobe.cli import app
from tokenprobe.cost import gpu_generation
from tokenprobe.errors import SchemaError
from tokenprobe.hardware import get_gpu

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data"
B200_CSV = DATA / "mlenergy_leaderboard_v3_b200.csv"
TIME_METRICS = ("itl_median", "output_throughput")  # the power model does not move these
runner = CliRunner()


def test_the_profile_is_vllm_on_blackwell_with_vllms_power_by_reference() -> None:
    p = load_profile("vllm-blackwell")
    assert (p.engine, p.vendor, p.generation, p.power_of) == ("vllm", "nvidia", "blackwell", "vllm")
    assert p.power == load_profile("vllm").power  # not refitted: energy stays a transfer check
    assert "\n[power]\n" not in dumps_profile(p)
    assert "power" not in " ".join(p.parameters)
    # no GEMM slows as its rows grow (cost/step.py ramps from compute_decode to compute_prefill)
    assert p.efficiency.compute_decode <= p.efficiency.compute_prefill
    assert {e.set for e in p.errors} == {"fitted", "held_out"}


@pytest.mark.parametrize(
    ("engine", "gpu", "expected"),
    [
        ("vllm", "b200", "vllm-blackwell"),
        ("vllm", "gb200", "vllm-blackwell"),  # the same sm100 GPU on a Grace board
        ("vllm", "b300", "vllm-blackwell"),
        ("vllm", "h100-sxm", "vllm"),
        ("vllm", "rtx-pro-6000-server", "vllm"),  # GB202: another SM (energy.toml), not B200's
        ("vllm", "mi300x", "vllm-rocm"),
        ("vllm-2024", "b200", "vllm-2024"),  # an era keeps its own kernels' profile
        ("vllm-blackwell", "h100-sxm", "vllm-blackwell"),  # named explicitly: as named
        ("sglang", "b200", "sglang"),  # no SGLang profile fitted on Blackwell
    ],
)
def test_the_preset_picks_the_profile_by_gpu_generation(
    engine: str, gpu: str, expected: str
) -> None:
    spec = get_gpu(gpu)
    chosen = select_profile(engine, spec.vendor, gpu_generation(spec))
    assert chosen is not None and chosen.name == expected
    if (engine, spec.vendor) == ("vllm", "nvidia"):  # no generation given: the vendor's, as before
        assert select_profile(engine, spec.vendor) == load_profile("vllm")


def _estimate(gpu: str, *extra: str) -> dict[str, object]:
    args = ["estimate", "--model", "llama-3.1-8b", "--gpu", gpu, "--json", *extra]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.output))


def test_estimate_engine_vllm_on_b200_prices_with_the_blackwell_profile() -> None:
    by_engine = _estimate("b200", "--engine", "vllm")
    assert by_engine == _estimate("b200", "--profile", "vllm-blackwell")
    assert by_engine != _estimate("b200", "--profile", "vllm")
    assert _estimate("h100-sxm", "--engine", "vllm") == _estimate("h100-sxm", "--profile", "vllm")


def test_power_of_takes_the_named_profiles_power_and_is_checked() -> None:
    text = '[engine]\nname = "mine"\npower_of = "vllm"\n'
    mine = parse_profile(text, "mine.toml")
    assert mine.power == load_profile("vllm").power
    assert parse_profile(dumps_profile(mine)) == mine
    bad = {
        text + "[power]\nbusy_power_fraction = 0.3\n": "power_of",  # both: which one?
        '[engine]\nname = "x"\npower_of = "tgi"\n': "tgi",  # not a shipped profile
        '[engine]\nname = "x"\npower_of = "vllm-blackwell"\n': "vllm",  # a reference to one
        '[engine]\nname = "x"\ngeneration = "blackwel"\n': "blackwell",  # lists the known ones
    }
    for body, needle in bad.items():
        with pytest.raises(SchemaError, match=needle):
            parse_profile(body, "bad.toml")


def test_recorded_time_errors_are_what_the_b200_rows_give() -> None:
    """Each record's row count and MdAPE before (the `vllm` profile) and after, recomputed from
    the B200 rows split as fit_profiles.py splits them (every third run held out): the figures
    validate.py prints in the profile's record. Energy and power records move with `vllm`'s
    power model (power_of), so only the time metrics are pinned here."""
    profile, start = load_profile("vllm-blackwell"), load_profile("vllm")
    rows = [r for r in load_csv(B200_CSV).rows if profile_of(r) == "vllm-blackwell"]
    assert len(rows) == 275
    fitted, held = split(rows)
    sets = {"fitted": fitted, "held_out": held}
    records = [e for e in profile.errors if e.metric in TIME_METRICS]
    assert {(e.set, e.metric) for e in records} == {(s, m) for s in sets for m in TIME_METRICS}
    for e in records:
        for params, pct in ((start, e.mdape_before_pct), (profile, e.mdape_after_pct)):
            obs = observe(sets[e.set], params.efficiency, params.power)
            (group,) = [g for g in summarize(obs) if g.metric == e.metric]
            assert group.rows == e.rows
            assert 100 * group.mdape == pytest.approx(pct, abs=0.05), (e.set, e.metric)
    # and held out, the fit brought both time figures closer to the measurements
    for e in records:
        if e.set == "held_out":
            assert e.mdape_after_pct < e.mdape_before_pct, e.metric


def test_simulate_engine_vllm_on_b200_names_the_blackwell_profile() -> None:
    args = ["simulate", "--model", "llama-3.1-8b", "--gpu", "b200", "--input-tokens", "64"]
    args += ["--output-tokens", "8", "--rate", "2", "--num-requests", "4", "--json"]
    result = runner.invoke(app, [*args, "--engine", "vllm"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["config"]["profile"] == "vllm-blackwell"
