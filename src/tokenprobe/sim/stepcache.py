"""A memo in front of the cost model for decode-only steps, so 10^5-request runs take seconds.

In a decode-only step of n sequences only the attention term depends on the context sum C, and
linearly (FLOP and KV bytes both proportional to C, Roofline max() of the two): step time and
energy are piecewise linear in C for fixed n. So the cost is evaluated exactly at the edges of
buckets of C of width n x `tokens_per_seq_bucket` (the mean context per sequence moves by one
token per step, so a bucket serves ~16 consecutive steps and is reused later) and interpolated
linearly in between. Where the roofline switches from memory- to compute-bound inside a bucket the
interpolation is a chord of a convex curve: an error well under 1% of the attention term, which is
checked against the exact model in tests/sim/test_stepcache.py. `DecodeMemo` prices steps with
prefill tokens exactly.

`StepMemo` (what `simulate` and fleets use) also memoizes the commonest mixed step under load: one
new prompt of p tokens prefilled whole (attention pairs p(p+1)/2) beside n decoding sequences of
mean context m = C / n (80 % of the mixed steps of benchmarks/sim_speed.py). Every operator's FLOP
and bytes are affine in p, in n and in C = n·m (the GEMMs in the step's tokens p + n, the KV reads
in C, the LM head in n + 1), so they are multilinear in (p, n, m) and trilinear interpolation
between the corners of a box reproduces them; the price departs from the exact one only through
what is not linear: the roofline's max() switching inside a box, the GEMM efficiency's log2 of
the rows (cost/step.py `rates`), the prefill attention's p² (the corners lie on the same fresh-
prompt curve) and the power ceiling. Boxes are 1/16 to 1/32 of an octave in p and in n (exact
below 16) and 1/8 to 1/16 of an octave in m (exact below 8); the price is exact on a corner. On a
sweep over dense, MoE, sliding-window, tensor-parallel and power-limited deployments (tests/sim/
test_stepcache.py) time and energy stay within 0.5 % of the exact model (median 10^-5 on the
benchmark's steps). Other mixed steps (several prompts, a later chunk, prefix-cache hits) are
priced exactly; `simulate(..., exact_steps=True)` prices every step exactly.
"""

from __future__ import annotations

from typing import cast

from tokenprobe.sim.base import StepPlan
from tokenprobe.sim.engine import StepFn

TOKENS_PER_SEQ_BUCKET = 16
# boxes per octave: from 2^k on a box is 2^k / B wide (exact below B)
PROMPT_BOXES_PER_OCTAVE = 16  # prompt tokens p
DECODE_BOXES_PER_OCTAVE = 16  # decoding sequences n
CONTEXT_BOXES_PER_OCTAVE = 8  # mean decode context m = C / n
_P_BITS = PROMPT_BOXES_PER_OCTAVE.bit_length()
_N_BITS = DECODE_BOXES_PER_OCTAVE.bit_length()
_M_BITS = CONTEXT_BOXES_PER_OCTAVE.bit_length()


class DecodeMemo:
    """Wraps an exact `StepFn`; call it like one. `exact_calls` counts the real evaluations.

    Speed: a bucket's two edges are kept together as (t0, e0, t1 - t0, e1 - e0), so a call is one
    dict lookup and two multiply-adds (the same arithmetic as interpolating between the edges:
    identical prices)."""

    def __init__(self, exact: StepFn, tokens_per_seq_bucket: int = TOKENS_PER_SEQ_BUCKET) -> None:
        self.exact = exact
        self.bucket = tokens_per_seq_bucket
        self._memo: dict[tuple[int, int], tuple[float, float]] = {}
        self._cells: dict[tuple[int, int], tuple[float, float, float, float]] = {}
        self.exact_calls = 0
        self.calls = 0

    def _edge(self, n: int, ctx: int) -> tuple[float, float]:
        key = (n, ctx)
        hit = self._memo.get(key)
        if hit is None:
            self.exact_calls += 1
            hit = self._memo[key] = self.exact(StepPlan(0, 0.0, 0, n, ctx))
        return hit

    def _cell(self, n: int, lo: int, width: int) -> tuple[float, float, float, float]:
        t0, e0 = self._edge(n, lo)
        t1, e1 = self._edge(n, lo + width)
        cell = self._cells[(n, lo)] = (t0, e0, t1 - t0, e1 - e0)
        return cell

    def _mixed(self, plan: StepPlan) -> tuple[float, float]:
        """A step with prefill work (or none at all): priced exactly."""
        self.exact_calls += 1
        return self.exact(plan)

    def __call__(self, plan: StepPlan) -> tuple[float, float]:
        self.calls += 1
        prefill_tokens, _, prefill_seqs, n, ctx = plan
        if prefill_tokens or prefill_seqs or n == 0:
            return self._mixed(plan)
        width = n * self.bucket
        off = ctx % width
        lo = ctx - off
        if off == 0:  # on an edge: its exact price
            return self._edge(n, lo)
        cell = self._cells.get((n, lo))
        if cell is None:
            cell = self._cell(n, lo, width)
        t0, e0, dt, de = cell
        f = off / width
        return t0 + f * dt, e0 + f * de


Box = tuple[float, float, float, float, float, float, float, float,
            float, float, float, float, float, float, float, float]  # fmt: skip
"""(t, e) at the corners (p0|p1, n0|n1, m0|m1), p slowest."""


class StepMemo(DecodeMemo):
    """`DecodeMemo` plus mixed steps of one whole fresh prompt (module docstring). `mixed_calls`
    counts those it interpolated."""

    def __init__(self, exact: StepFn, tokens_per_seq_bucket: int = TOKENS_PER_SEQ_BUCKET) -> None:
        super().__init__(exact, tokens_per_seq_bucket)
        self._corners: dict[tuple[int, int, int], tuple[float, float]] = {}
        self._boxes: dict[tuple[int, int, int], Box] = {}
        self.mixed_calls = 0

    def _corner(self, p: int, n: int, m: int) -> tuple[float, float]:
        key = (p, n, m)
        hit = self._corners.get(key)
        if hit is None:
            self.exact_calls += 1
            hit = self._corners[key] = self.exact(StepPlan(p, p * (p + 1) / 2, 1, n, n * m))
        return hit

    def _box(self, p0: int, wp: int, n0: int, wn: int, m0: int, wm: int) -> Box:
        corner = self._corner
        values: list[float] = []
        for p in (p0, p0 + wp):
            for n in (n0, n0 + wn):
                for m in (m0, m0 + wm):
                    values.extend(corner(p, n, m))
        box = self._boxes[(p0, n0, m0)] = cast(Box, tuple(values))
        return box

    def _mixed(self, plan: StepPlan) -> tuple[float, float]:
        p, pairs, prefill_seqs, n, ctx = plan
        if prefill_seqs != 1 or not n or pairs != p * (p + 1) / 2:
            return DecodeMemo._mixed(self, plan)
        self.mixed_calls += 1
        wp = 1 << max(p.bit_length() - _P_BITS, 0)
        wn = 1 << max(n.bit_length() - _N_BITS, 0)
        m = ctx / n
        mi = int(m)
        wm = 1 << max(mi.bit_length() - _M_BITS, 0)
        p0, n0, m0 = p - p % wp, n - n % wn, mi - mi % wm
        box = self._boxes.get((p0, n0, m0))
        if box is None:
            box = self._box(p0, wp, n0, wn, m0, wm)
        fp, fn, fm = (p - p0) / wp, (n - n0) / wn, (m - m0) / wm
        t000, e000, t001, e001, t010, e010, t011, e011 = box[:8]
        t100, e100, t101, e101, t110, e110, t111, e111 = box[8:]
        # along m, then n, then p: v0 + f (v1 - v0) is v0 exactly where f = 0
        t00, t01 = t000 + fm * (t001 - t000), t010 + fm * (t011 - t010)
        t10, t11 = t100 + fm * (t101 - t100), t110 + fm * (t111 - t110)
        e00, e01 = e000 + fm * (e001 - e000), e010 + fm * (e011 - e010)
        e10, e11 = e100 + fm * (e101 - e100), e110 + fm * (e111 - e110)
        t0, t1 = t00 + fn * (t01 - t00), t10 + fn * (t11 - t10)
        e0, e1 = e00 + fn * (e01 - e00), e10 + fn * (e11 - e10)
        return t0 + fp * (t1 - t0), e0 + fp * (e1 - e0)
