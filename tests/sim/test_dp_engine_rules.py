"""What each engine does with data-parallel ranks, read off its preset (sim/engines.py): the MoE
exchange it runs when no flag names one (vLLM's by release, cost.VLLM_DEFAULT_ALL2ALL), whether
it pads the ranks, how it dispatches to them; `simulate`/`estimate` without a back-end flag
take the engine's, and a DP fleet's groups report rates that add up to the fleet's."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from tokenprobe.calibrate.serving import _serve
from tokenprobe.cli import app
from tokenprobe.cost import (
    DEFAULT_EP_COMM,
    EpComm,
    ep_comm_from_flags,
    make_deployment,
    vllm_default_all2all,
)
from tokenprobe.sim import (
    DpFleetResult,
    SchedulerConfig,
    build_workload,
    engine_ep_comm,
    pads_ranks,
    rank_router_for,
    simulate_fleet,
)
from tokenprobe.workload import Arrival, RequestSpec, Workload

runner = CliRunner()
ENV = {"COLUMNS": "200"}
MODEL, GPU = "qwen3-30b-a3b", "h100-sxm"
ALLGATHER = EpComm(backend="allgather")


def test_vllm_runs_its_releases_default_exchange_and_the_others_theirs() -> None:
    # vllm/envs.py VLLM_ALL2ALL_BACKEND: 'naive' in 0.9.0.1 and 0.10.1.1, then
    # "allgather_reducescatter" from 0.11.0; an unreadable release is today's
    assert vllm_default_all2all("0.9.0.1") == vllm_default_all2all("0.10.1.1") == "naive"
    assert (
        vllm_default_all2all("0.11.0")
        == vllm_default_all2all("v0.12.0")
        == ("allgather_reducescatter")
    )
    assert (
        vllm_default_all2all("") == vllm_default_all2all("nightly") == ("allgather_reducescatter")
    )
    # both gather every token to every EP GPU; the era stands for 0.7.3 (naive)
    for name, version in (("vllm", "0.10.1"), ("vLLM", "0.11.1 (image tag)"), ("vllm", None),
                          ("vllm-openai", None), ("vllm-2025h1", None)):  # fmt: skip
        assert engine_ep_comm(name, version) == ALLGATHER, (name, version)
    for other in ("sglang", "sglang-2025h1", "tensorrt-llm", None, "my-fork"):
        assert engine_ep_comm(other) == DEFAULT_EP_COMM, other
    # a flag still names the back end; without one the engine's runs
    vllm = engine_ep_comm("vllm")
    assert ep_comm_from_flags("vllm serve m --enable-expert-parallel", vllm) == ALLGATHER
    low = ep_comm_from_flags("vllm serve m --all2all-backend deepep_low_latency", vllm)
    assert low == EpComm("deepep", "low-latency")
    assert ep_comm_from_flags("python -m sglang.launch_server --enable-dp-attention") == (
        DEFAULT_EP_COMM
    )


def test_the_dp_rules_live_on_the_presets() -> None:
    # vLLM pads (its V0 era does not) and balances by load; SGLang and its era round-robin
    assert pads_ranks("vllm") and not pads_ranks("vllm-2025h1")
    assert not pads_ranks("sglang") and not pads_ranks("tensorrt-llm")
    assert rank_router_for("vllm") == rank_router_for("tensorrt-llm") == "least-loaded"
    assert rank_router_for("sglang-2025h1") == "round-robin"


def _decode_alltoall_bytes(flags: list[str]) -> float:
    out = runner.invoke(
        app,
        ["estimate", "--model", MODEL, "--gpu", GPU, "--tp", "2", "--expert-parallel",
         "--attention-dp", "--json", *flags],
        env=ENV,
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    return float(json.loads(out.output)["communication"]["decode_step"]["alltoall_bytes"])


def test_estimate_prices_the_engines_exchange_without_a_flag() -> None:
    """Qwen3-30B-A3B (hidden 2048, top-8 of 128 experts) on 2 attention-DP GPUs, one decoding
    sequence: each GPU holds half a token. Bytes per dispatch + combine pair, 16-bit:
    vLLM's allgather sends each token to the 1 other GPU: 0.5 x 2048 x 2 B x 1 = 2,048 B;
    the plain all-to-all sends k (n - d... inside one domain: k (d - 1)/n = 8 x 1/2 = 4) copies:
    0.5 x 2048 x 2 x 4 = 8,192 B (cost/epexchange.py copies_per_token)."""
    assert _decode_alltoall_bytes(["--engine", "vllm"]) == pytest.approx(2048)
    assert _decode_alltoall_bytes(["--engine", "sglang"]) == pytest.approx(8192)
    assert _decode_alltoall_bytes([]) == pytest.approx(8192)  # no engine: the plain all-to-all
    named = ["--engine", "vllm", "--moe-a2a-backend", "all-to-all"]
    assert _decode_alltoall_bytes(named) == pytest.approx(8192)  # the flag wins


def _simulated(flags: list[str]) -> dict[str, Any]:
    out = runner.invoke(
        app,
        ["simulate", "--model", MODEL, "--gpu", GPU, "--input-tokens", "128", "--output-tokens",
         "8", "--rate", "10", "--num-requests", "8", "--dp", "2", "--enable-expert-parallel",
         "--json", *flags],
        env=ENV,
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    data: dict[str, Any] = json.loads(out.output)
    return data


def test_simulate_runs_the_engines_exchange_and_dispatch_without_a_flag() -> None:
    vllm = _simulated([])  # vLLM, the default engine: its allgather, its load-balancing dispatch
    assert vllm["data_parallel"]["ep_backend"] == "allgather"
    assert vllm["router"] == "least-loaded"
    old = _simulated(["--engine", "vllm", "--engine-version", "0.10.1"])
    assert old["data_parallel"]["ep_backend"] == "allgather"
    sglang = _simulated(["--engine", "sglang"])
    assert sglang["data_parallel"]["ep_backend"] == "all-to-all"
    assert sglang["router"] == "round-robin"
    named = _simulated(["--moe-a2a-backend", "deepep", "--router", "round-robin"])
    assert named["data_parallel"]["ep_backend"].startswith("deepep")
    assert named["router"] == "round-robin"


def test_a_dp_fleets_groups_add_up_to_the_fleet() -> None:
    """Each group's output tokens/s is over the fleet's span: three groups that end at
    different instants still sum to the fleet's rate (their own spans would overstate it)."""
    dep = make_deployment(MODEL, GPU, tp=2, expert_parallel=True, attention_dp=True)
    workload = build_workload(input_tokens=256, output_tokens=32, rate_per_s=40, num_requests=90)
    result = simulate_fleet(dep, workload, replicas=3, dp=2, router="least-loaded", seed=4)
    assert isinstance(result, DpFleetResult)
    data = result.to_dict()
    groups = data["dp_groups"]["per_group"]
    total = sum(g["output_tokens_per_s"] for g in groups)
    assert total == pytest.approx(data["output_tokens_per_s"], rel=1e-9)
    own = [g.to_dict()["output_tokens_per_s"] for g in result.groups]
    for group, alone in zip(groups, own, strict=True):  # over its own (shorter) span: no less
        assert group["output_tokens_per_s"] <= alone * (1 + 1e-12)


def test_the_calibration_replay_pads_a_dp_row_as_its_engine() -> None:
    """calibrate.serving's DP branch passes the row's engine (validate_dp_rows.py's call): a
    vLLM row pads every rank to the largest, so a lone 1,024-token prompt on one of 4 ranks
    makes the experts compute 4 x 1,024 rows (cost/dpep.py) and its first token comes later
    than on an engine that dispatches the same way without padding (TensorRT-LLM's preset)."""
    dep = make_deployment(MODEL, GPU, tp=4, expert_parallel=True, attention_dp=True)
    one = (RequestSpec("r0", 0.0, 1024, 4),)
    workload = Workload(Arrival("trace", trace=one), name="trace")
    config = SchedulerConfig()
    vllm = _serve(dep, workload, config, engine="vllm")
    unpadded = _serve(dep, workload, config, engine="tensorrt-llm")
    assert vllm["ttft_median"] > unpadded["ttft_median"]
    padded = simulate_fleet(dep, workload, dp=4, router=rank_router_for("vllm"), config=config,
                            engine="vllm")  # fmt: skip
    assert vllm["output_throughput"] == padded.to_dict()["output_tokens_per_s"]
