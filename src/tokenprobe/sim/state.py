"""What the simulator tracks: one `Seq` per request and the `Ledger` of executed steps.

Token times are not stored per token. Every output token appears at the end of an engine step, so
a request's tokens are a few *ranges of step indices* (`Seq.segments`: the step that finished its
prefill, then one decode step after another until it finishes or is preempted); the times come
from `Ledger.step_end_s` when a record is built. Energy works the same way: `Ledger.cum_j_per_token`
is the running sum over steps of (step energy / tokens in the step), so a decode range s..f costs
cum[f] - cum[s-1] joules and a prefill chunk of n tokens in step t costs n x (cum[t] - cum[t-1]).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field

from tokenprobe.workload import RequestSpec


class Seq:
    """The simulator's mutable state of one request (plain slots class: 100k of them are cheap).

    target: tokens the current prefill must compute (input, plus the tokens generated before a
        preemption: vLLM v1 recomputes them all); computed: prefill tokens done of `target`.
    generated: output tokens produced so far, as of the start of the current decode phase.
    dec_start: index of the first decode step of the current decode phase (-1: not decoding).
    own_blocks: KV blocks owned while prefilling (during decode derived from the step index).
    shared_blocks: pinned prefix blocks it uses but does not own.
    cached_tokens: prompt tokens its first admission found in the prefix cache (what a server
        reports as the request's cached prompt tokens); -1 until admitted.
    """

    __slots__ = (
        "arrival_s",
        "cached_tokens",
        "computed",
        "dec_start",
        "energy_j",
        "finish_s",
        "first_sched_s",
        "first_token_s",
        "generated",
        "idx",
        "own_blocks",
        "preemptions",
        "ready_s",
        "reject_reason",
        "seg_start",
        "segments",
        "shared_blocks",
        "spec",
        "target",
        "version",
    )

    def __init__(self, idx: int, spec: RequestSpec, arrival_s: float) -> None:
        self.idx = idx
        self.spec = spec
        self.arrival_s = arrival_s
        self.ready_s = arrival_s  # when it reached the scheduler (after the front end)
        self.target = spec.input_tokens
        self.computed = 0
        self.generated = 0
        self.dec_start = -1
        self.seg_start = -1
        self.own_blocks = 0
        self.shared_blocks = 0
        self.cached_tokens = -1
        self.version = 0
        self.preemptions = 0
        self.energy_j = 0.0
        self.first_sched_s: float | None = None
        self.first_token_s: float | None = None
        self.finish_s: float | None = None
        self.reject_reason: str | None = None
        self.segments: list[tuple[int, int]] = []

    @property
    def input_tokens(self) -> int:
        return self.spec.input_tokens

    @property
    def output_tokens(self) -> int:
        return self.spec.output_tokens


@dataclass(slots=True)
class Ledger:
    """Per executed step: its end time and the running energy per token (see module docstring).

    Index i is step i; `cum_j_per_token` has one extra leading 0 so that cum[i + 1] is the sum up
    to and including step i. `Engine._commit` appends each step's row (its one writer).
    """

    # arrays of doubles: 8 bytes a step where a list held a 24-byte float object and a pointer
    step_end_s: array[float] = field(default_factory=lambda: array("d"))
    cum_j_per_token: array[float] = field(default_factory=lambda: array("d", [0.0]))

    def j_per_token(self, step: int) -> float:
        return self.cum_j_per_token[step + 1] - self.cum_j_per_token[step]

    def range_j(self, first_step: int, last_step: int) -> float:
        """Energy of one token in every step first..last (inclusive); 0 for an empty range."""
        if last_step < first_step:
            return 0.0
        return self.cum_j_per_token[last_step + 1] - self.cum_j_per_token[first_step]

    def token_times_s(
        self, segments: list[tuple[int, int]], delivered: list[float] | None = None
    ) -> list[float]:
        """Token times of the step ranges: the steps' ends, or `delivered[step]` when given (the
        front end's delivery times)."""
        ends: Sequence[float] = self.step_end_s if delivered is None else delivered
        return [t for first, last in segments for t in ends[first : last + 1]]
