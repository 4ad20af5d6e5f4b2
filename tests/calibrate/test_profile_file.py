"""Profile files: round trip, strict parsing, the shipped profiles."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenprobe.calibrate import (
    FitError,
    Profile,
    dumps_profile,
    load_profile,
    parse_profile,
    save_profile,
    shipped_profiles,
)
from tokenprobe.cost import DEFAULT_EFFICIENCY, Efficiency, PowerModel
from tokenprobe.errors import ConfigError, SchemaError

PROFILE = Profile(
    name="vllm",
    version="0.11.1",
    fitted_on=("mlenergy_v3",),
    notes='a "quoted" note',
    efficiency=Efficiency(memory=0.8312, step_overhead_s=1.1e-3, kernel_overhead_s=5.5e-6),
    power=PowerModel(chip_flop_per_byte=81.0, busy_power_fraction=0.3),
    parameters=("memory", "step_overhead_s"),
    errors=(FitError("fitted", "mlenergy_v3", "itl_median", 157, 10.1, 8.25),),
)


def test_round_trip_through_a_file(tmp_path: Path) -> None:
    path = save_profile(PROFILE, tmp_path / "p.toml")
    assert load_profile(path) == PROFILE
    assert parse_profile(dumps_profile(PROFILE)) == PROFILE


def test_missing_keys_keep_the_model_defaults() -> None:
    p = parse_profile('[engine]\nname = "x"\n[efficiency]\nmemory = 0.7\n')
    assert p.efficiency.memory == 0.7
    assert p.efficiency.compute_prefill == DEFAULT_EFFICIENCY.compute_prefill


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('[engine]\nname = "x"\n[efficiency]\nmemroy = 0.7\n', "memroy"),
        ('[engine]\nname = "x"\n[power]\nwatts = 1\n', "watts"),
        ('[engine]\nname = "x"\ncolour = "red"\n', "colour"),
        ('[engine]\nname = "x"\n[extras]\na = 1\n', "extras"),
        ('[engine]\nname = "x"\n[efficiency]\nmemory = 1.7\n', "memory"),
        ('[engine]\nname = "x"\n[efficiency]\nmemory = "fast"\n', "memory"),
        ("[efficiency]\nmemory = 0.7\n", "engine"),
        ('[engine]\nname = "x"\n[[fit.error]]\nset = "fitted"\n', "source is missing"),
        (
            '[engine]\nname = "x"\n[[fit.error]]\nset = "train"\nsource = "s"\nmetric = "m"\n'
            "rows = 1\nmdape_before_pct = 1.0\nmdape_after_pct = 1.0\n",
            "train",
        ),
        ("[engine\n", "TOML"),
    ],
)
def test_bad_files_are_rejected_naming_the_key(text: str, needle: str) -> None:
    with pytest.raises(SchemaError, match=needle):
        parse_profile(text, "bad.toml")


def test_shipped_profiles_load_and_record_their_fit() -> None:
    names = shipped_profiles()
    assert {"vllm", "vllm-2024", "sglang", "tensorrt-llm"} <= set(names)
    for name in names:
        p = load_profile(name)
        assert p.efficiency != DEFAULT_EFFICIENCY
        assert {e.set for e in p.errors} == {"fitted", "held_out"}


def test_unknown_profile_name_lists_the_shipped_ones() -> None:
    with pytest.raises(ConfigError, match="tensorrt-llm"):
        load_profile("tgi")
