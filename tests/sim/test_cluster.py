"""Data-parallel replicas behind a router (sim/cluster.py): the simulator's invariants hold for
the fleet, one replica is exactly the single-replica simulator, and the routers do what their
policies say on loads built so the outcome is known."""

from __future__ import annotations

import json
from dataclasses import astuple

import numpy as np
import pytest
from typer.testing import CliRunner

from tokenprobe.cli import app
from tokenprobe.cost import make_deployment
from tokenprobe.errors import ConfigError
from tokenprobe.metrics import timeline_energy_j
from tokenprobe.sim import (
    ClusterResult,
    SchedulerConfig,
    build_workload,
    simulate,
    simulate_fleet,
)
from tokenprobe.sim.engine import Engine
from tokenprobe.workload import Arrival, LengthDist, RequestSpec, Workload

DEP = make_deployment("llama-3.1-8b", "h100-sxm")
runner = CliRunner()


def _poisson(rate: float, n: int) -> Workload:
    return build_workload(input_tokens=512, output_tokens=64, rate_per_s=rate, num_requests=n)


def test_one_replica_is_the_single_replica_simulator(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fleet path (an engine opened empty, requests submitted as they arrive and advanced by
    `run_until`) gives every request the very record `simulate` (`Engine.run`) gives it, to the
    bit, and the same timeline: both drive one event loop (`Engine._advance`). Most of these
    requests reach a busy engine, whose `submit` applies them at once rather than through the
    heap (checked below), and that changes nothing. The fleet drops its per-request state once
    the records are built; the records stay whole."""
    workload = Workload(
        Arrival("poisson", rate_per_s=12.0),
        LengthDist("lognormal", mean=400.0, sigma=0.8, name="input_tokens"),
        LengthDist("lognormal", mean=120.0, sigma=0.8, name="output_tokens"),
        num_requests=400,
    )
    single = simulate(deployment=DEP, workload=workload, seed=3, trace_requests=100)
    queued: list[bool] = []  # what each submit answered (True: through the heap)
    submit = Engine.submit

    def counted(engine: Engine, spec: RequestSpec) -> bool:
        queued.append(submit(engine, spec))
        return queued[-1]

    monkeypatch.setattr(Engine, "submit", counted)
    fleet = simulate_fleet(DEP, workload, replicas=1, router="least-loaded", seed=3,
                           trace_requests=100)  # fmt: skip
    assert isinstance(fleet, ClusterResult)
    part = fleet.replicas[0]
    assert len(part.records) == len(single.records) == 400 and part.engine.seqs == []
    for a, b in zip(single.records, part.records, strict=True):
        assert b.extra.pop("replica") == 0.0
        assert astuple(a) == astuple(b), a.request_id
    assert sum(1 for r in part.records if r.token_times_s) == 100
    assert list(part.engine.timeline.rows) == list(single.engine.timeline.rows)
    assert part.engine.ledger == single.engine.ledger
    assert len(queued) == 400 and 0 < queued.count(True) < queued.count(False)  # both paths


@pytest.mark.parametrize("router", ["round-robin", "least-loaded", "prefix-aware"])
def test_the_fleet_loses_no_request_and_keeps_each_pool_bounded(router: str) -> None:
    workload = _poisson(60.0, 1200)
    result = simulate_fleet(DEP, workload, replicas=4, router=router, seed=1)
    ids = [r.request_id for r in result.records]
    assert len(ids) == len(set(ids)) == 1200 and all(r.ok for r in result.records)
    data = result.to_dict()
    assert sum(row["completed"] for row in data["per_replica"]) == data["completed"] == 1200
    for part in result.replicas:
        assert part.pool.peak_used_blocks <= part.pool.capacity_blocks
        times = [row[0] for row in part.engine.timeline.rows]
        assert times == sorted(times)  # each replica's clock only moves forward
    # the fleet timeline carries all the energy of the replicas
    run = result.run()
    energy = timeline_energy_j(run.timeline, run.duration_s or 0.0)
    assert energy == pytest.approx(data["energy"]["total_j"], rel=1e-6)
    assert data["config"]["replicas"] == 4 and data["config"]["num_gpus"] == 4


def test_round_robin_alternates_and_least_loaded_balances_the_work() -> None:
    """Long and short requests alternate (4,096/512 tokens, then 64/16), 4 per second, on 2
    replicas: round-robin sends every long one to replica 0 and every short one to replica 1
    (busy time very uneven, long prompts queue); least-loaded counts outstanding requests, so
    the replica still busy with a long one gets the next request less often."""
    specs = [
        RequestSpec(f"r{i}", i * 0.25, *((4096, 512) if i % 2 == 0 else (64, 16)))
        for i in range(400)
    ]
    workload = Workload(Arrival("trace", trace=tuple(specs)), name="alternating")
    rr = simulate_fleet(DEP, workload, replicas=2, router="round-robin").to_dict()
    ll = simulate_fleet(DEP, workload, replicas=2, router="least-loaded").to_dict()
    assert [row["completed"] for row in rr["per_replica"]] == [200, 200]
    assert rr["imbalance"]["busy_max_over_mean"] > 1.5
    assert ll["imbalance"]["busy_max_over_mean"] < rr["imbalance"]["busy_max_over_mean"]
    assert ll["e2e_s"]["p90"] < rr["e2e_s"]["p90"]


def test_prefix_aware_routing_keeps_each_prefix_where_it_is_cached() -> None:
    """16 system prompts of 2,048 tokens (of 2,304-token prompts), each request with a random
    one, 800 requests on 4 replicas with prefix caching. The most a cache can give is
    2048 / 2304 = 88.9 % of prompt tokens. Round-robin makes every replica compute every
    prefix (64 misses: 81.8 %); prefix-aware routing sends a group back to a replica holding
    it, so a prefix is computed about once per group (87 %)."""
    rng = np.random.default_rng(0)
    specs = [
        RequestSpec(f"r{i}", i * 0.05, 2304, 32, 2048, int(rng.integers(16))) for i in range(800)
    ]
    workload = Workload(Arrival("trace", trace=tuple(specs)), name="system-prompts")
    config = SchedulerConfig(prefix_caching=True)
    hit = {
        router: simulate_fleet(DEP, workload, replicas=4, router=router, config=config).to_dict()[
            "prefix_cache_hit_rate"
        ]
        for router in ("round-robin", "prefix-aware")
    }
    assert hit["prefix-aware"] > hit["round-robin"] + 0.02
    assert hit["prefix-aware"] > 0.8  # each of 16 prefixes computed about once per holder


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        (dict(replicas=0), "replicas"),
        (dict(replicas=2, router="random-walk"), "router"),
        (dict(replicas=True), "replicas"),
    ],
)
def test_bad_fleet_settings_name_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        simulate_fleet(DEP, _poisson(1.0, 5), **kwargs)


def test_a_closed_loop_fleet_is_refused() -> None:
    closed = build_workload(input_tokens=8, output_tokens=8, concurrency=4, num_requests=8)
    with pytest.raises(ConfigError, match="arrival"):
        simulate_fleet(DEP, closed, replicas=2)


def test_cli_prints_the_replicas_and_writes_a_fleet_run(tmp_path) -> None:
    out = tmp_path / "fleet"
    args = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--input-tokens", "256"]
    args += ["--output-tokens", "32", "--rate", "20", "--num-requests", "200", "--replicas", "3"]
    result = runner.invoke(app, [*args, "--out", str(out)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "3 replicas behind the round-robin router" in result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["replicas"] == 3 and len(summary["per_replica"]) == 3
    assert runner.invoke(app, ["diagnose", str(out)]).exit_code == 0
    bad = runner.invoke(app, [*args, "--router", "nope"], env={"COLUMNS": "200"})
    assert bad.exit_code == 2 and "router" in bad.output
