"""Speculative decoding in the simulator (`simulate --spec-decode mtp:3`).

Scheduling follows vLLM V1 (vllm-project/vllm@00024d314514900f361ad072af6931e403b7f589,
vllm/v1/core/sched/scheduler.py):
- `schedule`: a running request is given `num_tokens_with_spec - num_computed_tokens` tokens,
  its last sampled token plus its k draft tokens (`spec_token_ids`), clipped to what is left of
  the step's token budget; the drafts all count against max_num_batched_tokens. Its KV slots are
  taken by `allocate_slots(request, num_new_tokens, num_lookahead_tokens)`, where the lookahead
  is k for methods that draft from the target's hidden states (`use_eagle()`: eagle, eagle3,
  mtp, vllm/config/speculative.py) and 0 for n-gram; a request that finds no room preempts the
  newest running one, as for plain decode (sim/continuous.py). Under
  `capacity_policy="guaranteed_no_evict"` the slots stay within the request's whole length,
  reserved at admission, as TensorRT-LLM clips a step's tokens to what is left of max_new_tokens
  (NVIDIA/TensorRT-LLM@b35ac1b64368513d215c57d2ed01d62d910df8da,
  cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp, `getNeededBlocksOneStep`): nothing is
  allocated while decoding, so nothing is preempted.
- `update_from_output`: of the k drafts, the accepted prefix and one token of the target's own
  are emitted (`num_rejected = num_draft_tokens - num_accepted`, and `num_computed_tokens` goes
  back by it: the rejected positions' KV is overwritten next step); the tokens after the
  request's max_tokens are dropped (`_update_request_with_output` stops at the limit), so a
  request never emits more than its output length.
Every token a step emits for a request reaches the client in one chunk: the record repeats the
step's end time for each (records.RequestRecord.itl_s counts a chunk as one arrival).

Acceptance: each draft is accepted with probability a, independently, until the first
rejection (Leviathan et al., ICML 2023, section 3.1, the model `cost.SpecDecode` prices), drawn
from the run's seed: P(accepted >= j) = a^j, so accepted = min(d, floor(ln u / ln a)) for
u ~ U(0, 1). The stream is the seed's own (`SPEC_STREAM`): the workload drawn from the seed is
the same with speculation on or off.

Cost of a step (`SpecStep`): the plain step's shape plus the verified drafts' rows
(`cost.verify_rows`, as `cost.verify_shape` prices them: rows through every matmul, attention
over the context; the weights and the KV are read once), plus `cost.draft_passes` decode steps
of the decoding sequences for the draft (mtp / eagle; none for ngram). A step with no prompt
chunk whose requests all verify k drafts is priced through a `DecodeMemo` (its cost is piecewise
linear in the context sum, as a plain decode step's is); others exactly. The draft is priced
over the decoding sequences only (EAGLE's head also runs over a finishing prompt's last token:
left out).

Speed: unlike the plain scheduler, decoding sequences are visited one by one each step (their
KV grows by a random number of tokens): speculation costs simulator time, plain runs do not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from tokenprobe.cost import Deployment, SpecDecode, draft_passes, verify_rows
from tokenprobe.errors import ConfigError
from tokenprobe.sim.base import VLLM_SCHEDULING, SchedulerConfig, StepPlan
from tokenprobe.sim.continuous import ContinuousScheduler
from tokenprobe.sim.engine import StepFn
from tokenprobe.sim.kv import BlockPool
from tokenprobe.sim.state import Ledger, Seq
from tokenprobe.sim.stepcache import DecodeMemo

LOOKAHEAD_METHODS = ("mtp", "eagle")  # vLLM's use_eagle(): drafts from the target's states
SPEC_STREAM = 0x5BEC  # the acceptance draws' stream beside the workload's (module docstring)


@dataclass(frozen=True, slots=True)
class SpecRun:
    """What the simulator needs of a speculative-decoding setting: the setting, the draft's
    work per step in decode steps (`cost.draft_passes`) and whether to memoize pricing."""

    spec: SpecDecode
    draft_passes: float
    memo: bool = True

    @classmethod
    def of(cls, dep: Deployment, spec: SpecDecode, memo: bool = True) -> SpecRun:
        return cls(spec, draft_passes(dep, spec), memo)


class SpecScheduler(ContinuousScheduler):
    """vLLM-V1-like continuous batching where each decoding request verifies k drafts a step
    (module docstring). Decoding requests keep `dec_start = -1`; their state is `generated`
    (tokens emitted), `computed` (tokens of KV written: input + generated - 1) and
    `own_blocks` (blocks held)."""

    def __init__(
        self,
        config: SchedulerConfig,
        pool: BlockPool,
        ledger: Ledger,
        spec: SpecDecode,
        rng: np.random.Generator,
    ) -> None:
        super().__init__(config, pool, ledger)
        self.spec = spec
        self.lookahead = spec.draft_tokens if spec.method in LOOKAHEAD_METHODS else 0
        self._rng = rng
        a = spec.acceptance
        self._log_a = math.log(a) if 0.0 < a < 1.0 else 0.0
        # this step's decoding requests and their drafts; those with all k drafts as a count
        # and a context sum, the few clipped by the token budget as rows and pairs
        self._seqs: list[Seq] = []
        self._drafts: list[int] = []
        self._full = self._full_ctx = self._ctx_sum = 0
        self._clip_rows = self._clip_seqs = 0
        self._clip_pairs = 0.0
        self.draft_pairs = 0.0  # attention pairs of this step's drafts
        self.drafting_seqs = 0  # requests verifying at least one draft this step
        self.verify_steps = 0  # (request, step) pairs that verified drafts
        self.drafted = 0
        self.accepted = 0
        self.emitted = 0  # tokens emitted by decode steps (after the output-length clip)
        self.trace_stride = 1  # requests idx % stride == 0 keep every token's step (result.py)

    @property
    def draft_rows(self) -> int:
        """Draft positions verified in this step (rows beyond one per decoding request)."""
        return self._draft_rows

    @property
    def uniform(self) -> bool:
        """Every decoding request of the step verifies k drafts."""
        return self._full == self._n_dec

    def add(self, seq: Seq, now_s: float) -> str | None:
        """As the plain scheduler, refusing also a request whose last step's slots (its whole
        length plus k drafts and the lookahead) exceed the cache: alone it could not finish."""
        extra = 0 if self._reserve else self.spec.draft_tokens + self.lookahead
        need = seq.input_tokens + seq.output_tokens - 1 + extra
        if self.pool.seq_blocks(need) > self.pool.capacity_blocks:
            return (
                f"needs KV for {need} tokens ({seq.input_tokens} in + {seq.output_tokens} out "
                f"+ {extra} speculative slots), more than the whole cache "
                f"({self.pool.capacity_tokens} tokens)"
            )
        return super().add(seq, now_s)

    # ------------------------------------------------------------ planning

    def _allocate_decode(self, step: int) -> bool:
        """Slots for each decoding request's last token, its drafts and the lookahead, in
        admission order while the token budget lasts; preempt the newest when short (the hot
        loop of a speculative run: written for speed)."""
        k, extra = self.spec.draft_tokens, 1 + self.lookahead
        pool = self.pool
        bs, state = pool.block_size, pool.state_blocks
        budget = self.config.max_num_batched_tokens
        seqs: list[Seq] = []
        drafts: list[int] = []
        self._seqs, self._drafts = seqs, drafts
        full = full_ctx = ctx_sum = 0
        self._clip_rows = self._clip_seqs = 0
        self._clip_pairs = 0.0
        before = self.preemptions
        running, prefilling, reserve = self.running, self.prefilling, self._reserve
        for seq in [s for s in running.values() if s.idx not in prefilling]:
            if budget <= 0:
                break
            if seq.idx not in running:  # preempted for an older one
                continue
            d = k if budget > k else budget - 1
            kv = seq.computed
            slots = kv + d + extra
            if reserve:  # within its whole length, reserved at admission (module docstring)
                slots = min(slots, seq.spec.input_tokens + seq.spec.output_tokens - 1)
            need = -(-slots // bs) + state - seq.shared_blocks - seq.own_blocks
            if need > 0 and not self._take(seq, need, step):
                continue
            seqs.append(seq)
            drafts.append(d)
            ctx_sum += kv
            budget -= d + 1
            if d == k:
                full += 1
                full_ctx += kv
            else:
                self._clip(kv, d, 1)
        self._full, self._full_ctx, self._ctx_sum = full, full_ctx, ctx_sum
        self._totals(step)
        return self.preemptions > before

    def _clip(self, kv: int, d: int, sign: int) -> None:
        """Add (sign 1) or take out (-1) a request verifying d < k drafts."""
        if d:
            rows, pairs = verify_rows(1, kv, d)
            self._clip_rows += sign * rows
            self._clip_pairs += sign * pairs
            self._clip_seqs += sign

    def _totals(self, step: int) -> None:
        """The step's decode rows, context and draft rows and pairs (what plan and SpecStep
        read), from the requests with all k drafts and the clipped ones."""
        k = self.spec.draft_tokens
        rows, pairs = verify_rows(self._full, self._full_ctx, k)
        self._n_dec = len(self._seqs)
        self._ctx_offset = self._ctx_sum - self._n_dec * step  # the base's plan reads it
        self._draft_rows = rows + self._clip_rows
        self.draft_pairs = pairs + self._clip_pairs
        self.drafting_seqs = self._full + self._clip_seqs

    # ------------------------------------------------------------ preemption

    def _preempt(self, seq: Seq, step: int) -> None:
        """A decoding request gives back its blocks and recomputes prompt + emitted tokens
        (the base class's tail, with its `computed` KV tokens written)."""
        if seq.idx not in self.prefilling:
            for i, s in enumerate(self._seqs):
                if s is seq:  # scheduled earlier in this step: take it out of the step
                    d = self._drafts.pop(i)
                    del self._seqs[i]
                    self._ctx_sum -= seq.computed
                    if d == self.spec.draft_tokens:
                        self._full -= 1
                        self._full_ctx -= seq.computed
                    else:
                        self._clip(seq.computed, d, -1)
                    self._totals(step)
                    break
        super()._preempt(seq, step)

    # ------------------------------------------------------------ completion

    def complete(self, step: int, end_s: float) -> list[Seq]:
        finished: list[Seq] = []
        self.emitted_tokens = 0
        if self._seqs:
            self._emit(step, end_s, finished)
        if self._chunks:
            self._complete_chunks(step, end_s, finished)
        return finished

    def _accepted(self) -> list[int]:
        """Accepted drafts of each request of the step (module docstring)."""
        drafts, a = self._drafts, self.spec.acceptance
        if a >= 1.0:
            return drafts
        if a <= 0.0:
            return [0] * len(drafts)
        u = self._rng.random(len(drafts))
        with np.errstate(divide="ignore"):  # u = 0: every draft accepted
            runs = np.floor(np.log(u) / self._log_a)
        return np.minimum(runs, drafts).astype(np.int64).tolist()  # type: ignore[no-any-return]

    def _emit(self, step: int, end_s: float, finished: list[Seq]) -> None:
        per_token_j = self.ledger.j_per_token(step)
        accepted = self._accepted()
        drafts = self._drafts
        self.verify_steps += len(drafts) - drafts.count(0)
        self.drafted += sum(drafts)
        self.accepted += sum(accepted)
        emitted = 0
        before = step - 1
        stride = self.trace_stride
        for seq, m in zip(self._seqs, accepted, strict=True):
            left = seq.spec.output_tokens - seq.generated
            n = m + 1 if m < left else left
            segs = seq.segments  # never empty: the prompt's step emitted a token
            if stride and seq.idx % stride == 0:
                first, last = segs[-1]
                if last == before:  # one more step of its range, the rest repeat this step
                    segs[-1] = (first, step)
                    if n > 1:
                        segs += [(step, step)] * (n - 1)
                else:
                    segs += [(step, step)] * n
            else:  # untraced: its first and last token's steps are all a record reads
                _last_step(segs, step)
            seq.generated += n
            seq.computed += n
            seq.energy_j += per_token_j  # its row's share of the step, as in plain decode
            emitted += n
            if n == left:
                self._release(seq, seq.own_blocks + seq.shared_blocks)
                seq.finish_s = end_s
                finished.append(seq)
        self._seqs, self._drafts = [], []
        self.emitted += emitted
        self.emitted_tokens += emitted

    def _prefill_done(self, seq: Seq, step: int, end_s: float, finished: list[Seq]) -> None:
        """The prompt's step samples its first token; the request then decodes speculatively
        (it holds the prompt's blocks, `computed` = its KV tokens)."""
        del self.prefilling[seq.idx]
        seq.generated += 1
        self.emitted_tokens += 1
        stride = self.trace_stride
        if stride and seq.idx % stride == 0:
            _append_tokens(seq.segments, step, 1)
        else:
            _last_step(seq.segments, step)
        if seq.first_token_s is None:
            seq.first_token_s = end_s
        self._publish_prefix(seq)
        if seq.generated >= seq.output_tokens:
            self._release(seq, seq.own_blocks + seq.shared_blocks)
            seq.finish_s = end_s
            finished.append(seq)

    def summary(self) -> dict[str, Any]:
        """The setting and what the run measured (the `spec_decode` key of `simulate --json`):
        accepted drafts and tokens per verification step (the latter vLLM's mean acceptance
        length, 1 + accepted / steps; both before the output-length clip) and the acceptance
        rate (accepted / drafted, as vllm:spec_decode_num_accepted_tokens / num_draft_tokens:
        (E - 1) / k in expectation, below the per-token acceptance a, since drafting stops at
        the first rejection)."""
        counts = (self.verify_steps, self.drafted, self.accepted, self.emitted)
        return spec_summary(self.spec, *counts, lookahead=self.lookahead)


def spec_summary(
    s: SpecDecode, steps: int, drafted: int, accepted: int, emitted: int, lookahead: int
) -> dict[str, Any]:
    """`SpecScheduler.summary` from its counts (one home: a fleet sums its members' counts)."""
    return {
        "method": s.method,
        "draft_tokens": s.draft_tokens,
        "acceptance": s.acceptance,
        "expected_tokens_per_step": s.tokens_per_step,
        "verify_steps": steps,
        "drafted_tokens": drafted,
        "accepted_tokens": accepted,
        "acceptance_rate": accepted / drafted if drafted else None,
        "accepted_tokens_per_step_mean": accepted / steps if steps else None,
        "tokens_per_step_mean": 1.0 + accepted / steps if steps else None,
        "emitted_decode_tokens": emitted,
        "lookahead_slots": lookahead,
    }


def spec_summary_of(sched: object) -> dict[str, Any] | None:
    """A member's `spec_decode` figures, None when its scheduler does not speculate."""
    return sched.summary() if isinstance(sched, SpecScheduler) else None


def fleet_spec_summary(parts: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The fleet's `spec_decode` figures: its members' counts summed (None: no speculation)."""
    members = [p["spec_decode"] for p in parts if "spec_decode" in p]
    if not members:
        return None
    first = members[0]
    spec = SpecDecode(first["method"], first["draft_tokens"], first["acceptance"])

    def total(key: str) -> int:
        return sum(int(m[key]) for m in members)

    steps, drafted = total("verify_steps"), total("drafted_tokens")
    accepted, emitted = total("accepted_tokens"), total("emitted_decode_tokens")
    return spec_summary(spec, steps, drafted, accepted, emitted, lookahead=first["lookahead_slots"])


def _append_tokens(segments: list[tuple[int, int]], step: int, n: int) -> None:
    """`n` tokens at `step` in a request's step ranges (state.py: a range holds one token per
    step): the first extends a range ending at the step before, the rest repeat the step."""
    if n <= 0:
        return
    if segments and segments[-1][1] == step - 1:
        segments[-1] = (segments[-1][0], step)
        n -= 1
    segments.extend([(step, step)] * n)


def _last_step(segments: list[tuple[int, int]], step: int) -> None:
    """An untraced request keeps its first token's step and its latest (result.py reads
    `segments[0][0]` and `segments[-1][1]`; its token times are not kept): O(1) memory."""
    if len(segments) > 1:
        segments[-1] = (step, step)
    else:
        segments.append((step, step))


class SpecStep:
    """The step function of a speculative run (module docstring): wraps the plain one."""

    def __init__(self, plain: StepFn, run: SpecRun, sched: SpecScheduler) -> None:
        self.plain = plain
        self.passes = run.draft_passes
        self.sched = sched
        self._uniform: StepFn = DecodeMemo(self._uniform_exact) if run.memo else self._uniform_exact

    def _uniform_exact(self, plan: StepPlan) -> tuple[float, float]:
        """A decode-only step whose n requests all verify k drafts."""
        n, ctx = plan.decode_seqs, plan.decode_context_tokens
        rows, pairs = verify_rows(n, ctx, self.sched.spec.draft_tokens)
        return self._priced(StepPlan(rows, pairs, n, n, ctx), n, ctx)

    def _priced(self, verify: StepPlan, n: int, ctx: int) -> tuple[float, float]:
        t, e = self.plain(verify)
        if self.passes and n:
            td, ed = self.plain(StepPlan(0, 0.0, 0, n, ctx))
            t, e = t + self.passes * td, e + self.passes * ed
        return t, e

    def __call__(self, plan: StepPlan) -> tuple[float, float]:
        s = self.sched
        n, ctx = plan.decode_seqs, plan.decode_context_tokens
        if not plan.prefill_tokens and n and s.uniform:
            return self._uniform(plan)
        verify = StepPlan(
            plan.prefill_tokens + s.draft_rows,
            plan.prefill_attn_pairs + s.draft_pairs,
            plan.prefill_seqs + s.drafting_seqs,
            n,
            ctx,
        )
        return self._priced(verify, n, ctx)


def spec_scheduler(
    run: SpecRun,
    scheduler: str,
    config: SchedulerConfig,
    pool: BlockPool,
    ledger: Ledger,
    step_fn: StepFn,
    seed: int,
    member: int = 0,
) -> tuple[SpecScheduler, StepFn]:
    """The scheduler and step function of a speculative run (api.run_workload's hook; a
    fleet's `member` > 0 draws its acceptances from a stream of its own, member 0 from the one
    a single replica uses, so a fleet of one is that replica)."""
    if scheduler != "continuous":
        raise ConfigError("spec_decode", run.spec.label(), "needs the continuous scheduler")
    if config.scheduling != VLLM_SCHEDULING:  # SpecScheduler follows vLLM V1's scheduler
        raise ConfigError(
            "spec_decode",
            run.spec.label(),
            f"simulated with vLLM's scheduler only (not {config.scheduling}'s prefill-first "
            "batches yet)",
        )
    stream = (seed, SPEC_STREAM) if member == 0 else (seed, SPEC_STREAM, member)
    rng = np.random.default_rng(stream)
    sched = SpecScheduler(config, pool, ledger, run.spec, rng)
    return sched, SpecStep(step_fn, run, sched)
