"""A memo in front of the cost model for decode-only steps, so 10^5-request runs take seconds.

In a decode-only step of n sequences only the attention term depends on the context sum C, and
linearly (FLOP and KV bytes both proportional to C, Roofline max() of the two): step time and
energy are piecewise linear in C for fixed n. So the cost is evaluated exactly at the edges of
buckets of C of width n x `tokens_per_seq_bucket` (the mean context per sequence moves by one
token per step, so a bucket serves ~16 consecutive steps and is reused later) and interpolated
linearly in between. Where the roofline switches from memory- to compute-bound inside a bucket the
interpolation is a chord of a convex curve: an error well under 1% of the attention term, which is
checked against the exact model in tests/sim/test_stepcache.py. Steps with prefill tokens are
always priced exactly.
"""

from __future__ import annotations

from tokenprobe.sim.base import StepPlan
from tokenprobe.sim.engine import StepFn

TOKENS_PER_SEQ_BUCKET = 16


class DecodeMemo:
    """Wraps an exact `StepFn`; call it like one. `exact_calls` counts the real evaluations."""

    def __init__(self, exact: StepFn, tokens_per_seq_bucket: int = TOKENS_PER_SEQ_BUCKET) -> None:
        self.exact = exact
        self.bucket = tokens_per_seq_bucket
        self._memo: dict[tuple[int, int], tuple[float, float]] = {}
        self.exact_calls = 0
        self.calls = 0

    def _edge(self, n: int, ctx: int) -> tuple[float, float]:
        key = (n, ctx)
        hit = self._memo.get(key)
        if hit is None:
            self.exact_calls += 1
            hit = self._memo[key] = self.exact(StepPlan(0, 0.0, 0, n, ctx))
        return hit

    def __call__(self, plan: StepPlan) -> tuple[float, float]:
        self.calls += 1
        n = plan.decode_seqs
        if plan.prefill_tokens or plan.prefill_seqs or n == 0:
            self.exact_calls += 1
            return self.exact(plan)
        ctx = plan.decode_context_tokens
        width = n * self.bucket
        lo = ctx - ctx % width
        t0, e0 = self._edge(n, lo)
        if ctx == lo:
            return t0, e0
        t1, e1 = self._edge(n, lo + width)
        f = (ctx - lo) / width
        return t0 + f * (t1 - t0), e0 + f * (e1 - e0)
