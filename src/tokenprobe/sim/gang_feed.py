"""The requests that reach data-parallel attention ranks (sim/dpep.py): open or closed loop.

Open loop: the workload's requests at their drawn arrival times (`cluster.fleet_requests`).

Closed loop (`Arrival("closed", concurrency=C)`, sglang.bench_serving's `--max-concurrency C`
with `--request-rate inf`): C users, each sending its next request the instant its last one
ends (finished or rejected), whichever rank served it. The first C are sent at t = 0; every
finish at time t releases the next request of the list at t. The gang's router (round robin for
SGLang's DataParallelController) places each one when it is sent, so a user's successive
requests may land on different ranks: bench_serving keeps no affinity, and the requests of one
closed-loop user are independent single-turn prompts. With fixed lengths the users of one
wave finish in the same step and come back together: the wave that SGLang 0.4's dstack runs
show (TTFT many prefills long at low concurrency, decode undisturbed: sim/sglang_dp.py).
Conversations (follow-up turns) stay open-loop-only, as for replicas.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from tokenprobe.errors import ConfigError
from tokenprobe.sim.cluster import Router, fleet_requests
from tokenprobe.sim.engine import Engine
from tokenprobe.workload import RequestSpec, Workload


class Member(Protocol):
    """What the feed routes to: a rank (an Engine) or a DP group of ranks (sim/dpep_fleet.py)."""

    @property
    def outstanding(self) -> int: ...

    def submit(self, spec: RequestSpec) -> object: ...  # (an Engine says if it queued it)


class GangFeed:
    """Requests sent to the ranks, in order; closed loop releases one per finish."""

    def __init__(self, workload: Workload, seed: int) -> None:
        self.concurrency = workload.arrival.concurrency if workload.arrival.closed_loop else 0
        if not self.concurrency:
            self.requests = fleet_requests(workload, seed)
            self.release_s: deque[float] = deque()
        else:
            self.requests = workload.generate(np.random.default_rng(seed))
            if any(spec.turn for spec in self.requests):
                raise ConfigError(
                    "conversation", "turns > 1", "single-turn requests with --dp in closed loop"
                )
            self.release_s = deque([0.0] * min(self.concurrency, len(self.requests)))
        self.i = 0  # the next request to send
        self.done = 0  # finishes seen (closed loop: each released the next request)

    @property
    def next_s(self) -> float:
        """When the next request is sent (inf: none left, or none released yet)."""
        if self.i >= len(self.requests):
            return math.inf
        if not self.concurrency:
            return self.requests[self.i].arrival_s
        return self.release_s[0] if self.release_s else math.inf

    def route(
        self, members: Sequence[Member], router: Router, until_s: float, *, inclusive: bool
    ) -> None:
        """Send the requests due before `until_s` (or at it, `inclusive`), each to the member (a
        rank, or a DP group) the router picks from the members' outstanding requests."""
        while True:
            t = self.next_s
            if not (t < until_s or (inclusive and t == until_s)):
                return
            spec = self.requests[self.i]
            if self.concurrency:
                self.release_s.popleft()
                spec = spec._replace(arrival_s=t)
            self.i += 1
            members[router.pick(spec, [m.outstanding for m in members])].submit(spec)

    def finished(self, engines: Sequence[Engine], at_s: float) -> None:
        """Closed loop: each request the ranks finished since the last call releases the next
        one at `at_s` (the end of the step that finished it)."""
        if not self.concurrency:  # open loop: arrivals are the workload's
            return
        done = sum(e.done for e in engines)
        self.release_s.extend([at_s] * (done - self.done))
        self.done = done
