"""TensorRT-LLM 0.17's PyTorch back end (`tensorrt-llm-2025h1`): its selection by version, its
scheduler defaults, the mechanisms its profile carries (benchmarks/fit_trtllm_era.py) and its
fitted record as validate.py prints it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tokenprobe.calibrate import Row, load_csv, load_profile, observe, profile_name_for, split
from tokenprobe.calibrate.fit import summarize
from tokenprobe.calibrate.observations import engine_name
from tokenprobe.cli import app
from tokenprobe.cost import BatchShape, Deployment, step_cost
from tokenprobe.hardware import get_gpu
from tokenprobe.sim import engine_defaults, engine_preset

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "deepseek_2025h1.csv"
ERA = "tensorrt-llm-2025h1"
# fit_profiles.PROFILES[ERA]["holdout"] (benchmarks/fit_trtllm_era.HOLDOUT): every load but 4 users
HOLDOUT = [f"label:* c{c}" for c in (8, 16, 32, 64, 128)]


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("0.17.post1.dev (PyTorch backend, commit 9b931c0f)", ERA),
        ("0.17.0", ERA),
        ("v1.0.0", "tensorrt-llm"),
        ("1.2.0rc5", "tensorrt-llm"),
        ("0.14.0", "tensorrt-llm"),
        ("0.9.0", "tensorrt-llm"),
    ],
)
def test_versions_name_their_era(version: str, expected: str) -> None:
    assert engine_name("TensorRT-LLM", version) == expected


def test_the_era_schedules_mla_prompts_whole_without_block_reuse() -> None:
    """0.17's executor turns chunked context and block reuse off for MLA models; the rest is
    trtllm-serve's (2048 sequences, 8192 tokens, 0.9 of the free memory, no eviction)."""
    h200 = get_gpu("h200")
    era, late = engine_defaults(ERA, h200, 8), engine_defaults("tensorrt-llm", h200, 8)
    assert (era.chunked_prefill, era.prefix_caching) == (False, False)
    assert replace(era, chunked_prefill=True, prefix_caching=True) == late
    assert engine_defaults(ERA, h200, 8, max_num_seqs=512).max_num_seqs == 512
    assert engine_preset(ERA).name == "tensorrt-llm"
    assert profile_name_for(ERA, "nvidia") == ERA


def test_the_profile_changes_only_the_two_mechanisms() -> None:
    p, base = load_profile(ERA), load_profile("tensorrt-llm")
    assert (p.engine, p.vendor, p.power_of) == ("tensorrt-llm", "nvidia", "tensorrt-llm")
    assert set(p.parameters) == {"kernel_overhead_s", "moe_compute"}
    assert p.power == base.power
    for name in type(p.efficiency).__dataclass_fields__:
        if name not in p.parameters:
            assert getattr(p.efficiency, name) == getattr(base.efficiency, name), name
    # Python-launched kernels cost several times a C++/graph launch; the experts' GEMMs slower
    assert p.efficiency.kernel_overhead_s > 5 * base.efficiency.kernel_overhead_s
    assert p.efficiency.moe_compute < base.efficiency.moe_compute


def _deployment() -> tuple[list[Row], Deployment]:
    rows = [r for r in load_csv(DATA).rows if r.engine == ERA]
    p = load_profile(ERA)
    return rows, replace(rows[0].deployment, efficiency=p.efficiency, power=p.power)


def test_launch_time_is_counted_per_kernel_and_dominates_small_decode_steps() -> None:
    """DeepSeek-V3/R1, 61 layers: 3 dense layers of 10 counted kernels (qkv 1, attention 3,
    o_proj 1, mlp 3, elementwise 2) and 58 MoE layers of 17 (the same less the mlp, plus shared
    experts 3, router 2, experts 5), embedding 1, lm head 4: 30 + 986 + 5 = 1021 kernels. The
    step's overhead is 1021 launches + the step's host time + 4 sequences' host time."""
    _, dep = _deployment()
    eff = dep.efficiency
    decode = BatchShape(decode_seqs=4, decode_context_tokens=4 * 3600)
    cost = step_cost(dep, decode)
    host = eff.step_overhead_s + 4 * eff.seq_overhead_s
    assert cost.overhead_s == pytest.approx(1021 * eff.kernel_overhead_s + host, rel=1e-9)
    assert cost.overhead_s > 0.8 * cost.time_s  # launch-bound: dstack's TPOT is flat in users
    # ... so 16 users cost little more (measured 57.6 vs 55.1 ms); a slow expert HBM rate that
    # gave the same 4-user step would have grown with the experts 16 users touch
    wide = BatchShape(decode_seqs=16, decode_context_tokens=16 * 3600)
    assert step_cost(dep, wide).time_s / cost.time_s < 1.2


def test_the_derivation_reproduces_the_4_user_run() -> None:
    """The two parameters were solved from the 4-user run (fit_trtllm_era.derive): the decode
    step of 4 sequences at 3,200 + 800/2 tokens of context is its median TPOT, 55.115 ms; the
    request overhead + the wave's prefill of 4 x 3,200 tokens in one step is its median TTFT,
    1.0385 s (dstack's online_results.csv)."""
    _, dep = _deployment()
    decode = BatchShape(decode_seqs=4, decode_context_tokens=4 * 3600)
    prefill = BatchShape(
        prefill_tokens=4 * 3200, prefill_attn_pairs=4 * 3200 * 3201 / 2, prefill_seqs=4
    )
    assert step_cost(dep, decode).time_s == pytest.approx(0.055115, rel=1e-3)
    ttft = dep.efficiency.request_overhead_s + step_cost(dep, prefill).time_s
    assert ttft == pytest.approx(1.0385, rel=1e-3)


def _estimate(*extra: str) -> dict[str, float]:
    args = ["estimate", "--model", "deepseek-r1", "--gpu", "h200", "--tp", "8"]
    args += ["--weight-dtype", "fp8", "--input-tokens", "3200", "--output-tokens", "800"]
    result = CliRunner().invoke(app, [*args, "--batch", "4", "--json", *extra])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    return {"tpot_s": float(out["tpot_s"]), "ttft_s": float(out["ttft_s"])}


def test_estimate_with_the_era_engine_prices_with_its_profile() -> None:
    """`--engine tensorrt-llm-2025h1` is `--profile tensorrt-llm-2025h1`; at 4 sequences its
    decode step is the 4-user run's (55.1 ms measured), several times the C++ back end's."""
    era = _estimate("--engine", ERA)
    assert era == _estimate("--profile", ERA)
    assert era["tpot_s"] > 4 * _estimate("--engine", "tensorrt-llm")["tpot_s"]


@pytest.mark.slow
def test_fitted_record_is_what_the_rows_give() -> None:
    """The profile's fitted record (the 4-user run, simulated as validate.py replays it) and the
    split the held-out records were computed on."""
    rows, _ = _deployment()
    p = load_profile(ERA)
    fitted, held = split(rows, HOLDOUT)
    assert [r.label.split()[-1] for r in fitted] == ["c4"]
    assert len(held) == 8
    got = {(g.source, g.metric): g for g in summarize(observe(fitted, p.efficiency, p.power))}
    records = [e for e in p.errors if e.set == "fitted"]
    assert {(e.source, e.metric) for e in records} == set(got)
    for e in records:
        g = got[(e.source, e.metric)]
        assert g.rows == e.rows
        assert 100 * g.mdape == pytest.approx(e.mdape_after_pct, abs=0.05), e.metric
    held_records = {(e.metric, e.rows) for e in p.errors if e.set == "held_out"}
    assert held_records == {(m, 8) for m in ("output_throughput", "tpot_median", "ttft_median")}
