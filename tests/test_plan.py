"""Capacity planning (P1): feasible plans really meet the SLOs; bad input is one message."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from typer.testing import CliRunner

from tokenprobe.cli import app
from tokenprobe.cost import make_deployment
from tokenprobe.errors import ConfigError
from tokenprobe.plan import Candidate, PlanRequest, candidates, fixed_lengths, plan
from tokenprobe.sim import MAX_QUEUE_S, meets_slos, simulate_fleet
from tokenprobe.sim.base import SchedulerConfig
from tokenprobe.workload import Arrival, Workload

IN, OUT = fixed_lengths(256, 128)


def _req(gpus: list[str], rate: float = 8.0, tpot: float = 0.04, **kw: object) -> PlanRequest:
    return PlanRequest(
        "llama-3.1-8b", rate, IN, OUT, 1.5, tpot,
        candidates(gpus, ["bf16"], [1], [256]), num_requests=150, **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def _fleet(req: PlanRequest, c: Candidate, replicas: int) -> dict[str, Any]:
    """The fleet plan judges, simulated again here: `replicas` behind round-robin, the rate."""
    dep = make_deployment(req.model, c.gpu, tp=c.tp, weight_dtype=c.weight_dtype)
    wl = Workload(Arrival("poisson", rate_per_s=req.rate_per_s), IN, OUT, num_requests=150)
    cfg = SchedulerConfig(max_num_seqs=c.max_num_seqs, prefix_caching=True)
    return simulate_fleet(dep, wl, replicas=replicas, config=cfg, seed=req.seed).to_dict()


def test_a_planned_fleet_meets_the_slos_when_simulated_and_one_replica_fewer_does_not() -> None:
    req = _req(["h100-sxm", "l40s"])
    result = plan(req, workers=1)
    assert result.feasible
    for o in result.feasible:
        c = o.candidate
        check = _fleet(req, c, o.replicas)
        assert check["ttft_s"]["p90"] <= req.slo_ttft_p90_s  # type: ignore[operator]
        assert check["tpot_s"]["p90"] <= req.slo_tpot_p90_s  # type: ignore[operator]
        assert o.gpus == o.replicas * c.tp
        if o.replicas > 1:
            fewer = _fleet(req, c, o.replicas - 1)
            assert not meets_slos(fewer, MAX_QUEUE_S, req.slo_ttft_p90_s, req.slo_tpot_p90_s)
        # the first guess, one replica's bisected rate times a count, is within one replica
        assert abs(o.replicas - math.ceil(req.rate_per_s / o.rate_per_replica)) <= 1


def test_more_gpu_types_never_raise_the_cost_floor() -> None:
    prices = {"h100-sxm": 3.0, "l40s": 1.2, "a100-sxm-80gb": 1.8}
    few = plan(_req(["h100-sxm"], prices_per_gpu_hour=prices), workers=1)
    more = plan(_req(["h100-sxm", "l40s", "a100-sxm-80gb"], prices_per_gpu_hour=prices), workers=1)
    assert few.feasible and more.feasible
    assert more.feasible[0].cost_per_hour <= few.feasible[0].cost_per_hour  # type: ignore[operator]


def test_impossible_slos_name_the_nearest_miss() -> None:
    result = plan(_req(["h100-sxm", "l4"], tpot=0.001), workers=1)
    d = result.to_dict()
    assert d["feasible"] == [] and d["message"] == "no deployment meets these SLOs"
    assert d["nearest_miss"]["candidate"].startswith("h100-sxm")  # the faster GPU misses least
    assert d["nearest_miss"]["miss"] > 1


def test_contradictory_or_missing_options() -> None:
    with pytest.raises(ConfigError, match="slo"):
        PlanRequest("llama-3.1-8b", 1.0, IN, OUT, None, None, candidates(["l4"], ["bf16"], [1],
                                                                      [256]))  # fmt: skip
    with pytest.raises(ConfigError, match="rate"):
        _req(["l4"], rate=0)
    with pytest.raises(ConfigError, match="price"):
        _req(["l4", "h100-sxm"], prices_per_gpu_hour={"l4": 1.0})


def test_plan_cli_json_and_bad_input() -> None:
    runner = CliRunner()
    base = ["plan", "--model", "llama-3.1-8b", "--rate", "4", "--slo-tpot-s", "0.05",
            "--gpu", "h100-sxm", "--weight-dtype", "bf16", "--tp", "1", "--num-requests", "100",
            "--workers", "1"]  # fmt: skip
    out = runner.invoke(app, [*base, "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    assert d["best"]["gpus"] == 1
    bad = runner.invoke(app, [*base[:-2], "--tp", "x"])
    assert bad.exit_code == 2 and "tp" in bad.output and "Traceback" not in bad.output


def test_a_slower_engine_profile_lowers_the_rate_a_replica_sustains() -> None:
    # `plan --profile` passes a profile's parameters: a slower engine serves fewer requests/s
    import dataclasses

    from tokenprobe.cost import DEFAULT_EFFICIENCY

    slow = dataclasses.replace(DEFAULT_EFFICIENCY, memory=0.4, compute_decode=0.3)
    fast_rate = plan(_req(["h100-sxm"]), workers=1).feasible[0].rate_per_replica
    slow_plan = plan(_req(["h100-sxm"], efficiency=slow), workers=1)
    assert slow_plan.feasible[0].rate_per_replica < fast_rate
    cli = CliRunner().invoke(
        app,
        ["plan", "--model", "llama-3.1-8b", "--rate", "4", "--slo-tpot-p90", "0.05",
         "--gpus", "h100-sxm", "--dtypes", "bf16", "--tp", "1", "--num-requests", "60",
         "--workers", "1", "--profile", "no-such-engine", "--json"],
    )  # fmt: skip
    assert cli.exit_code != 0 and "no-such-engine" in cli.output


def test_power_caps_are_a_searched_dimension() -> None:
    from tokenprobe.hardware import get_gpu

    cands = candidates(["h100-sxm"], ["bf16"], [1], [256], [0.7, 1.0])
    assert [c.label for c in cands] == ["h100-sxm bf16 tp1 seqs256 pl70%",
                                        "h100-sxm bf16 tp1 seqs256"]  # fmt: skip
    req = PlanRequest("llama-3.1-8b", 1.0, *fixed_lengths(512, 128), None, 0.05, cands)
    capped, uncapped = (req.deployment(c) for c in cands)
    assert capped.power_limit_w == pytest.approx(0.7 * get_gpu("h100-sxm").tdp_w)
    assert uncapped.power_limit_w is None


@pytest.mark.parametrize("fractions", ["0", "1.5", "nan", "x"])
def test_a_power_cap_outside_a_tenth_to_one_is_refused(fractions: str) -> None:
    args = ["plan", "--model", "llama-3.1-8b", "--rate", "1", "--slo-tpot-s", "0.05",
            "--gpu", "h100-sxm", "--power-limit-fractions", fractions]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "power_limit_fractions" in result.output, result.output
