"""What-if sensitivity (P2) and the power-cap curve (E14)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tokenprobe.cli import app
from tokenprobe.cost import Workload, make_deployment
from tokenprobe.errors import ConfigError
from tokenprobe.plan import RESOURCES, power_cap_curve, whatif

MODELS = ["llama-3.1-8b", "qwen3-30b-a3b", "llama-3.1-70b"]


@settings(max_examples=12, deadline=None)
@given(
    model=st.sampled_from(MODELS),
    isl=st.integers(16, 8192),
    osl=st.integers(2, 1024),
    batch=st.integers(1, 64),
)
def test_sensitivity_signs(model: str, isl: int, osl: int, batch: int) -> None:
    tp = 4 if model == "llama-3.1-70b" else 1
    w = whatif(make_deployment(model, "h100-sxm", tp=tp), Workload(isl, osl, batch))
    # more bandwidth never slows decode; more compute never slows prefill
    assert w.gain("hbm_bandwidth", "tpot_s") >= -1e-12
    assert w.gain("compute", "ttft_s") >= -1e-12
    # more HBM never lowers the number of requests that fit
    assert w.gain("hbm_capacity", "max_concurrent_requests") >= 0
    for resource in RESOURCES:
        for metric in ("ttft_s", "tpot_s", "capacity_output_tokens_per_s"):
            assert w.gain(resource, metric) >= -1e-9, (resource, metric)


def test_decode_heavy_small_batch_wants_bandwidth_prefill_heavy_wants_compute() -> None:
    dep = make_deployment("llama-3.1-8b", "h100-sxm")
    decode = whatif(dep, Workload(128, 1024, 1), target="tpot_s")
    assert decode.best == "hbm_bandwidth"
    prefill = whatif(dep, Workload(8192, 2, 8), target="ttft_s")
    assert prefill.best == "compute"


def test_cpu_cores_only_matter_when_the_host_is_the_bound() -> None:
    dep = make_deployment("llama-3.1-70b", "h100-sxm", tp=4)
    w = whatif(dep, Workload(1024, 256, 8), target="served_requests_per_s")
    assert w.gain("cpu_cores", "served_requests_per_s") == 0


def test_power_cap_curve_is_monotone() -> None:
    dep = make_deployment("llama-3.1-8b", "a100-sxm-80gb", weight_dtype="fp16")
    rows = power_cap_curve(dep, Workload(2048, 256, 16))
    speeds = [r["output_tokens_per_s"] for r in rows]
    caps = [r["cap_w"] for r in rows]
    assert caps == sorted(caps)
    assert speeds == sorted(speeds)  # a higher cap is never slower
    assert rows[0]["ttft_s"] > rows[-1]["ttft_s"]  # compute-bound prefill feels the cap
    # memory-bound decode loses far less than the cap takes away
    assert rows[3]["tpot_s"] < 1.1 * rows[-1]["tpot_s"]


def test_bad_whatif_options() -> None:
    dep = make_deployment("llama-3.1-8b", "h100-sxm")
    with pytest.raises(ConfigError, match="uplift"):
        whatif(dep, Workload(10, 10), uplift=-1)
    with pytest.raises(ConfigError, match="target"):
        whatif(dep, Workload(10, 10), target="speed")


def test_whatif_cli_names_the_best_upgrade() -> None:
    args = ["whatif", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--output-tokens", "512"]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    assert "helps this workload most" in out.output
    js = CliRunner().invoke(app, [*args, "--json"])
    d = json.loads(js.stdout)
    assert d["best"] in RESOURCES
    assert len(d["power_cap"]) == 7
