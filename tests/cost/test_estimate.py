"""The estimate API and its JSON (`tokenprobe estimate --json` equals `estimate().to_dict()`)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import tokenprobe
from tokenprobe.cli import app
from tokenprobe.errors import ConfigError

REQUIRED = ["ttft_s", "tpot_s", "e2e_s", "output_tokens_per_s", "params_total", "params_active"]
NESTED = [
    ("memory", "weights_bytes_per_gpu"),
    ("memory", "kv_bytes_per_token"),
    ("memory", "max_concurrent_requests"),
    ("memory", "fits"),
    ("prefill", "bound"),
    ("decode", "bound"),
    ("energy", "joules_per_output_token"),
    ("energy", "kwh_per_million_output_tokens"),
]


def test_estimate_json_has_the_issue_keys_in_si_units() -> None:
    est = tokenprobe.estimate(
        model="llama-3.1-8b", gpu="h100-sxm", input_tokens=1024, output_tokens=256, batch=8
    )
    d = est.to_dict()
    for key in REQUIRED:
        assert isinstance(d[key], (int, float)) and d[key] > 0
    for outer, inner in NESTED:
        assert inner in d[outer]
    assert d["memory"]["fits"] is True
    assert d["prefill"]["bound"] == "compute" and d["decode"]["bound"] == "memory"
    assert d["e2e_s"] == pytest.approx(d["ttft_s"] + 255 * d["tpot_s"])
    # 8B bf16 on one H100 at batch 8: TPOT a few ms, TTFT of 8 x 1024 tokens tens of ms
    assert 4e-3 < d["tpot_s"] < 15e-3
    assert 20e-3 < d["ttft_s"] < 300e-3


def test_cli_json_equals_python_api() -> None:
    args = [
        "estimate",
        "--model",
        "qwen3-30b-a3b",
        "--gpu",
        "h100-sxm",
        "--input-tokens",
        "512",
        "--output-tokens",
        "128",
        "--batch",
        "4",
        "--weight-dtype",
        "fp8",
        "--json",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    api = tokenprobe.estimate(
        model="qwen3-30b-a3b",
        gpu="h100-sxm",
        input_tokens=512,
        output_tokens=128,
        batch=4,
        weight_dtype="fp8",
    ).to_dict()
    assert json.loads(result.stdout) == json.loads(json.dumps(api))


def test_tpot_grows_along_the_output_and_throughput_with_batch() -> None:
    small = tokenprobe.estimate(
        model="llama-3.1-8b", gpu="a100-sxm-80gb", input_tokens=2048, output_tokens=2048, batch=1
    )
    big = tokenprobe.estimate(
        model="llama-3.1-8b", gpu="a100-sxm-80gb", input_tokens=2048, output_tokens=2048, batch=32
    )
    curve = small.tpot_curve
    assert curve[-1][1] > curve[0][1]
    assert big.output_tokens_per_s > 10 * small.output_tokens_per_s
    assert small.compute_bound_batch is not None and small.compute_bound_batch > 32


def test_model_that_does_not_fit_is_an_answer_not_an_error() -> None:
    est = tokenprobe.estimate(
        model="llama-3.1-405b", gpu="h100-sxm", input_tokens=1024, output_tokens=128
    )
    mem = est.to_dict()["memory"]
    assert mem["fits"] is False
    assert mem["max_concurrent_requests"] == 0
    assert "exceed" in mem["reason"]
    assert mem["weights_bytes_per_gpu"] > 700e9


def test_tp_spreads_weights_and_adds_communication() -> None:
    one = tokenprobe.estimate(
        model="llama-3.1-70b", gpu="h100-sxm", tp=8, input_tokens=1024, output_tokens=64
    )
    d = one.to_dict()
    assert d["memory"]["weights_bytes_per_gpu"] == pytest.approx(70.6e9 * 2 / 8, rel=0.03)
    assert d["decode"]["shares"]["communication"] > 0
    pcie = tokenprobe.estimate(
        model="llama-3.1-70b", gpu="h100-pcie", tp=8, input_tokens=1024, output_tokens=64
    ).to_dict()
    assert pcie["decode"]["shares"]["communication"] > d["decode"]["shares"]["communication"]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"input_tokens": 0}, "input_tokens"),
        ({"output_tokens": -3}, "output_tokens"),
        ({"batch": 0}, "batch"),
        ({"tp": 3}, "tp"),
        ({"weight_dtype": "fp12"}, "weight_dtype"),
        ({"num_gpus": 4, "tp": 2}, "num_gpus"),
    ],
)
def test_bad_input_names_the_field(kwargs: dict[str, object], field: str) -> None:
    base: dict[str, object] = {"input_tokens": 128, "output_tokens": 16}
    with pytest.raises(ConfigError) as info:
        tokenprobe.estimate("llama-3.1-8b", "h100-sxm", **{**base, **kwargs})  # type: ignore[arg-type]
    assert info.value.field == field


def test_throughput_by_batch_rises_then_saturates_within_kv_limit() -> None:
    d = tokenprobe.estimate(
        model="llama-3.1-8b", gpu="h100-sxm", input_tokens=512, output_tokens=512
    ).to_dict()
    rows = d["decode"]["throughput_by_batch"]
    assert rows[0]["batch"] == 1
    assert rows[-1]["batch"] <= d["memory"]["max_concurrent_requests"]
    rates = [r["output_tokens_per_s"] for r in rows]
    assert rates == sorted(rates)  # batching shares the weight reads
    # per-sequence speed falls with batch: the step never gets shorter
    steps = [r["step_s"] for r in rows]
    assert steps == sorted(steps)


def test_facility_factor_scales_energy_and_prices_appear() -> None:
    base = tokenprobe.estimate("llama-3.1-8b", "h100-sxm", input_tokens=256, output_tokens=64)
    dc = tokenprobe.estimate(
        "llama-3.1-8b",
        "h100-sxm",
        input_tokens=256,
        output_tokens=64,
        pue=1.3,
        server_overhead_fraction=0.2,
        electricity_usd_per_kwh=0.1,
        gpu_hour_usd=2.0,
    )
    e0, e1 = base.energy(), dc.energy()
    assert e1["joules_per_output_token"] == pytest.approx(
        e0["joules_per_output_token"] * 1.3 * 1.2  # type: ignore[operator]
    )
    assert e1["usd_gpu_time_per_million_output_tokens"] is not None
    assert e0["usd_electricity_per_million_output_tokens"] is None


def test_a_batch_larger_than_the_kv_cache_does_not_fit() -> None:
    kw: dict[str, object] = {"tp": 2, "input_tokens": 2048, "output_tokens": 512}
    one = tokenprobe.estimate("llama-3.1-70b", "h100-sxm", batch=1, **kw)  # type: ignore[arg-type]
    cap = one.memory.max_concurrent_requests
    assert one.memory.fits and cap > 1
    over = tokenprobe.estimate("llama-3.1-70b", "h100-sxm", batch=cap + 1, **kw)  # type: ignore[arg-type]
    assert not over.memory.fits
    assert f"at most {cap} fit" in over.memory.reason


def test_attention_data_parallel_replicates_attention_and_exchanges_tokens() -> None:
    kw: dict[str, object] = {"tp": 8, "expert_parallel": True, "weight_dtype": "fp8"}
    ep = tokenprobe.estimate("qwen3-235b-a22b", "h100-sxm", input_tokens=1024,
                             output_tokens=64, batch=64, **kw)  # type: ignore[arg-type]  # fmt: skip
    dp = tokenprobe.estimate("qwen3-235b-a22b", "h100-sxm", input_tokens=1024, output_tokens=64,
                             batch=64, attention_dp=True, **kw)  # type: ignore[arg-type]  # fmt: skip
    e, d = ep.to_dict(), dp.to_dict()
    # every GPU holds all attention weights: more weight bytes per GPU than TP-split attention
    assert d["memory"]["weights_bytes_per_gpu"] > e["memory"]["weights_bytes_per_gpu"]
    comm = d["communication"]["decode_step"]
    assert comm["allreduces_per_step"] == 0 and comm["alltoalls_per_step"] == 2 * 94
    assert e["communication"]["decode_step"]["alltoalls_per_step"] == 0
    # a token's KV lives on one GPU: the deployment-wide bytes per token are the model's
    assert d["memory"]["kv_bytes_per_token"] == pytest.approx(94 * 2 * 4 * 128 * 1.0)
    with pytest.raises(ConfigError, match="expert_parallel"):
        tokenprobe.estimate("qwen3-235b-a22b", "h100-sxm", input_tokens=8, output_tokens=8,
                            tp=8, attention_dp=True)  # fmt: skip
