"""`plan` searches how a deployment is served (issue 17 item 6): aggregated replicas behind a
router or P:D disaggregated workers, speculative decoding, the node topology; fleets judged by
the cluster simulator. Small workloads (100-300 requests), one process."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tokenprobe.cli import app
from tokenprobe.cost import (
    BatchShape,
    SpecDecode,
    estimate_deployment,
    make_deployment,
    step_cost,
)
from tokenprobe.cost import Workload as StaticWorkload
from tokenprobe.plan import PlanRequest, candidates, fixed_lengths, plan
from tokenprobe.sim import SchedulerConfig, simulate_fleet
from tokenprobe.workload import Arrival, Workload

MODEL, GPU = "llama-3.1-8b", "h100-sxm"


def _plan(rate: float, isl: int, osl: int, ttft: float, tpot: float, n: int = 120, **kw: object):
    grid = {k: kw.pop(k) for k in ("modes", "router_list", "specs", "gpus_per_node") if k in kw}
    cands = candidates([GPU], ["bf16"], [1], [256], **grid)  # type: ignore[arg-type]
    req = PlanRequest(MODEL, rate, *fixed_lengths(isl, osl), ttft, tpot, cands, num_requests=n,
                      **kw)  # type: ignore[arg-type]  # fmt: skip
    return plan(req, workers=1)


def test_long_prompts_a_disaggregated_split_meets_a_tpot_slo_aggregation_needs_more_gpus_for() -> (
    None
):
    """6000-token prompts, 128 outputs, 2 req/s. Aggregated, a replica's decode steps share the
    GPU with the prompts that arrive while a request decodes: over its ~osl x t_dec of decoding
    r x osl x t_dec prompts of t_pre each arrive, so TPOT ~ t_dec x (1 + r x t_pre) (r: the
    replica's rate). Disaggregated, decode workers never prefill: TPOT ~ t_dec."""
    dep = make_deployment(MODEL, GPU)
    isl, osl, rate = 6000, 128, 2.0
    t_pre = step_cost(dep, BatchShape.prefill(isl)).time_s  # ~0.14 s: compute-bound
    t_dec = step_cost(dep, BatchShape.decode(1, isl + osl // 2)).time_s  # ~7.8 ms
    wl = Workload(Arrival("poisson", rate_per_s=rate), *fixed_lengths(isl, osl), num_requests=120)
    cfg = SchedulerConfig(prefix_caching=True)
    agg = simulate_fleet(dep, wl, replicas=2, config=cfg).to_dict()
    pd = simulate_fleet(dep, wl, disaggregate="1p1d", config=cfg).to_dict()
    assert agg["tpot_s"]["mean"] == pytest.approx(t_dec * (1 + rate / 2 * t_pre), rel=0.05)
    assert pd["tpot_s"]["mean"] == pytest.approx(t_dec, rel=0.12)
    slo = 0.0095  # between the two fleets' p90s
    assert pd["tpot_s"]["p90"] < slo < agg["tpot_s"]["p90"]

    p = _plan(rate, isl, osl, 3.0, slo, modes=["agg", "all"], max_gpus=3)
    best = p.feasible[0]
    assert (best.candidate.mode, best.gpus) == ("1p1d", 2)
    aggregated = [o for o in p.outcomes if o.candidate.mode == "agg"]
    assert len(aggregated) == 1 and aggregated[0].gpus == 3  # 2 replicas missed (above)
    # splits of more GPUs than the 2 that met the SLOs were not simulated
    skipped = [o for o in p.outcomes if o.reason.startswith("not simulated")]
    assert {o.candidate.disaggregate for o in skipped} == {"1p2d", "2p1d"}
    assert p.to_dict()["simulated_candidates"] == 2


def test_short_prompts_aggregation_wins() -> None:
    """128-token prompts at 4 req/s: one replica sustains far more (a 128-token prefill is
    ~1 ms), so the aggregated plan needs 1 GPU and any split at least 2."""
    p = _plan(4.0, 128, 128, 1.0, 0.05, n=100, modes=["agg", "1p1d"])
    best = p.feasible[0]
    assert (best.candidate.mode, best.gpus) == ("agg", 1)
    split = next(o for o in p.outcomes if o.candidate.mode == "1p1d")
    assert split.feasible and split.gpus == 2
    assert p.feasible.index(split) > 0


def test_spec_decode_meets_a_memory_bound_tpot_slo_plain_decode_cannot() -> None:
    """Batch 1 decode of an 8B model reads the 16 GB of weights per token: ~7.4 ms on an H100.
    MTP with one draft (acceptance 0.85) emits E = 1 + 0.85 = 1.85 tokens per step for a
    verification pass that, memory-bound, costs about a decode step, plus a draft of
    `draft_fraction` of it: TPOT ~ t_dec x (1 + f) / E, about 0.6 x. A 6 ms SLO is out of
    reach for plain decode and in reach with MTP."""
    dep = make_deployment(MODEL, GPU)
    spec = SpecDecode.parse("mtp:1")
    work = StaticWorkload(512, 128)
    plain = estimate_deployment(dep, work, find_compute_bound=False).tpot_s
    with_mtp = estimate_deployment(dep, work, find_compute_bound=False, spec=spec).tpot_s
    assert spec.tokens_per_step == pytest.approx(1.85)
    assert plain > 0.006 > with_mtp
    p = _plan(2.0, 512, 128, 1.0, 0.006, n=100, specs=[None, "mtp:1"])
    (ok,) = p.feasible
    assert ok.candidate.spec_decode == "mtp:1" and ok.gpus == 1
    off = next(o for o in p.outcomes if o.candidate.spec_decode is None)
    assert not off.feasible and off.reason == "even a lone request misses the SLOs"
    # the simulated fleet at 2 req/s (batch ~1-2) decodes at about the lone request's spec TPOT
    assert ok.tpot_p90_s == pytest.approx(with_mtp, rel=0.1)


def test_a_prefix_heavy_workload_ranks_prefix_aware_above_round_robin() -> None:
    """16,384-token prompts whose first 15,360 are one of 32 shared documents, 4 req/s, at most
    2 GPUs. An H100's KV pool holds ~450k tokens of Llama-3.1-8B (estimate), less than the 32 x
    15,360 = 492k of all the prefixes: a replica that serves every group evicts prefixes it will
    need again and re-prefills ~16k tokens (~0.47 s) for a request whose prefix it lost, where a
    hit prefills 1,024 (~30 ms). Round-robin sends every group to both replicas; prefix-aware
    keeps each group on one, so each replica holds 16 x 15,360 = 246k, which fits. The p90 TTFT
    bound of 250 ms sits between the two."""
    dep = make_deployment(MODEL, GPU)
    capacity = estimate_deployment(dep, StaticWorkload(16384, 64)).memory.kv_capacity_tokens
    assert 16 * 15360 < capacity < 32 * 15360
    p = _plan(4.0, 16384, 64, 0.25, 0.05, n=300, router_list=["round-robin", "prefix-aware"],
              shared_prefix_tokens=15360, prefix_groups=32, max_gpus=2)  # fmt: skip
    by_router = {o.candidate.router: o for o in p.outcomes}
    aware, rr = by_router["prefix-aware"], by_router["round-robin"]
    assert aware.feasible and rr.gpus == aware.gpus == 2
    assert not rr.feasible and rr.ttft_p90_s > 0.25  # type: ignore[operator]
    assert p.feasible[0] is aware
    assert aware.prefix_cache_hit_rate > rr.prefix_cache_hit_rate + 0.1  # type: ignore[operator]


def test_a_tp_group_across_two_servers_pays_the_nics() -> None:
    """Llama-3.1-70B TP8 on H100 servers of 4 GPUs spans 2 servers: its all-reduces cross the
    400 Gb/s NICs (cost/comm.py), which take a share of the decode step and slow it; on one
    8-GPU server none do."""
    in_len, out_len = fixed_lengths(512, 64)
    cands = candidates([GPU], ["bf16"], [8], [256], gpus_per_node=[4, 8])
    req = PlanRequest("llama-3.1-70b", 1.0, in_len, out_len, None, 0.1, cands, num_requests=60)
    by_node = {o.candidate.gpus_per_node: o for o in plan(req, workers=1).outcomes}
    two, one = by_node[4], by_node[8]
    assert (two.nodes, one.nodes) == (2, 1)
    assert one.nic_share is None and 0 < two.nic_share < 1  # type: ignore[operator]
    assert two.feasible and one.feasible
    assert two.tpot_p90_s > one.tpot_p90_s  # type: ignore[operator]


BASE = ["plan", "--model", MODEL, "--rate", "2", "--slo-tpot-s", "0.05", "--gpu", GPU,
        "--weight-dtype", "bf16", "--tp", "1", "--num-requests", "60", "--workers", "1",
        "--input-tokens", "256", "--output-tokens", "32"]  # fmt: skip


def test_plan_json_names_each_candidates_mode() -> None:
    args = [*BASE, "--disaggregate", "agg,1p1d", "--router", "round-robin,least-loaded",
            "--spec-decode", "none,mtp:1", "--json"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    d = json.loads(result.stdout)
    rows = d["feasible"] + d["rejected"]
    for o in rows:
        assert {"mode", "fleet", "router", "spec_decode", "nodes", "nic_share"} <= o.keys()
    assert {o["mode"] for o in rows} == {"agg", "1p1d"}
    assert {o["spec_decode"] for o in rows} == {None, "mtp:1"}
    assert d["simulated_candidates"] >= 2 and d["simulations"] > d["simulated_candidates"]
    assert d["candidates"] == len(rows)


@pytest.mark.parametrize(
    ("flags", "field"),
    [
        (["--spec-decode", "bogus"], "spec_decode"),
        (["--spec-decode", "mtp:0"], "spec_decode"),
        (["--spec-decode", "eagle:2"], "spec_acceptance"),
        (["--spec-decode", "mtp:1", "--spec-acceptance", "1.5"], "spec_acceptance"),
        (["--disaggregate", "0p1d"], "disaggregate"),
        (["--disaggregate", "1p"], "disaggregate"),
        (["--disaggregate", "2000p1d"], "disaggregate"),  # over the simulator's 1,024 workers
        (["--router", "random"], "router"),
        (["--max-gpus", "0"], "max_gpus"),
        (["--gpus-per-node", "x"], "gpus_per_node"),
    ],
)
def test_bad_dimensions_exit_2_naming_the_field(flags: list[str], field: str) -> None:
    result = CliRunner().invoke(app, [*BASE, *flags])
    assert result.exit_code == 2, result.output
    assert field in result.output and "Traceback" not in result.output
