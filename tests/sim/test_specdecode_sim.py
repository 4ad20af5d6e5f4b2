"""Speculative decoding in the simulator (sim/specdecode.py): the invariants of every run, the
tokens a step emits against the acceptance model's expectation, hand-checked chunks and KV
slots, the cost against the estimator's, reproducibility, the run config and the flags."""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tokenprobe.cli import app
from tokenprobe.cost import SpecDecode, estimate
from tokenprobe.diagnose.replay import replay_comparison
from tokenprobe.records import RunConfig, read_run
from tokenprobe.sim import SchedulerConfig, run_workload, simulate, spec_decode_of
from tokenprobe.sim.kv import BlockPool
from tokenprobe.sim.result import SimResult
from tokenprobe.sim.specdecode import SpecRun
from tokenprobe.workload import Arrival, LengthDist, Workload

from .helpers import IDLE_W, linear_step, unit_step

runner = CliRunner()
MODEL, GPU = "llama-3.1-8b", "h100-sxm"


def _fixed(n: int, name: str) -> LengthDist:
    return LengthDist("fixed", value=n, name=name)


def _run(
    workload: Workload,
    spec: SpecDecode,
    *,
    capacity: int = 10_000,
    config: SchedulerConfig | None = None,
    step: object = linear_step,
    seed: int = 0,
    draft_passes: float = 0.3,
) -> SimResult:
    config = config or SchedulerConfig()
    pool = BlockPool(capacity, config.block_size, config.prefix_caching)
    return run_workload(
        workload, step, pool, config, idle_w=IDLE_W, seed=seed,  # type: ignore[arg-type]
        spec=SpecRun(spec, draft_passes, memo=False),
    )  # fmt: skip


@st.composite
def cases(draw: st.DrawFn) -> tuple[Workload, SchedulerConfig, int, SpecDecode, int]:
    kind = draw(st.sampled_from(["offline", "poisson", "closed"]))
    arrival = {
        "offline": Arrival("offline"),
        "poisson": Arrival("poisson", rate_per_s=draw(st.floats(0.5, 50.0))),
        "closed": Arrival("closed", concurrency=draw(st.integers(1, 6))),
    }[kind]
    workload = Workload(
        arrival,
        LengthDist("uniform", low=1, high=draw(st.integers(1, 120)), name="input_tokens"),
        LengthDist("uniform", low=1, high=draw(st.integers(1, 80)), name="output_tokens"),
        num_requests=draw(st.integers(1, 20)),
        shared_prefix_tokens=draw(st.sampled_from([0, 8, 40])),
    )
    max_seqs = draw(st.integers(1, 8))
    config = SchedulerConfig(
        max_num_seqs=max_seqs,
        max_num_batched_tokens=draw(st.integers(max_seqs, 120)),
        chunked_prefill=draw(st.booleans()),
        block_size=draw(st.sampled_from([4, 16])),
        prefix_caching=draw(st.booleans()),
        capacity_policy=draw(st.sampled_from(["max_utilization", "guaranteed_no_evict"])),
    )
    spec = SpecDecode(
        draw(st.sampled_from(["mtp", "eagle", "ngram"])),
        draw(st.integers(1, 6)),
        draw(st.sampled_from([0.0, 0.3, 0.8, 1.0])),
    )
    return workload, config, draw(st.integers(3, 40)), spec, draw(st.integers(0, 1000))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_invariants(case: tuple[Workload, SchedulerConfig, int, SpecDecode, int]) -> None:
    """Small pools and budgets (preemption, clipped drafts): no request lost, output tokens
    exact, at most k + 1 tokens per request per step, KV within capacity and all returned,
    clocks monotone, per-request energy adding up to the steps', no preemption when whole
    lengths are reserved."""
    workload, config, capacity, spec, seed = case
    result = _run(workload, spec, capacity=capacity, config=config, seed=seed)
    engine, pool = result.engine, result.pool
    times = [row[0] for row in engine.timeline.rows]
    assert times == sorted(times)
    assert all(b > a for a, b in itertools.pairwise(engine.ledger.step_end_s))
    assert len(result.records) == workload.size
    for seq, record in zip(engine.seqs, result.records, strict=True):
        if seq.reject_reason is not None:
            assert record.error_kind == "rejected_too_long" and record.error_message
            continue
        assert record.ok and seq.generated == seq.output_tokens == record.output_tokens
        assert len(record.token_times_s) == record.output_tokens
        assert record.token_times_s == sorted(record.token_times_s)
        assert record.token_times_s[-1] == record.finish_s
        # step ends are distinct, so equal times are one step's chunk
        assert max(Counter(record.token_times_s).values()) <= spec.draft_tokens + 1
    assert pool.peak_used_blocks <= pool.capacity_blocks
    assert max(row[2] for row in engine.timeline.rows) <= pool.capacity_blocks
    assert pool.used_blocks == 0
    shares = sum(seq.energy_j for seq in engine.seqs)
    assert abs(shares - engine.step_energy_j) <= 1e-6 * max(1.0, shares)
    if config.capacity_policy == "guaranteed_no_evict":  # reserved at admission, clipped to it
        assert result.preemptions == 0
    d = result.to_dict()["spec_decode"]
    assert d["accepted_tokens"] <= d["drafted_tokens"] <= spec.draft_tokens * d["verify_steps"]


def test_chunks_kv_slots_and_the_last_step_clip_by_hand() -> None:
    """One request, 4 prompt tokens, every draft accepted (a = 1), k = 3, blocks of 4, plain
    steps of 1 s; mtp's draft adds 0.5 of a decode step to each decode step, ngram's nothing.
    Step 0 prefills and samples token 1 (t = 1 s); step 1 verifies 3 drafts and emits 4; step 2
    would emit 4 but only 2 are left of 7. So tokens at 1, 1 + s (x4), 1 + 2s (x2) with a
    decode step s of 1.5 s (mtp) or 1 s (ngram); TPOT 2s / 6, two chunk gaps of s. KV slots
    taken by step 2: 4 + 5 - 1 = 8 tokens written, + 1 + k new positions, + k lookahead for
    mtp (vLLM's use_eagle) = 15 -> 4 blocks; ngram has no lookahead: 12 -> 3 blocks."""
    one = Workload(Arrival("offline"), _fixed(4, "input_tokens"), _fixed(7, "output_tokens"), 1)
    config = SchedulerConfig(block_size=4)
    peaks = {}
    for method, passes, s in (("mtp", 0.5, 1.5), ("ngram", 0.0, 1.0)):
        spec = SpecDecode(method, 3, 1.0)
        result = _run(one, spec, config=config, step=unit_step, draft_passes=passes)
        (record,) = result.records
        assert record.token_times_s == [1.0, *[1.0 + s] * 4, *[1.0 + 2 * s] * 2]
        assert record.tpot_s == pytest.approx(2 * s / 6)
        assert record.itl_s == [s, s]
        assert result.engine.steps == 3
        peaks[method] = result.pool.peak_used_blocks
    assert peaks == {"mtp": 4, "ngram": 3}


def test_a_request_whose_last_step_cannot_fit_its_slots_is_refused() -> None:
    """A 16-token cache (4 blocks of 4): 8 in + 8 out needs 15 slots without speculation; its
    last step with mtp:3 takes 15 + 3 drafts + 3 lookahead = 21, more than the cache (refused:
    alone it could never finish), with ngram:1 15 + 1 = 16, which fits."""
    wl = Workload(Arrival("offline"), _fixed(8, "input_tokens"), _fixed(8, "output_tokens"), 1)
    config = SchedulerConfig(block_size=4)
    mtp = _run(wl, SpecDecode("mtp", 3, 0.5), capacity=4, config=config).records[0]
    assert mtp.error_kind == "rejected_too_long" and "needs KV for 21 tokens" in str(
        mtp.error_message
    )
    ngram = _run(wl, SpecDecode("ngram", 1, 0.5), capacity=4, config=config).records[0]
    assert ngram.ok and ngram.output_tokens == 8


def test_guaranteed_no_evict_holds_with_speculation() -> None:
    """TensorRT-LLM's policy reserves a request's whole length at admission and clips a step's
    slots to it: a tight cache runs fewer requests at once but never preempts, while
    max_utilization on the same cache does."""
    wl = Workload(Arrival("offline"), _fixed(40, "input_tokens"), _fixed(60, "output_tokens"), 12)
    spec = SpecDecode("eagle", 4, 0.6)
    runs = {
        policy: _run(
            wl, spec, capacity=20, config=SchedulerConfig(block_size=16, capacity_policy=policy)
        )
        for policy in ("guaranteed_no_evict", "max_utilization")
    }
    assert runs["guaranteed_no_evict"].preemptions == 0
    assert runs["max_utilization"].preemptions > 0
    for run in runs.values():
        assert all(r.ok and r.output_tokens == 60 for r in run.records)


def test_mean_tokens_per_step_is_the_expectation_within_sampling_error() -> None:
    """k = 3, a = 0.7: tokens per step X in 1..4 with P = 0.3, 0.21, 0.147, 0.343, so
    E = 2.533 (Leviathan et al.) and Var = E[X^2] - E^2 = 7.951 - 6.418 = 1.534. Over n
    verification steps the mean is within 4 standard errors sqrt(1.534 / n) of E, and the
    accepted share of drafts within 4 of its own of (E - 1) / k."""
    spec = SpecDecode("eagle", 3, 0.7)
    long = Workload(
        Arrival("closed", concurrency=16), _fixed(64, "input_tokens"),
        _fixed(400, "output_tokens"), num_requests=48,
    )  # fmt: skip
    d = _run(long, spec).to_dict()["spec_decode"]
    n = d["verify_steps"]
    assert n > 5000
    assert spec.tokens_per_step == pytest.approx(2.533, abs=1e-3)
    assert abs(d["tokens_per_step_mean"] - spec.tokens_per_step) < 4 * math.sqrt(1.534 / n)
    assert abs(d["acceptance_rate"] - (spec.tokens_per_step - 1) / 3) < 4 * math.sqrt(1.534 / n) / 3


def _batch8(spec: SpecDecode | None, **kw: object) -> SimResult:
    """Eight 1k-token prompts decoded together (one prefill step, then batch-8 decode)."""
    wl = Workload(Arrival("offline"), _fixed(1024, "input_tokens"), _fixed(256, "output_tokens"), 8)
    return simulate(MODEL, GPU, workload=wl, spec_decode=spec, **kw)  # type: ignore[arg-type]


def test_nothing_accepted_emits_one_token_per_step_at_a_higher_cost() -> None:
    """a = 0: every step emits the target's own token only, so the run takes as many steps as
    plain decode, each dearer (k more rows per sequence, and the draft for mtp)."""
    plain = _batch8(None)
    for spec in (SpecDecode("ngram", 4, 0.0), SpecDecode("mtp", 2, 0.0)):
        run = _batch8(spec)
        d = run.to_dict()
        assert d["spec_decode"]["tokens_per_step_mean"] == 1.0
        assert d["spec_decode"]["accepted_tokens"] == 0
        assert run.engine.steps == plain.engine.steps
        assert d["output_tokens"] == plain.to_dict()["output_tokens"] == 8 * 256
        assert run.engine.busy_s > plain.engine.busy_s
        assert d["tpot_s"]["mean"] > plain.to_dict()["tpot_s"]["mean"]


def test_memory_bound_tpot_drops_by_what_the_estimator_predicts() -> None:
    """Batch 8 is memory-bound on an H100: the simulated TPOT with mtp:1 at 0.85 is within
    10 % of `estimate --spec-decode`'s at the same batch and lengths, as the plain TPOTs are
    of each other, and so is the gain."""
    spec = SpecDecode("mtp", 1, 0.85)
    kw = dict(input_tokens=1024, output_tokens=256, batch=8)
    est_plain = estimate(MODEL, GPU, **kw).tpot_s  # type: ignore[arg-type]
    est_spec = estimate(MODEL, GPU, spec_decode=spec, **kw).tpot_s  # type: ignore[arg-type]
    sim_plain = _batch8(None).to_dict()["tpot_s"]["mean"]
    sim_spec = _batch8(spec).to_dict()["tpot_s"]["mean"]
    assert sim_plain == pytest.approx(est_plain, rel=0.1)
    assert sim_spec == pytest.approx(est_spec, rel=0.1)
    assert sim_plain / sim_spec == pytest.approx(est_plain / est_spec, rel=0.1)
    assert sim_spec < 0.65 * sim_plain


def test_memoized_pricing_matches_the_exact_steps() -> None:
    """Decode-only speculative steps are priced through a DecodeMemo (piecewise linear in the
    context sum, as plain decode): the run's TPOT and energy match exact pricing within 1 %."""
    spec = SpecDecode("eagle", 3, 0.7)
    memo, exact = _batch8(spec).to_dict(), _batch8(spec, exact_steps=True).to_dict()
    assert memo["tpot_s"]["mean"] == pytest.approx(exact["tpot_s"]["mean"], rel=0.01)
    assert memo["energy"]["total_j"] == pytest.approx(exact["energy"]["total_j"], rel=0.01)


def test_untraced_requests_keep_two_steps_and_the_same_records() -> None:
    """With token times kept for 3 of 12 requests (every 4th), the others hold their first and
    last token's steps only, and every record's first/finish time, output tokens and TPOT are
    those of the run that traces all twelve."""
    wl = Workload(
        Arrival("closed", concurrency=4), _fixed(32, "input_tokens"),
        _fixed(90, "output_tokens"), num_requests=12,
    )  # fmt: skip
    spec = SpecDecode("mtp", 3, 0.7)
    config = SchedulerConfig()
    pool = BlockPool(10_000, config.block_size)
    few = run_workload(
        wl, linear_step, pool, config, idle_w=IDLE_W, trace_requests=3,
        spec=SpecRun(spec, 0.3, memo=False),
    )  # fmt: skip
    full = _run(wl, spec)
    assert [bool(r.token_times_s) for r in few.records] == [i % 4 == 0 for i in range(12)]
    assert all(len(s.segments) <= 2 for s in few.engine.seqs if s.idx % 4)
    for a, b in zip(few.records, full.records, strict=True):
        assert (a.first_token_s, a.finish_s, a.output_tokens, a.tpot_s) == (
            b.first_token_s, b.finish_s, b.output_tokens, b.tpot_s,
        )  # fmt: skip
        if a.token_times_s:
            assert a.token_times_s == b.token_times_s


def test_seeded_runs_repeat_and_the_workload_is_the_same_with_speculation_off() -> None:
    spec = SpecDecode("eagle", 4, 0.6)
    wl = Workload(
        Arrival("poisson", rate_per_s=20.0),
        LengthDist("uniform", low=16, high=300, name="input_tokens"),
        LengthDist("uniform", low=2, high=200, name="output_tokens"),
        num_requests=60,
    )
    a, b = (simulate(MODEL, GPU, workload=wl, spec_decode=spec, seed=3) for _ in range(2))
    assert json.dumps(a.to_dict(), sort_keys=True) == json.dumps(b.to_dict(), sort_keys=True)
    assert [r.token_times_s for r in a.records] == [r.token_times_s for r in b.records]
    other = simulate(MODEL, GPU, workload=wl, spec_decode=spec, seed=4).to_dict()
    assert other["spec_decode"]["accepted_tokens"] != a.to_dict()["spec_decode"]["accepted_tokens"]
    plain = simulate(MODEL, GPU, workload=wl, seed=3)
    shapes = [(r.input_tokens, r.output_tokens, r.sent_s) for r in plain.records]
    assert shapes == [(r.input_tokens, r.output_tokens, r.sent_s) for r in a.records]


def test_the_run_config_keeps_it_and_a_replay_simulates_it(tmp_path: Path) -> None:
    """A simulated run folder records mtp:2 at 0.8; reading it back gives the same setting, and
    the replay (diagnose --predict) speculates too: its TPOT is the run's within 10 %, where
    a replay without speculation would be about twice as slow per token."""
    spec = SpecDecode("mtp", 2, 0.8)
    wl = Workload(
        Arrival("closed", concurrency=4), _fixed(256, "input_tokens"),
        _fixed(128, "output_tokens"), num_requests=12,
    )  # fmt: skip
    result = simulate(MODEL, GPU, workload=wl, spec_decode=spec)
    result.write(tmp_path / "run")
    run = read_run(tmp_path / "run")
    assert spec_decode_of(RunConfig.of(run).deployment) == spec
    rows = {r["metric"]: r for r in replay_comparison(run)["rows"]}
    tpot = rows["tpot_s p50"]
    assert tpot["simulated"] == pytest.approx(tpot["measured"], rel=0.1)


@pytest.mark.parametrize(
    ("flags", "field"),
    [
        (["--spec-decode", "foo:2"], "spec_decode"),
        (["--spec-decode", "mtp:2", "--spec-acceptance", "1.5"], "spec_acceptance"),
        (["--spec-decode", "eagle:3"], "spec_acceptance"),
        (["--spec-decode", "mtp:2", "--scheduler", "static"], "spec_decode"),
        (["--spec-decode", "mtp:2", "--dp", "2", "--enable-expert-parallel"], "spec_decode"),
        # the speculative scheduler is vLLM V1's; SGLang's prefill-first batches have none yet
        (["--spec-decode", "mtp:2", "--engine", "sglang"], "spec_decode"),
    ],
)
def test_bad_flags_exit_2_naming_the_field(flags: list[str], field: str) -> None:
    base = ["simulate", "--model", MODEL, "--gpu", GPU, "--input-tokens", "64"]
    base += ["--output-tokens", "16", "--concurrency", "2", "--num-requests", "4"]
    out = runner.invoke(app, [*base, *flags], env={"COLUMNS": "300"})
    assert out.exit_code == 2, out.output
    text = "".join(out.output.split())
    assert f"error:{field}=" in text and "Traceback" not in out.output


def test_cli_json_and_table() -> None:
    base = ["simulate", "--model", MODEL, "--gpu", GPU, "--input-tokens", "128"]
    base += ["--output-tokens", "64", "--concurrency", "4", "--num-requests", "8"]
    out = runner.invoke(app, [*base, "--spec-decode", "mtp:3", "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    assert d["spec_decode"]["method"] == "mtp" and d["spec_decode"]["acceptance"] == 0.85
    assert d["config"]["spec_decode"] == "mtp:3" and d["config"]["spec_acceptance"] == 0.85
    table = runner.invoke(app, [*base, "--spec-decode", "ngram:2", "--spec-acceptance", "0.5"])
    assert table.exit_code == 0, table.output
    squashed = "".join(table.output.split())
    assert "speculativedecodingngram:2,acceptance0.5:" in squashed
    assert "tokensperverificationstep" in squashed
