"""TokenPowerBench's GH200 rows: a second energy-per-token source, replayed without refitting."""

from __future__ import annotations

import csv
from pathlib import Path

from tokenprobe.calibrate import load_csv, load_profile, observe, profile_of
from tokenprobe.hardware import get_gpu

CSV = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "tokenpowerbench_gh200.csv"


def _lines() -> list[dict[str, str]]:
    with CSV.open(newline="") as f:
        return list(csv.DictReader(f))


def test_the_csv_holds_the_docs_own_arithmetic() -> None:
    """Each derived cell is the doc's raw figures combined as its notes say: the 7B run's
    6604.168904 J over 1536 output tokens and 13.819793 s; the decode windows' 4929.235342 J
    over 3 x 511 tokens and 10.727084 s (docs/gh200-validation.md)."""
    run, window = (r for r in _lines() if r["model"] == "Qwen2.5-7B-Instruct")
    assert abs(float(run["energy_J_per_output_token"]) * 1536 - 6604.168904) < 0.01
    assert abs(float(run["power_W_total"]) * 13.819793 - 6604.168904) < 0.01
    assert abs(float(run["e2e_latency_ms_mean"]) * 3 - 13819.793) < 0.01
    decode_j = 1640.632151 + 1633.389224 + 1655.213967
    assert abs(float(window["energy_J_per_output_token"]) * 3 * 511 - decode_j) < 0.01
    assert abs(float(window["power_W_total"]) * (3.573980 + 3.546484 + 3.606620) - decode_j) < 0.01


def test_rows_map_to_gh200_144gb_and_the_small_model_is_counted_not_guessed() -> None:
    loaded = load_csv(CSV)
    assert [r.deployment.gpu.name for r in loaded.rows] == ["gh200-144gb"] * 2
    assert sum(loaded.skipped.values()) == 4  # the four Qwen2.5-0.5B smoke runs
    assert all("Qwen2.5-0.5B" in reason for reason in loaded.skipped)
    assert {profile_of(r) for r in loaded.rows} == {"vllm"}  # vLLM 0.10 on NVIDIA


def test_decode_window_respects_hbm_and_the_power_limit() -> None:
    """Batch 1 at ~30k context: each token reads the bf16 weights (7.62e9 parameters x 2 B) and
    the KV cache (28 layers x 2 x 4 KV heads x 128 x 2 B = 57,344 B a token, >= 30,035 tokens),
    so no prediction can beat (15.2e9 + 1.72e9) B / 4.9e12 B/s = 3.5 ms a token; the power stays
    between the board's idle and its 900 W limit, and energy = power x time a token."""
    loaded = load_csv(CSV)
    window = next(r for r in loaded.rows if "decode window" in r.label)
    profile = load_profile("vllm")
    got = window.predictions(profile.efficiency, profile.power)
    gpu = get_gpu("gh200-144gb")
    floor_s = (7.62e9 * 2 + 30035 * 57344) / gpu.hbm_bytes_per_s
    assert got["tpot_mean"] > floor_s
    assert gpu.idle_w < got["power_per_gpu"] <= gpu.tdp_w
    assert abs(got["energy_per_output_token"] - got["power_per_gpu"] * got["tpot_mean"]) < 1e-9
    assert {o.metric for o in observe([window])} == {"energy_per_output_token", "power_per_gpu",
                                                     "tpot_mean"}  # fmt: skip
