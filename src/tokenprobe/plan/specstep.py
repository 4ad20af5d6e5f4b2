"""Speculative decoding as plan judges it: the simulator's steps priced per emitted token.

`plan --spec-decode mtp:1` needs the simulator to run a speculative-decoding server. Until the
simulator draws accepted tokens itself, plan prices each simulated decode step by its mean:
a verification pass plus the draft's work over the E = (1 - a^(k+1)) / (1 - a) tokens a step
emits (`cost.spec_step`, Leviathan et al. ICML 2023 section 3.1), so one simulated step (which
emits one token per sequence) costs what one emitted token costs. Only the cost formula's mean
is used; the spread of accepted tokens per step (which widens the TPOT distribution slightly)
is not, and the k lookahead KV slots a step reserves are not taken from the pool.

A step with prefill chunks pays the chunks' marginal cost over a plain decode step of its
decoding sequences, plus those sequences' speculative cost per token: the chunks are computed
once per real step, the decode rows emit E tokens.
"""

from __future__ import annotations

from tokenprobe.cost import BatchShape, Deployment, SpecDecode, spec_step, step_cost
from tokenprobe.sim import StepFn, StepPlan


def spec_step_fn(dep: Deployment, spec: SpecDecode) -> StepFn:
    """A step function for the simulator (time_s, energy_j of all GPUs), module docstring."""

    def step(plan: StepPlan) -> tuple[float, float]:
        shape = BatchShape(
            plan.prefill_tokens,
            plan.prefill_attn_pairs,
            plan.prefill_seqs,
            plan.decode_seqs,
            plan.decode_context_tokens,
        )
        n = plan.decode_seqs
        if n == 0:
            cost = step_cost(dep, shape)
            return cost.time_s, cost.energy_j
        ctx = max(1, plan.decode_context_tokens // n)
        per_token = spec_step(dep, n, ctx, spec)
        if not plan.prefill_tokens:
            return per_token.time_s, per_token.energy_j
        mixed = step_cost(dep, shape)
        plain = step_cost(dep, BatchShape.decode(n, ctx))
        return (
            mixed.time_s - plain.time_s + per_token.time_s,
            mixed.energy_j - plain.energy_j + per_token.energy_j,
        )

    return step
