"""Fleets of data-parallel groups (sim/dpep_fleet.py, `simulate --replicas N --dp M`): one
group is the DP+EP simulator itself, and under load the simulator's invariants hold across the
groups (no request lost, each rank's KV pool bounded, clocks forward, a group's ranks stepping
together, the fleet's energy the groups' sum), the fleet router spreads the groups, a closed
loop's users stay in flight, and the CLI shows the groups and names a bad combination."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from typer.testing import CliRunner

from tokenprobe.cli import app
from tokenprobe.cost import make_deployment
from tokenprobe.metrics import timeline_energy_j
from tokenprobe.sim import DpEpResult, DpFleetResult, build_workload, simulate_fleet
from tokenprobe.sim.api import capacity_blocks, cost_step_fn
from tokenprobe.sim.dpep_fleet import run_dpep_fleet
from tokenprobe.sim.engines import rank_router_for, vllm_defaults
from tokenprobe.sim.stepcache import StepMemo
from tokenprobe.workload import Arrival, Workload, fixed

MODEL, GPU = "qwen3-30b-a3b", "h100-sxm"
DP2 = make_deployment(MODEL, GPU, tp=2, expert_parallel=True, attention_dp=True)
runner = CliRunner()


def _fleet(workload: Workload, groups: int, **kw: object) -> DpFleetResult:
    result = simulate_fleet(DP2, workload, replicas=groups, dp=2, **kw)  # type: ignore[arg-type]
    assert isinstance(result, DpFleetResult)
    return result


def test_one_group_is_the_dp_simulator() -> None:
    """A fleet of one group: request by request the times and the energy of `simulate --dp 2`
    (the same gang loop, stepped from the fleet's event loop)."""
    workload = build_workload(input_tokens=512, output_tokens=48, rate_per_s=30, num_requests=160)
    gang = simulate_fleet(DP2, workload, dp=2, router="least-loaded", seed=3)
    assert isinstance(gang, DpEpResult)
    config = vllm_defaults(DP2.gpu)
    fleet = run_dpep_fleet(
        workload, StepMemo(cost_step_fn(DP2)), DP2, config, capacity_blocks(DP2, config),
        groups=1, ranks=2, rank_router="least-loaded", seed=3, padded=True,
        frontend_s=DP2.efficiency.request_overhead_s,
    )  # fmt: skip
    a = {r.request_id: (r.first_token_s, r.finish_s) for r in gang.records}
    b = {r.request_id: (r.first_token_s, r.finish_s) for r in fleet.records}
    assert a.keys() == b.keys() and len(a) == 160
    for rid, times in a.items():
        assert b[rid] == pytest.approx(times, rel=1e-9), rid
    total = fleet.to_dict()["energy"]["total_j"]
    assert total == pytest.approx(gang.to_dict()["energy"]["total_j"], rel=1e-9)


@pytest.mark.parametrize("router", ["round-robin", "least-loaded", "prefix-aware"])
def test_under_load_nothing_is_lost_and_each_group_steps_together(router: str) -> None:
    workload = build_workload(input_tokens=768, output_tokens=64, rate_per_s=60, num_requests=300)
    result = _fleet(workload, 3, router=router, seed=5)
    records = result.records
    assert len({r.request_id for r in records}) == 300 and all(r.ok for r in records)
    for r in records:  # each request's clock runs forward
        assert r.sent_s >= r.scheduled_s - 1e-12
        assert r.first_token_s is not None and r.finish_s is not None
        assert r.sent_s <= r.first_token_s <= r.finish_s
    data = result.to_dict()
    groups = data["dp_groups"]["per_group"]
    assert len(data["per_replica"]) == 6 and len(groups) == 3  # 3 groups x 2 ranks
    assert sum(g["completed"] for g in groups) == 300
    for group in result.groups:
        starts = []
        for part in group.fleet.replicas:
            assert part.pool.peak_used_blocks <= part.pool.capacity_blocks
            times = [row[0] for row in part.engine.timeline.rows]
            assert times == sorted(times)  # each rank's clock only moves forward
            idle = float(part.engine.timeline.rows[0][4])
            starts.append({row[0] for row in part.engine.timeline.rows if row[4] > idle})
        assert starts[0] == starts[1]  # a group's two ranks start every step together
    parts = sum(g["energy_j"] for g in groups)
    run = result.run()
    assert timeline_energy_j(run.timeline, run.duration_s or 0.0) == pytest.approx(
        data["energy"]["total_j"], rel=1e-6
    )
    # the groups' own energies leave out the idle tail of a group done before the fleet
    assert parts <= data["energy"]["total_j"] * (1 + 1e-9)
    assert data["config"]["num_gpus"] == 6 and data["config"]["replicas"] == 3


def test_round_robin_gives_each_group_its_share() -> None:
    """Round robin over 4 groups sends requests 0, 4, 8, ... to group 0: 200 requests, 50 each;
    within a group vLLM's dispatch balances the ranks by their outstanding requests."""
    workload = build_workload(input_tokens=256, output_tokens=16, rate_per_s=40, num_requests=200)
    data = _fleet(workload, 4, router="round-robin").to_dict()
    assert [g["completed"] for g in data["dp_groups"]["per_group"]] == [50] * 4
    assert data["dp_groups"]["requests_max_over_mean"] == pytest.approx(1.0)
    assert data["dp_groups"]["rank_router"] == "least-loaded"
    assert rank_router_for("sglang") == "round-robin" and rank_router_for("vllm") == "least-loaded"


def test_a_closed_loop_keeps_its_users_in_flight_across_the_groups() -> None:
    """Twelve users over 3 groups: every request completes and at no instant are more than
    twelve between being sent and finishing (a finish on any rank releases the next one)."""
    workload = Workload(
        Arrival("closed", concurrency=12),
        fixed(384, "input_tokens"),
        fixed(24, "output_tokens"),
        num_requests=120,
    )
    records = _fleet(workload, 3, router="least-loaded").records
    assert len(records) == 120 and all(r.ok for r in records)
    events = Counter[float]()
    for r in records:
        assert r.finish_s is not None
        events[r.sent_s] += 1
        events[r.finish_s] -= 1
    in_flight = 0
    for t in sorted(events):  # finishes at an instant before the sends they release
        in_flight += events[t]
        assert in_flight <= 12


def test_cli_shows_the_groups_and_names_a_bad_combination() -> None:
    base = ["simulate", "--model", MODEL, "--gpu", GPU, "--input-tokens", "256"]
    base += ["--output-tokens", "16", "--rate", "20", "--num-requests", "60"]
    base += ["--dp", "2", "--enable-expert-parallel", "--replicas", "2"]
    env = {"COLUMNS": "200"}
    ok = runner.invoke(app, base, env=env)
    assert ok.exit_code == 0, ok.output
    assert "2 DP groups of 2 attention ranks" in ok.output
    data = json.loads(runner.invoke(app, [*base, "--json"], env=env).output)
    assert data["completed"] == 60 and data["dp_groups"]["groups"] == 2
    bad = runner.invoke(app, [*base, "--disaggregate", "1p1d"], env=env)
    assert bad.exit_code == 2 and "dp" in bad.output and "Traceback" not in bad.output


def test_a_dp_fleet_frees_its_ranks_state_and_restores_the_collector() -> None:
    """Like a replica fleet (cluster.fleet_parts), every rank drops its per-request state once
    its records are built, and the garbage collector, off for the run, is on again after it."""
    import gc

    workload = build_workload(input_tokens=256, output_tokens=16, rate_per_s=40, num_requests=60)
    assert gc.isenabled()
    result = _fleet(workload, 2, seed=2)
    assert gc.isenabled()
    ranks = result.fleet.replicas
    assert len(ranks) == 4 and sum(len(part.records) for part in ranks) == 60
    assert all(part.engine.seqs == [] for part in ranks)
    assert sorted({r.extra["replica"] for r in result.records}) == [0.0, 1.0, 2.0, 3.0]
