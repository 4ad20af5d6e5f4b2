"""`fit_profiles.py --rerecord-power`: the power and energy records of a profile with its own
[power] recomputed on the rows the power fit reads, parameters and time records kept; the shipped
`vllm` profile's records are what those rows give today (they described 243 rows once 274 ran)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from tokenprobe.calibrate import load_profile

FIT = Path(__file__).resolve().parents[2] / "benchmarks" / "fit_profiles.py"
ENERGY = {"energy_per_output_token", "power_total", "power_per_gpu"}


def _main(argv: list[str]) -> int:
    sys.path.insert(0, str(FIT.parent))
    try:
        loaded = importlib.util.spec_from_file_location("fit_profiles", FIT)
        assert loaded is not None and loaded.loader is not None
        module = importlib.util.module_from_spec(loaded)
        loaded.loader.exec_module(module)
    finally:
        sys.path.remove(str(FIT.parent))
    rc: int = module.main(argv)
    return rc


def test_power_records_are_recomputed_and_nothing_else_moves(tmp_path: Path) -> None:
    assert _main(["--only", "vllm", "--rerecord-power", "--out-dir", str(tmp_path)]) == 0
    shipped, redone = load_profile("vllm"), load_profile(str(tmp_path / "vllm.toml"))
    assert redone.efficiency == shipped.efficiency and redone.power == shipped.power
    time_errors = [e for e in shipped.errors if e.metric not in ENERGY]
    assert [e for e in redone.errors if e.metric not in ENERGY] == time_errors
    energy = [e for e in redone.errors if e.metric in ENERGY]
    assert energy and all(e.set == "fitted" for e in energy)  # B200's are vllm-blackwell's
    assert energy == [e for e in shipped.errors if e.metric in ENERGY]  # the shipped are current
