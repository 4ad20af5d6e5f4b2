"""Speculative decoding in fleets: replicas behind a router and disaggregated decode workers
verify drafts as one replica does (sim/specdecode.py), each with acceptances of its own."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from tokenprobe.cli import app
from tokenprobe.cost import SpecDecode, make_deployment
from tokenprobe.sim import build_workload, simulate, simulate_fleet

runner = CliRunner()
DEP = make_deployment("llama-3.1-8b", "h100-sxm")
SPEC = SpecDecode.parse("mtp:2", 0.8)
WORKLOAD = build_workload(input_tokens=512, output_tokens=128, rate_per_s=6.0, num_requests=60)


def test_a_fleet_of_one_is_the_single_replica_request_by_request() -> None:
    one = simulate(deployment=DEP, workload=WORKLOAD, seed=3, spec_decode=SPEC)
    fleet = simulate_fleet(DEP, WORKLOAD, replicas=1, seed=3, spec_decode=SPEC)
    a = {r.request_id: r for r in one.records}
    b = {r.request_id: r for r in fleet.records}
    assert a.keys() == b.keys()
    for rid, rec in a.items():
        assert b[rid].finish_s == pytest.approx(rec.finish_s, rel=1e-12)
        assert b[rid].output_tokens == rec.output_tokens
    assert fleet.to_dict()["spec_decode"] == one.to_dict()["spec_decode"]


def test_replicas_emit_every_token_and_sum_their_counts() -> None:
    d = simulate_fleet(DEP, WORKLOAD, replicas=3, router="least-loaded", seed=3, spec_decode=SPEC)
    doc = d.to_dict()
    assert doc["completed"] == 60 and doc["output_tokens"] == 60 * 128
    s = doc["spec_decode"]
    # the fleet's counts are its replicas' sums, and its rates follow from them
    assert s["acceptance_rate"] == pytest.approx(s["accepted_tokens"] / s["drafted_tokens"])
    assert s["tokens_per_step_mean"] == pytest.approx(1 + s["accepted_tokens"] / s["verify_steps"])
    # each draft accepted with probability 0.8 until the first rejection: E = 2.44 tokens a step
    assert s["tokens_per_step_mean"] == pytest.approx(SPEC.tokens_per_step, rel=0.05)


def test_disaggregated_decode_workers_speculate_and_lower_tpot() -> None:
    plain = simulate_fleet(DEP, WORKLOAD, disaggregate="1p2d", seed=3).to_dict()
    spec = simulate_fleet(DEP, WORKLOAD, disaggregate="1p2d", seed=3, spec_decode=SPEC).to_dict()
    assert spec["output_tokens"] == plain["output_tokens"] == 60 * 128
    # memory-bound decode of a few sequences: a step of 1 + 2 rows costs about one plain step
    # and emits ~2.44 tokens, so TPOT falls by about that factor (here 7.5 -> 3.7 ms)
    ratio = spec["tpot_s"]["p50"] / plain["tpot_s"]["p50"]
    assert 1 / SPEC.tokens_per_step < ratio < 0.6
    assert spec["spec_decode"]["verify_steps"] > 0


def test_cli_runs_replicas_with_spec_decode() -> None:
    base = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--input-tokens", "128"]
    base += ["--output-tokens", "32", "--rate", "4", "--num-requests", "12", "--json"]
    out = runner.invoke(app, [*base, "--replicas", "2", "--spec-decode", "mtp:1"])
    assert out.exit_code == 0, out.output
    assert '"spec_decode"' in out.output
