"""The discrete-event loop: arrivals and step completions on a heap, one engine step at a time.

The idea of microsoft/vidur's loop (a heapq of timed events popped in order; the clock only moves
forward to the popped event's time). Events at the same instant are all applied before the next
step is planned, so an offline batch (every arrival at t = 0) is seen whole by the first step, as
vLLM sees all requests that were added before it steps.

The GPU is either running one step (whose time and energy come from `step_fn`, the cost model) or
idle at `idle_power_w` until the next arrival. The power timeline has one point per step and per
idle spell, so total energy = sum(power x duration) over it, idle time included. With a `gap_fn`
(sim/gpu_gap.py) a step is two points, the engine's CPU slice (no kernel: not GPU-busy) and then
its kernels; `busy_s` counts only the kernels.

A request sent at t reaches the scheduler at t + `frontend_s` (`Efficiency.request_overhead_s`:
the serving front end's HTTP handling, chat template, tokenization and hand-off to the engine
process, plus the way back of the first chunk), so that latency adds to its TTFT and end-to-end
time but occupies no GPU step. With a `Frontend` (sim/frontend.py: the API-server processes as a
resource) a request reaches the scheduler when its process has done its work, and each step's
tokens reach the client `Frontend.lag_s[step]` after the step's end (records are built with it,
result.py); a closed-loop user sends the next request when the last token has arrived.

A scheduler holding admissions (`SchedulerConfig.batch_window_s`) sets `wake_s`, when its window
ends; an idle engine sets a wake-up event then, so that a lone held request is still served.

Conversations (`RequestSpec.turn` > 0, `workload.conversation`): a follow-up turn is not in the
arrival order; it arrives `think_s` after the request before it (its previous turn) finished or
was rejected. In closed loop a user starts its next conversation when the last turn is done.
"""

from __future__ import annotations

import gc
import heapq
import math
import struct
from array import array
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import overload

from tokenprobe.errors import TokenprobeError
from tokenprobe.sim.base import Scheduler, StepPlan
from tokenprobe.sim.frontend import Frontend
from tokenprobe.sim.gpu_gap import GapFn, split_step
from tokenprobe.sim.state import Ledger, Seq
from tokenprobe.workload import RequestSpec

StepFn = Callable[[StepPlan], tuple[float, float]]
"""A step's (time_s, energy_j over all GPUs of the replica): the cost model, or a stand-in."""
ProgressFn = Callable[[int, int], None]
"""Called now and then with (requests done or rejected, requests in the workload)."""

# The running step's end is not on the heap but in `Engine._done_s` (one step runs at a time);
# it is applied before the heap's events of the same instant, so the freed slots are seen by
# the arrivals of that instant.
_ARRIVAL = 1
_ADMIT = 2  # a sent request reaching the scheduler after the front end's latency
_WAKE = 3  # a batch window ends: plan again
_HELD = 4  # a data-parallel rank's dummy pass ends (sim/dpep.py)
_PROGRESS_EVERY_STEPS = 2000
_INF = math.inf


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a run piles up its small objects (timeline rows,
    heap entries, ledger floats, records): none of them is part of a reference cycle, yet the
    collector's passes over them took 1.2 of 8 CPU-s of benchmarks/sim_speed.py. It is enabled
    again afterwards if it was enabled before."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class SimulationError(TokenprobeError):
    """The simulator broke one of its own invariants (a bug, never bad input)."""


TimelineRow = tuple[float, int, int, int, float, int, int]
"""(t_s, batch_size, kv_blocks_used, queue_len, power_w, prefill_tokens, decode_seqs)."""


_ROW = 7  # values a point
# A point's values packed as doubles in one call and appended with `array.frombytes`: three times
# faster than `array.extend`, which parses every value on its own (ints convert exactly)
_ONE_POINT = struct.Struct(f"{_ROW}d").pack
_TWO_POINTS = struct.Struct(f"{2 * _ROW}d").pack


class TimelineRows(Sequence[TimelineRow]):
    """The points as `TimelineRow` tuples (a read-only view of `Timeline.data`)."""

    __slots__ = ("_data",)

    def __init__(self, data: array[float]) -> None:
        self._data = data

    def __len__(self) -> int:
        return len(self._data) // _ROW

    @overload
    def __getitem__(self, i: int) -> TimelineRow: ...
    @overload
    def __getitem__(self, i: slice) -> list[TimelineRow]: ...
    def __getitem__(self, i: int | slice) -> TimelineRow | list[TimelineRow]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        t, b, k, q, p, pre, dec = self._data[i * _ROW : (i + 1) * _ROW]
        return (t, int(b), int(k), int(q), p, int(pre), int(dec))

    def __iter__(self) -> Iterator[TimelineRow]:
        it = iter(self._data)
        for t, b, k, q, p, pre, dec in zip(it, it, it, it, it, it, it, strict=True):
            yield (t, int(b), int(k), int(q), p, int(pre), int(dec))


@dataclass(slots=True)
class Timeline:
    """The power timeline, point i holding from rows[i] to rows[i + 1]. Kept flat in one array
    of doubles, 7 a point (56 bytes, where a tuple of them took ~190: a 10^6-request fleet has
    millions of points); the counts are integers below 2^53, so they read back exact."""

    data: array[float] = field(default_factory=lambda: array("d"))

    @property
    def rows(self) -> TimelineRows:
        return TimelineRows(self.data)

    def add(self, t_s: float, plan: StepPlan | None, kv: int, queue: int, power_w: float) -> None:
        if plan is None:
            self.point(t_s, 0, kv, queue, power_w, 0, 0)
        else:
            batch = plan.prefill_seqs + plan.decode_seqs
            self.point(t_s, batch, kv, queue, power_w, plan.prefill_tokens, plan.decode_seqs)

    def point(
        self, t_s: float, batch: int, kv: int, queue: int, power_w: float, pre: int, dec: int
    ) -> None:
        """Append a point; one at the same instant as the last replaces it (zero length)."""
        data = self.data
        if data and data[-_ROW] == t_s:
            del data[-_ROW:]
        data.frombytes(_ONE_POINT(t_s, batch, kv, queue, power_w, pre, dec))

    def __len__(self) -> int:
        return len(self.data) // _ROW


@dataclass(slots=True)
class EngineResult:
    seqs: list[Seq]
    ledger: Ledger
    timeline: Timeline
    end_s: float
    steps: int
    step_energy_j: float
    idle_energy_j: float
    busy_s: float
    frontend_s: float = 0.0
    frontend: Frontend | None = None


class Engine:
    """Runs one workload through one scheduler (see the module docstring)."""

    def __init__(
        self,
        scheduler: Scheduler,
        ledger: Ledger,
        step_fn: StepFn,
        idle_power_w: float,
        progress: ProgressFn | None = None,
        frontend_s: float = 0.0,
        frontend: Frontend | None = None,
        gap_fn: GapFn | None = None,
    ) -> None:
        self.sched = scheduler
        self.gap_fn = gap_fn  # the step's CPU slice, not GPU-busy (sim/gpu_gap.py)
        self.frontend_s = frontend_s
        self.frontend = frontend
        self.ledger = ledger
        self._step_ends, self._cum_j = ledger.step_end_s, ledger.cum_j_per_token  # (_commit)
        self.step_fn = step_fn
        self.idle_power_w = idle_power_w
        self.progress = progress
        self.timeline = Timeline()
        self._heap: list[tuple[float, int, int, int]] = []
        self._done_s = math.inf  # when the running step ends (inf: none runs)
        self._order = 0
        self._sent: list[RequestSpec] = []  # what `submit` was given (an opened engine)
        self._feeds = False
        self.clock_s = 0.0
        self.step = 0
        self.busy = False
        self.step_energy_j = 0.0
        self.idle_energy_j = 0.0
        self.busy_s = 0.0
        self.done = 0
        # requests sent and neither finished nor rejected (what a router counts): an attribute
        # kept up to date, since a fleet's router reads every replica's for every request
        self.outstanding = 0

    def _push(self, t_s: float, kind: int, payload: int) -> None:
        self._order += 1
        heapq.heappush(self._heap, (t_s, kind, self._order, payload))

    def run(self, requests: Sequence[RequestSpec], concurrency: int | None = None) -> EngineResult:
        """Simulate until every request finished or was rejected.

        Open loop: request i arrives at requests[i].arrival_s. Closed loop (`concurrency` N): the
        first N arrive at 0 and each finish or rejection sends the next request at that instant.
        """
        self.requests = requests
        self.outstanding = len(requests)
        self.seqs: list[Seq | None] = [None] * len(requests)
        self.concurrency = concurrency
        self._next = 0
        self._feeds = True  # an arrival pushes the next one (open loop)
        for _ in range(min(concurrency or 1, len(requests))):
            self._push_next_arrival(0.0)
        self.timeline.add(0.0, None, 0, 0, self.idle_power_w)
        with gc_paused():
            self._advance(math.inf)
        return self._result()

    def _push_next_arrival(self, now_s: float) -> None:
        i, requests = self._next, self.requests
        while i < len(requests) and requests[i].turn:  # follow-ups come after their turn before
            i += 1
        self._next = i
        if i >= len(requests):
            return
        self._next += 1
        t = now_s if self.concurrency else self.requests[i].arrival_s
        self._push(max(t, now_s), _ARRIVAL, i)

    def _advance(self, t_s: float, inclusive: bool = False, start: bool = True) -> float:
        """Apply every event before `t_s` (at or before it when `inclusive`), one instant at a
        time: the running step's end first, then the heap's events of that instant; with
        `start`, plan and start a step whenever the engine is idle after an instant. Returns
        the next event's time (`next_event_s()`; inf: none).

        The hot loop of every run (10^5-10^6 steps; a fleet's replica runs it once or twice per
        arrival): the step's end and the start of the next step are written out here rather
        than called."""
        heap, pop, inf = self._heap, heapq.heappop, math.inf
        sched, fe = self.sched, self.frontend
        while True:
            done_s = self._done_s
            t = heap[0][0] if heap and heap[0][0] < done_s else done_s
            if t > t_s or (t == t_s and not inclusive) or t == inf:
                return t
            clock_s = self.clock_s
            if t < clock_s:
                raise SimulationError(f"clock would go back from {clock_s} to {t}")
            if not self.busy and t > clock_s:
                self.idle_energy_j += self.idle_power_w * (t - clock_s)
            self.clock_s = t
            if done_s == t:  # the running step ends
                self._done_s = inf
                finished = sched.complete(self.step, t)
                lag = 0.0 if fe is None else fe.stream(t, sched.emitted_tokens)
                self.step += 1
                self.busy = False
                for seq in finished:
                    self._finished(seq.idx, lag)
                if self.progress is not None and self.step % _PROGRESS_EVERY_STEPS == 0:
                    self.progress(self.done, len(self.requests))
            while heap and heap[0][0] == t:
                _, kind, _, payload = pop(heap)
                if kind == _ARRIVAL:
                    self._arrive(payload)
                elif kind == _ADMIT:
                    self._admit(payload)
                elif kind == _HELD:
                    self.busy = False
                # _WAKE: nothing to apply; the loop plans the next step
            if start and not self.busy:  # plan, price and start the next step
                if fe is not None and fe.shares_engine and fe.free_s[0] > t:
                    self._engine_waits(t)
                    continue
                plan = sched.plan(self.step, t)
                if plan is None:
                    self._idle_point(t)
                    continue
                time_s, energy_j = self.step_fn(plan)
                self._commit(plan, t, time_s, energy_j)

    def _arrive(self, i: int) -> None:
        self.seqs[i] = Seq(i, self.requests[i], self.clock_s)
        if self._feeds and not self.concurrency and not self.requests[i].turn:
            self._push_next_arrival(self.clock_s)
        if self.frontend is not None:
            ready = self.frontend.admit(i, self.requests[i].input_tokens, self.clock_s)
            self._push(ready, _ADMIT, i)
        elif self.frontend_s > 0:
            self._push(self.clock_s + self.frontend_s, _ADMIT, i)
        else:
            self._admit(i)

    def _admit(self, i: int) -> None:
        seq = self.seqs[i]
        assert seq is not None
        reason = self.sched.add(seq, self.clock_s)
        if reason is not None:
            seq.reject_reason = reason
            self._finished(i)

    def _finished(self, i: int, delay_s: float = 0.0) -> None:
        """Request i done (finished or rejected); its last token reaches the client `delay_s`
        after now (the front end's streaming lag). Its conversation's next turn follows after
        its think time from then; else, in closed loop, its user sends the next request then."""
        self.done += 1
        self.outstanding -= 1
        follow = i + 1
        if follow < len(self.requests) and self.requests[follow].turn:
            self._push(self.clock_s + delay_s + self.requests[follow].think_s, _ARRIVAL, follow)
        elif self.concurrency:
            self._push_next_arrival(self.clock_s + delay_s)

    def _engine_waits(self, now: float) -> None:
        """One process runs HTTP, streaming and the engine (vLLM V0): the GPU waits for it."""
        fe, sched = self.frontend, self.sched
        assert fe is not None
        self.timeline.add(now, None, sched.pool.used_blocks, sched.num_waiting, self.idle_power_w)
        self._push(fe.free_s[0], _WAKE, 0)

    def _idle_point(self, now: float) -> None:
        """Nothing to run: an idle point, and a wake-up when a batch window ends."""
        sched = self.sched
        self.timeline.add(now, None, sched.pool.used_blocks, sched.num_waiting, self.idle_power_w)
        wake = sched.wake_s
        if wake is not None and wake > now:
            self._push(wake, _WAKE, 0)

    def _commit(self, plan: StepPlan, now: float, time_s: float, energy_j: float) -> None:
        """Run the planned step for `time_s`, spending `energy_j` (the hot path)."""
        if not (0 < time_s < _INF and energy_j >= 0):
            raise SimulationError(f"step time {time_s} s, energy {energy_j} J for {plan}")
        sched, fe = self.sched, self.frontend
        kv, queue = sched.pool.used_blocks, sched.num_waiting
        end_s = now + time_s
        if fe is not None and fe.shares_engine:
            fe.run_engine_step(now, end_s)
        prefill_tokens, _, prefill_seqs, decode_seqs, _ = plan
        gap_fn = self.gap_fn
        if gap_fn is None:
            gap_s, gap_w, power_w = 0.0, 0.0, energy_j / time_s
        else:  # the CPU slice first, then the kernels (sim/gpu_gap.py)
            gap_s, gap_w, power_w, energy_j = split_step(time_s, energy_j, *gap_fn(plan))
        # the ledger's row of the step (its one writer; once per step, so no call): its end and
        # the running energy per token, cum[i + 1] = cum[i] + step i's J per token
        self._step_ends.append(end_s)
        cum, tokens = self._cum_j, prefill_tokens + decode_seqs
        cum.append(cum[-1] + (energy_j / tokens if tokens else 0.0))
        data = self.timeline.data  # Timeline.point inlined: 7 values a point
        if data[-_ROW] == now:  # replaces a zero-length idle point
            del data[-_ROW:]
        batch = prefill_seqs + decode_seqs
        if gap_s <= 0:  # the kernels only
            data.frombytes(_ONE_POINT(now, batch, kv, queue, power_w, prefill_tokens, decode_seqs))
        elif gap_s < time_s:  # the CPU slice, then the kernels
            pre, dec, kernels_s = prefill_tokens, decode_seqs, now + gap_s
            data.frombytes(_TWO_POINTS(now, batch, kv, queue, gap_w, pre, dec,
                                       kernels_s, batch, kv, queue, power_w, pre, dec))  # fmt: skip
        else:  # all CPU slice
            data.frombytes(_ONE_POINT(now, batch, kv, queue, gap_w, prefill_tokens, decode_seqs))
        self.step_energy_j += energy_j
        self.busy_s += time_s - gap_s
        self.busy = True
        self._done_s = end_s

    # ---------------------------------------------------------------- a cluster's replica
    # (sim/cluster.py): an engine opened empty takes requests one by one as its router sends
    # them, and is advanced to each arrival's instant before the router looks at it.

    def open(self) -> None:
        """Start empty, open loop, for requests `submit`ted later."""
        self.requests = self._sent = []
        self.outstanding = 0
        self.seqs = []
        self.concurrency = None
        self._next = 0
        self._feeds = False  # each arrival is pushed by `submit`, not by the one before
        self.timeline.add(0.0, None, 0, 0, self.idle_power_w)

    def submit(self, spec: RequestSpec) -> bool:
        """A request arriving at `spec.arrival_s` (not before the engine's clock); False when
        its arrival was applied at once and `next_event_s()` did not move.

        The engine has applied every event before the arrival (the fleet's loop advanced it).
        Mid-step, with no other event by the arrival's instant, `_advance` would apply the
        arrival alone at that instant and plan nothing (the running step's end comes later): so
        it is applied here, without its trip through the heap (once per request of a fleet,
        most of them sent to a busy replica). Otherwise it is queued, so that the events and
        arrivals of one instant are applied together before a step is planned."""
        sent = self._sent
        i = len(sent)
        sent.append(spec)
        self.outstanding += 1
        self.seqs.append(None)
        self._next = i + 1
        t, heap = spec.arrival_s, self._heap
        if self.busy and self.clock_s <= t < self._done_s and not (heap and heap[0][0] <= t):
            self.clock_s = t  # (busy: no idle energy accrues)
            self._arrive(i)
            return False
        self._push(max(t, self.clock_s), _ARRIVAL, i)
        return True

    def forget_requests(self) -> None:
        """Drop the per-request state (Seqs, specs) once the records are built from it."""
        self.seqs = []
        self.requests = self._sent = []

    def next_event_s(self) -> float:
        heap, done_s = self._heap, self._done_s
        return heap[0][0] if heap and heap[0][0] < done_s else done_s

    def run_until(self, t_s: float) -> float:
        """Apply every event before `t_s`; events at `t_s` wait for the arrivals of that
        instant, so they are applied together, as in `run`. Returns `next_event_s()`."""
        return self._advance(t_s)

    # ------------------------------------------------- a data-parallel attention rank
    # (sim/dpep.py): the ranks step together, so their gang plans, prices and starts each
    # step; a rank never starts one on its own.

    def apply_through(self, t_s: float) -> None:
        """Apply every event at or before `t_s` and stand at `t_s`, planning nothing."""
        self._advance(t_s, inclusive=True, start=False)
        if t_s > self.clock_s:
            if not self.busy:
                self.idle_energy_j += self.idle_power_w * (t_s - self.clock_s)
            self.clock_s = t_s

    def plan_step(self) -> StepPlan | None:
        """The scheduler's plan for a step starting now (None: nothing to run)."""
        plan = self.sched.plan(self.step, self.clock_s)
        if plan is None:
            self._idle_point(self.clock_s)
        return plan

    def start_planned(self, plan: StepPlan, time_s: float, energy_j: float) -> None:
        """Run `plan` from now for the gang's `time_s`, this rank spending `energy_j`."""
        self._commit(plan, self.clock_s, time_s, energy_j)

    def hold(self, end_s: float, power_w: float) -> None:
        """Nothing of its own to run while the other ranks step: a dummy pass until `end_s`
        at `power_w` (vLLM's `execute_dummy_batch`). It serves no request, so its energy counts
        with the idle energy (spread over the tokens served) and its time is not busy time."""
        now, sched = self.clock_s, self.sched
        self.timeline.add(now, None, sched.pool.used_blocks, sched.num_waiting, power_w)
        self.idle_energy_j += power_w * (end_s - now)
        self.busy = True  # no idle power accrues until the pass ends
        self._push(end_s, _HELD, 0)

    def finish(self) -> EngineResult:
        """Run to the end (every submitted request finished or rejected)."""
        self.run_until(math.inf)
        return self._result()

    def _result(self) -> EngineResult:
        seqs = [s for s in self.seqs if s is not None]
        stuck = [s.idx for s in seqs if s.finish_s is None and s.reject_reason is None]
        if len(seqs) != len(self.requests) or stuck:
            raise SimulationError(f"requests neither finished nor rejected: {stuck[:10]}")
        if self.progress is not None:
            self.progress(self.done, len(self.requests))
        if self.frontend is not None and self.frontend.done_s > self.clock_s:
            # the last tokens are still being streamed: the run lasts until they are out
            self.idle_energy_j += self.idle_power_w * (self.frontend.done_s - self.clock_s)
            self.clock_s = self.frontend.done_s
        return EngineResult(
            seqs=seqs,
            ledger=self.ledger,
            timeline=self.timeline,
            end_s=self.clock_s,
            steps=self.step,
            step_energy_j=self.step_energy_j,
            idle_energy_j=self.idle_energy_j,
            busy_s=self.busy_s,
            frontend_s=self.frontend_s,
            frontend=self.frontend,
        )
