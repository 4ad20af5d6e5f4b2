"""The serving front end as a resource: API-server processes in front of the engine (issue 19).

vLLM V1 serves HTTP from `--api-server-count` processes (default 1), each one single-threaded
asyncio loop that, for every request, parses HTTP and JSON, applies the chat template and
tokenizes the prompt before handing it to the engine-core process, and, for every token the
engine returns, detokenizes it (AsyncLLM's output handler) and writes its SSE chunk
(vllm-project/vllm@00080ee1:vllm/v1/engine/async_llm.py; the costs and their sources:
`tokenprobe.cost.HostModel`, the one home of those constants; the chat template's rendering has
no figure of its own there yet, so the per-request work is a lower bound). So:

- request i is served by process i mod N (round robin: the kernel spreads connections over the
  processes' shared listening socket; a hash is as blind to load as round robin). Its CPU work
  `HostModel.admission_cpu_s` starts when that process is free (FIFO) and the request reaches
  the engine's waiting queue when the work is done, plus whatever of the fitted unloaded
  front-end latency (`Efficiency.request_overhead_s`, which was measured with that work inside
  it) the work does not already account for: max(0, request_overhead_s - work);
- the tokens a step emits cost `HostModel.token_cpu_s` each, spread evenly over the processes
  (every process holds ~1/N of the running requests under round robin; the fluid split is the
  one approximation), queued FIFO behind the work already there; the step's tokens reach the
  client at the mean completion time of that work (`lag_s[step]` after the step's end).

Each process is a single-server FIFO queue written as Lindley's recursion (start = max(free,
arrival), free = start + work), so it needs no events of its own: O(N) per engine step and O(1)
per request. When the processes saturate, requests queue in front of the engine and the rate
stops rising; vLLM V1's engine core keeps stepping what it holds, so the GPU runs small batches
at low power rather than idling (the seed's "throughput will not rise").

`shares_engine`: the engine's step loop runs in the one API-server process, as in vLLM V0
before the OpenAI server moved to a process of its own (vllm-project/vllm#580: "On 1xA100 Llama
13B, the `LLM` class reaches 90~100% GPU utilization, while the API server can only utilize
50%"; closed as "addressed by moving online server to another process"). A step then starts
only when the process has finished its queued HTTP and streaming work, and holds the process
(the step call blocks the event loop) until it ends: the GPU idles while the CPU serves the
front end, which is the seed's "GPU at 50 %". One process only.

Idle spells of the processes (a process free before its next work arrives) are kept as
(from, to) pairs, nothing per busy item, so a saturated front end costs nothing to account; the
run's host samples (`records.HostSample.process_cpu_util`: the mean over the processes of each
one's share of its core) are computed from them at the end, per window.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from tokenprobe.cost import HostModel, check_processes
from tokenprobe.errors import ConfigError
from tokenprobe.records import HostSample

MAX_SAMPLES = 400  # host samples of a run (windows)
MIN_WINDOW_S = 0.01


class Frontend:
    """N API-server processes as FIFO single servers (module docstring). Mutable, one per run."""

    __slots__ = (
        "_admission",
        "_cache",
        "_idle_from",
        "_idle_to",
        "busy_s",
        "free_s",
        "lag_s",
        "latency_s",
        "processes",
        "ready_s",
        "shares_engine",
        "token_s",
        "wait_s",
    )

    def __init__(
        self,
        processes: int,
        admission_cpu_s: Callable[[int], float],
        token_cpu_s: float,
        latency_s: float = 0.0,
        shares_engine: bool = False,
    ) -> None:
        self.processes = check_processes(processes)
        if shares_engine and processes != 1:
            raise ConfigError(
                "api_server_processes", processes, "1 when the engine runs in the API server"
            )
        self.shares_engine = shares_engine
        self._admission = admission_cpu_s
        self._cache: dict[int, float] = {}
        self.token_s = token_cpu_s
        self.latency_s = latency_s
        self.free_s = [0.0] * processes
        self.busy_s = 0.0
        self.lag_s: list[float] = []  # per engine step: token delivery after the step's end
        self.wait_s: dict[int, float] = {}  # request index -> wait for its process
        self.ready_s: dict[int, float] = {}  # request index -> handed to the engine
        self._idle_from: list[float] = []
        self._idle_to: list[float] = []

    @classmethod
    def from_host(
        cls,
        host: HostModel,
        processes: int,
        model_name: str,
        *,
        cpu_core_speed: float = 1.0,
        latency_s: float = 0.0,
        shares_engine: bool = False,
    ) -> Frontend:
        """The front end of `host`'s cost model on cores `cpu_core_speed` times the reference."""
        token_s = host.token_cpu_s(model_name) / cpu_core_speed
        return cls(
            processes,
            lambda n: host.admission_cpu_s(n, model_name) / cpu_core_speed,
            token_s,
            latency_s,
            shares_engine,
        )

    def admit(self, i: int, input_tokens: int, now_s: float) -> float:
        """Request i sent at now_s: when it reaches the engine's waiting queue."""
        work = self._cache.get(input_tokens)
        if work is None:
            work = self._cache[input_tokens] = self._admission(input_tokens)
        p = i % self.processes
        start = self.free_s[p]
        if start < now_s:
            self._idle_from.append(start)
            self._idle_to.append(now_s)
            start = now_s
        self.free_s[p] = done = start + work
        self.busy_s += work
        self.wait_s[i] = start - now_s
        ready = done + max(0.0, self.latency_s - work)
        self.ready_s[i] = ready
        return ready

    def stream(self, now_s: float, tokens: int) -> float:
        """A step ending at now_s emitted `tokens`: record and return their delivery lag."""
        c, n, free = self.token_s, self.processes, self.free_s
        if n == 1:  # the hot path of the default front end: no loop
            start = free[0]
            if start < now_s:
                self._idle_from.append(start)
                self._idle_to.append(now_s)
                start = now_s
            work = tokens * c
            free[0] = start + work
            self.busy_s += work
            lag = start - now_s + (tokens + 1) * c / 2 if tokens > 0 else 0.0
            self.lag_s.append(lag)
            return lag
        share = tokens / n
        work = share * c
        starts = 0.0
        for p in range(n):
            start = free[p]
            if start < now_s:
                self._idle_from.append(start)
                self._idle_to.append(now_s)
                start = now_s
            free[p] = start + work
            starts += start
        self.busy_s += n * work
        lag = starts / n - now_s + (share + 1.0) * c / 2 if tokens > 0 else 0.0
        self.lag_s.append(lag)
        return lag

    def run_engine_step(self, start_s: float, end_s: float) -> None:
        """`shares_engine`: the process runs an engine step from start_s (when it is free) to
        end_s; work arriving meanwhile waits for its end."""
        if self.free_s[0] < start_s:
            self._idle_from.append(self.free_s[0])
            self._idle_to.append(start_s)
        self.free_s[0] = end_s
        self.busy_s += end_s - start_s

    @property
    def done_s(self) -> float:
        """When the last queued front-end work ends."""
        return max(self.free_s)

    def host_samples(self, end_s: float) -> list[HostSample]:
        """The processes' mean utilization per window of [0, end_s] (at most MAX_SAMPLES)."""
        if end_s <= 0:
            return []
        windows = max(1, min(MAX_SAMPLES, math.ceil(end_s / MIN_WINDOW_S)))
        edges = np.linspace(0.0, end_s, windows + 1)
        lo = np.array([*self._idle_from, *self.free_s])  # each process idles after its last work
        hi = np.array([*self._idle_to, *([end_s] * self.processes)])
        idle = np.diff(_idle_before(edges, lo, np.maximum(lo, hi)))
        span = np.diff(edges) * self.processes
        util = np.clip(1.0 - idle / span, 0.0, 1.0)
        return [
            HostSample(t_s=float(t), process_cpu_util=float(u))
            for t, u in zip(edges[:-1], util, strict=True)
        ]


def _idle_before(t: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Sum over spells [lo, hi) of their overlap with [0, t), at each t: the spells ended by t
    count whole, those under way count t - lo (sorted sums, O((spells + t) log spells))."""
    by_lo = np.sort(lo)
    cum_lo = np.concatenate(([0.0], np.cumsum(by_lo)))
    order = np.argsort(hi, kind="stable")
    by_hi, lo_by_hi = hi[order], lo[order]
    cum_len = np.concatenate(([0.0], np.cumsum(by_hi - lo_by_hi)))
    cum_lo_by_hi = np.concatenate(([0.0], np.cumsum(lo_by_hi)))
    started = np.searchsorted(by_lo, t, side="left")  # lo < t
    ended = np.searchsorted(by_hi, t, side="right")  # hi <= t
    under_way = (started * t - cum_lo[started]) - (ended * t - cum_lo_by_hi[ended])
    return np.asarray(cum_len[ended] + under_way)
