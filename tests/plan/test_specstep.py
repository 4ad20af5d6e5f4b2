"""plan's speculative-decoding step price (plan/specstep.py): the simulator's one-token steps
cost what one emitted token costs."""

from __future__ import annotations

import pytest

from tokenprobe.cost import BatchShape, SpecDecode, make_deployment, step_cost
from tokenprobe.plan.specstep import spec_step_fn
from tokenprobe.sim import StepPlan


def test_a_memory_bound_step_costs_a_decode_step_over_the_tokens_it_emits() -> None:
    """n-gram drafts (no GPU draft) all accepted: each verification pass over k + 1 = 4
    positions emits 4 tokens. At batch 1 the pass reads the 16 GB of weights once, as a decode
    step does (the 3 extra rows' FLOP and KV are small against them), so a token costs about a
    quarter of a decode step."""
    dep = make_deployment("llama-3.1-8b", "h100-sxm")
    spec = SpecDecode("ngram", 3, 1.0)
    assert spec.tokens_per_step == 4
    plain = step_cost(dep, BatchShape.decode(1, 1000))
    time_s, energy_j = spec_step_fn(dep, spec)(StepPlan(0, 0.0, 0, 1, 1000))
    assert time_s == pytest.approx(plain.time_s / 4, rel=0.1)
    assert 0 < energy_j < plain.energy_j


def test_a_prefill_chunk_in_the_step_is_paid_in_full() -> None:
    """A 2048-token chunk is computed once per real step whatever the drafts emit: the step's
    price over a decode-only one is the chunk's marginal cost, with and without speculation."""
    dep = make_deployment("llama-3.1-8b", "h100-sxm")
    fn = spec_step_fn(dep, SpecDecode.parse("mtp:2"))
    chunk = BatchShape.prefill(2048)
    mixed = StepPlan(2048, chunk.prefill_attn_pairs, 1, 8, 8 * 1000)
    decode_only = StepPlan(0, 0.0, 0, 8, 8 * 1000)
    plain_mixed = step_cost(dep, BatchShape(2048, chunk.prefill_attn_pairs, 1, 8, 8000)).time_s
    plain_decode = step_cost(dep, BatchShape.decode(8, 1000)).time_s
    assert fn(mixed)[0] - fn(decode_only)[0] == pytest.approx(plain_mixed - plain_decode)
    assert fn(mixed)[0] > plain_mixed - plain_decode > 0
