"""`fit_profiles.py --rerecord-power`: the power and energy records of a profile with its own
[power] recomputed on the rows the power fit reads, parameters and time records kept; the shipped
`vllm` profile's records are what those rows give today (they described 243 rows once 274 ran)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenprobe.calibrate import load_profile

from .fit_profiles_script import fit_profiles

ENERGY = {"energy_per_output_token", "power_total", "power_per_gpu"}


def _main(argv: list[str]) -> int:
    rc: int = fit_profiles().main(argv)
    return rc


@pytest.mark.skipif(
    not fit_profiles().DEFAULT_DIR.is_dir(), reason="no ../shared/validation beside the repository"
)
def test_power_records_are_recomputed_and_nothing_else_moves(tmp_path: Path) -> None:
    assert _main(["--only", "vllm", "--rerecord-power", "--out-dir", str(tmp_path)]) == 0
    shipped, redone = load_profile("vllm"), load_profile(str(tmp_path / "vllm.toml"))
    assert redone.efficiency == shipped.efficiency and redone.power == shipped.power
    time_errors = [e for e in shipped.errors if e.metric not in ENERGY]
    assert [e for e in redone.errors if e.metric not in ENERGY] == time_errors
    energy = [e for e in redone.errors if e.metric in ENERGY]
    assert energy and all(e.set == "fitted" for e in energy)  # B200's are vllm-blackwell's
    assert energy == [e for e in shipped.errors if e.metric in ENERGY]  # the shipped are current
