"""Named scenarios: seed 003's A/B/C ordering and the hello-vs-summary contrast."""

from __future__ import annotations

from tokenprobe.sim.scenarios import SCENARIOS, run_scenario


def test_seed_003_batching_cuts_energy_per_token() -> None:
    (_, ra), (_, rb), (_, rc) = run_scenario(SCENARIOS["seed-003"])
    da, db, dc = ra.to_dict(), rb.to_dict(), rc.to_dict()
    tps = [d["output_tokens_per_s"] for d in (da, db, dc)]
    kwh = [d["energy"]["kwh_per_million_tokens_all_in"] for d in (da, db, dc)]
    assert tps[0] < tps[1] < tps[2]
    assert kwh[0] > kwh[1] > kwh[2]
    # the seed: C costs about 1/5 of A per token; batching must give at least a 3x saving
    assert kwh[2] < kwh[0] / 3
    # the requested lengths came out exactly
    assert da["output_tokens"] == 4 * 2048 and dc["completed"] == 256
    assert dc["kv"]["peak_blocks_used"] <= dc["kv"]["capacity_blocks"]


def test_hello_vs_summary_same_tokens_different_energy() -> None:
    (_, hello), (_, summary) = run_scenario(SCENARIOS["hello-vs-summary"])
    h, s = hello.to_dict(), summary.to_dict()
    assert h["input_tokens"] + h["output_tokens"] == s["input_tokens"] + s["output_tokens"] == 5000
    # one long sequential decode costs more GPU energy than 100 batched short chats
    assert s["energy"]["total_j"] > h["energy"]["total_j"]
