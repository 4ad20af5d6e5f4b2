"""`plan --dp`: attention-DP ranks whose MoE layers share their experts (issue 17 item 6), judged
with the ranks stepping together (sim/dpep.py), with the EP back end searched beside them."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tokenprobe.cli import app
from tokenprobe.errors import ConfigError
from tokenprobe.plan import PlanRequest, candidates, ep_layouts, fixed_lengths, plan
from tokenprobe.sim import SchedulerConfig, max_rate_per_s, simulate_fleet
from tokenprobe.workload import Arrival, Workload

MODEL, GPU = "qwen3-30b-a3b", "h100-sxm"  # a small MoE: 128 experts, 8 routed per token


def test_layouts_plain_tp_once_and_each_back_end_with_dp() -> None:
    layouts = ep_layouts([1, 2, 1], ["all-to-all", "deepep"], [False, True])
    assert layouts[0] == (1, "all-to-all", False)  # no exchange between ranks: once
    assert len(layouts) == 1 + 2 * 2
    with pytest.raises(ConfigError) as err:
        ep_layouts([2], ["nccl"])
    assert err.value.field == "ep_backend"
    with pytest.raises(ConfigError) as err:
        ep_layouts([0])
    assert err.value.field == "dp"


def test_dp_ranks_are_not_searched_with_drafts_or_disaggregated() -> None:
    cands = candidates(
        [GPU], ["bf16"], [1], [256], modes=["agg", "1p1d"], specs=[None, "mtp:1"],
        layouts=ep_layouts([1, 2]),
    )  # fmt: skip
    dp = [c for c in cands if c.dp > 1]
    assert len(dp) == 1 and dp[0].disaggregate is None and dp[0].spec_decode is None
    with pytest.raises(ConfigError) as err:
        candidates([GPU], ["bf16"], [1], [256], specs=["mtp:1"], layouts=ep_layouts([2]))
    assert err.value.field == "dp"


def test_a_dp_candidate_is_judged_by_its_ranks_stepping_together() -> None:
    """The dp2 candidate's sustained rate is the DP simulation's bisection, and its p90s are
    those of the two ranks simulated at the plan's rate, padded and dispatched as the plan's
    engine (vLLM) does: the plan took the DP path, not one replica of two GPUs."""
    n, rate = 60, 4.0
    cands = candidates([GPU], ["bf16"], [1], [256], layouts=ep_layouts([1, 2]))
    req = PlanRequest(MODEL, rate, *fixed_lengths(1000, 100), 2.0, 0.05, cands, num_requests=n)
    p = plan(req, workers=1)
    by_label = {o.candidate.label: o for o in p.outcomes}
    o = by_label["h100-sxm bf16 tp1 seqs256 dp2-ep2"]
    assert o.feasible and o.gpus == 2 and o.replicas == 1
    dep = req.deployment(o.candidate)
    assert dep.attention_dp and dep.expert_parallel and dep.num_gpus == 2
    cfg = SchedulerConfig(max_num_seqs=256, prefix_caching=True)
    cap = max_rate_per_s(
        dep, *fixed_lengths(1000, 100), slo_ttft_s=2.0, slo_tpot_s=0.05, config=cfg,
        num_requests=n, dp=2, engine="vllm",
    )  # fmt: skip
    assert req.engine == "vllm" and o.rate_per_replica == cap.max_rate_per_s
    wl = Workload(Arrival("poisson", rate_per_s=rate), *fixed_lengths(1000, 100), num_requests=n)
    d = simulate_fleet(dep, wl, dp=2, router="least-loaded", config=cfg, engine="vllm").to_dict()
    assert d["data_parallel"]["padded_to_largest_rank"] is True
    assert o.tpot_p90_s == d["tpot_s"]["p90"] and o.ttft_p90_s == d["ttft_s"]["p90"]
    assert o.to_dict()["dp"] == 2 and o.to_dict()["ep_backend"] == "all-to-all"


@pytest.mark.parametrize(
    ("flag", "value", "field"),
    [("--moe-a2a-backend", "nccl", "ep_backend"), ("--two-batch-overlap", "maybe",
     "two_batch_overlap"), ("--dp", "x", "dp")],
)  # fmt: skip
def test_bad_dp_flags_exit_2_naming_the_field(flag: str, value: str, field: str) -> None:
    args = ["plan", "--model", MODEL, "--gpu", GPU, "--rate", "1", "--slo-tpot-s", "0.05",
            "--tp", "1", "--dp", "2", flag, value]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert field in result.output.replace("\n", "")


def test_a_fleet_of_dp_groups_is_simulated_as_groups() -> None:
    """A rate of 1.5 x what one dp2 group sustains: n0 = ceil(1.5) = 2 groups (fleet.py step 2),
    2 x 2 x 1 = 4 GPUs; round robin sends each group half the rate, 0.75 x what it sustains, so
    the fleet of two meets the SLOs and the plan stops there (no shared prefix: one group
    fewer would carry 1.5 x). The fleet judged is the DP-fleet simulator's two groups, each
    padded as vLLM pads (sim/dpep_fleet.py), not one group at half the rate."""
    n = 60
    lengths = fixed_lengths(1000, 100)
    cands = candidates([GPU], ["bf16"], [1], [256], layouts=ep_layouts([2]))
    probe = PlanRequest(MODEL, 1.0, *lengths, 2.0, 0.05, cands, num_requests=n)
    dep = probe.deployment(cands[0])
    cfg = SchedulerConfig(max_num_seqs=256, prefix_caching=True)
    cap = max_rate_per_s(
        dep, *lengths, slo_ttft_s=2.0, slo_tpot_s=0.05, config=cfg, num_requests=n, dp=2,
        engine="vllm",
    ).max_rate_per_s  # fmt: skip
    rate = 1.5 * cap
    req = PlanRequest(MODEL, rate, *lengths, 2.0, 0.05, cands, num_requests=n)
    (o,) = plan(req, workers=1).outcomes
    assert o.feasible and o.replicas == 2 and o.gpus == 4, o.reason
    assert "not simulated whole" not in o.reason
    wl = Workload(Arrival("poisson", rate_per_s=rate), *lengths, num_requests=2 * n)
    d = simulate_fleet(dep, wl, replicas=2, dp=2, config=cfg, engine="vllm").to_dict()
    assert d["dp_groups"]["groups"] == 2 and d["config"]["dp_padding"] is True
    assert o.tpot_p90_s == d["tpot_s"]["p90"] and o.ttft_p90_s == d["ttft_s"]["p90"]
    assert o.imbalance == d["dp_groups"]["requests_max_over_mean"]
    assert o.output_tokens_per_s_per_gpu == pytest.approx(d["output_tokens_per_s"] / 4)


def test_plan_searches_the_engines_exchange_unless_told() -> None:
    """Without --moe-a2a-backend a DP candidate runs the plan's engine's exchange (vLLM's
    allgather, sim.engine_ep_comm); named, the named one."""
    base = ["plan", "--model", MODEL, "--gpu", GPU, "--rate", "1", "--slo-tpot-s", "0.05",
            "--tp", "1", "--dp", "2", "--input-tokens", "256", "--output-tokens", "16",
            "--num-requests", "20", "--workers", "1", "--json"]  # fmt: skip
    for flags, backend in (([], "allgather"), (["--moe-a2a-backend", "all-to-all"], "all-to-all")):
        result = CliRunner().invoke(app, [*base, *flags], env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        data = json.loads(result.output)
        assert data["feasible"] and data["best"]["ep_backend"] == backend, data["best"]
