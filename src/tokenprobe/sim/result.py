"""A finished simulation as records, timeline, energy accounting and the `--json` dictionary.

Records: one RequestRecord per request (sent_s = arrival at the server; scheduled_s the same;
queue_s = first scheduling - arrival; extra: energy_j (its share of the step energy, by tokens
in each step), preemptions). Rejected requests carry error_kind "rejected_too_long" and the reason.
Every token time is kept for at most `trace_requests` requests (evenly spaced by index); the
others keep first/finish/counts only, so TTFT, TPOT and E2E cover every request and ITL covers
the traced ones (`itl_traced_requests` in the output says how many).

Energy (all GPUs of the replica): each step's energy from the cost model plus idle power between
steps. A step's energy is split between input and output by its tokens (prefill tokens vs decode
tokens); idle energy is split in the same proportion as the step energy. So
joules_per_input_token = (prefill + its idle share) / input tokens and joules_per_output_token
likewise, while `joules_per_token_all_in` charges everything to output tokens (the seed's
"kWh per million tokens", and the estimator's field of the same name).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any

import numpy as np

from tokenprobe.metrics import summarize
from tokenprobe.records import RequestRecord, Run, TimelinePoint, write_run
from tokenprobe.sim.energy_basis import basis_figures
from tokenprobe.sim.engine import EngineResult, gc_paused
from tokenprobe.sim.frontend import Frontend
from tokenprobe.sim.kv import BlockPool
from tokenprobe.units import JOULES_PER_KWH, MEGA
from tokenprobe.workload import RequestSpec

REJECTED = "rejected_too_long"
_TOKEN_TIMES, _ERROR_KIND = attrgetter("token_times_s"), attrgetter("error_kind")


def unserved_record(spec: RequestSpec, arrival_s: float, kind: str, why: str) -> RequestRecord:
    """A request the simulator never served, kept as data (its arrival, no tokens, `kind` and
    `why` as its error), as a benchmark keeps a failed request."""
    return RequestRecord(
        request_id=spec.request_id,
        scheduled_s=arrival_s,
        sent_s=arrival_s,
        first_token_s=None,
        finish_s=None,
        input_tokens=spec.input_tokens,
        output_tokens=0,
        error_kind=kind,
        error_message=why,
        token_count_source="sim",
    )


RECORD_FIELDS = (
    "request_id", "scheduled_s", "sent_s", "first_token_s", "finish_s", "input_tokens",
    "output_tokens", "token_times_s", "queue_s", "error_kind", "error_message",
    "token_count_source", "extra", "frontend_wait_s",
)  # fmt: skip
"""RequestRecord's fields in the order `build_records` passes them."""

_NEW = object.__new__
(_S0, _S1, _S2, _S3, _S4, _S5, _S6, _S7, _S8, _S9, _S10, _S11, _S12,
 _S13) = (RequestRecord.__dict__[name].__set__ for name in RECORD_FIELDS)  # fmt: skip


def new_record(
    request_id: str, scheduled_s: float, sent_s: float, first_token_s: float | None,
    finish_s: float | None, input_tokens: int, output_tokens: int, token_times_s: list[float],
    queue_s: float | None, error_kind: str | None, error_message: str | None,
    token_count_source: str, extra: dict[str, float | str], frontend_wait_s: float | None,
) -> RequestRecord:  # fmt: skip
    """`RequestRecord(...)` of every field, positional, made without the frozen dataclass's
    `__init__`, which sets each field through `object.__setattr__` (half of `build_records`' time
    at 10^6 records): its slots' own descriptors set them, twice as fast. RequestRecord converts
    and checks nothing on construction (no `__post_init__`), so the object is the one `__init__`
    makes (tests/sim/test_records_order.py compares them)."""
    r = _NEW(RequestRecord)
    _S0(r, request_id), _S1(r, scheduled_s), _S2(r, sent_s), _S3(r, first_token_s)
    _S4(r, finish_s), _S5(r, input_tokens), _S6(r, output_tokens), _S7(r, token_times_s)
    _S8(r, queue_s), _S9(r, error_kind), _S10(r, error_message), _S11(r, token_count_source)
    _S12(r, extra), _S13(r, frontend_wait_s)
    return r


def trace_stride(requests: int, trace_requests: int) -> int:
    """Every stride-th request (by index) keeps its token times: `trace_requests` of them,
    evenly spaced (module docstring); 0 when none does."""
    return max(1, -(-requests // trace_requests)) if trace_requests > 0 else 0


def build_records(
    result: EngineResult, trace_requests: int, prefix_caching: bool = False
) -> list[RequestRecord]:
    """One record per request; with `prefix_caching`, each says the prompt tokens its first
    admission found cached (`server_cached_tokens`, as a server's usage block does).

    One loop with the run's constants as locals (10^5-10^6 records a run: a call per record
    and its `extra` cost a fifth of the build); records positional, in RequestRecord's field
    order (RECORD_FIELDS, checked by tests/sim/test_records_order.py), a third faster than by
    keyword."""
    stride = trace_stride(len(result.seqs), trace_requests)
    fe, frontend_s = result.frontend, result.frontend_s
    delivered: list[float] = []  # with a front end: when each step's tokens reach the client
    if fe is not None:
        delivered = [end + lag for end, lag in zip(result.ledger.step_end_s, fe.lag_s, strict=True)]
    ends = delivered if fe is not None else None
    token_times_s = result.ledger.token_times_s
    out: list[RequestRecord] = []
    append = out.append
    with gc_paused():
        for i, seq in enumerate(result.seqs):
            spec = seq.spec
            if seq.reject_reason is not None:
                append(unserved_record(spec, seq.arrival_s, REJECTED, seq.reject_reason))
                continue
            arrival_s, first_s, finish_s = seq.arrival_s, seq.first_token_s, seq.finish_s
            # waiting for a slot starts once the front end has handed the request over
            ready_s = arrival_s + frontend_s if fe is None else seq.ready_s
            times = token_times_s(seq.segments, ends) if stride and i % stride == 0 else []
            wait_s = None
            if fe is not None:  # tokens reach the client after the API-server process streamed
                wait_s = fe.wait_s.get(seq.idx)
                if seq.segments:
                    first_s = delivered[seq.segments[0][0]]
                    finish_s = delivered[seq.segments[-1][1]]
            extra: dict[str, float | str] = {
                "energy_j": seq.energy_j,
                "preemptions": float(seq.preemptions),
            }
            if prefix_caching:  # the key a measured record has from the server's usage block
                extra["server_cached_tokens"] = float(max(seq.cached_tokens, 0))
            if spec.prefix_tokens:  # as bench records it: the replay keeps the groups apart
                extra["prefix_group"] = float(spec.prefix_group)
            append(
                new_record(
                    spec.request_id,
                    arrival_s,  # scheduled_s
                    arrival_s,  # sent_s
                    first_s,  # first_token_s
                    finish_s,
                    spec.input_tokens,
                    seq.generated,  # output_tokens
                    times,  # token_times_s
                    None if seq.first_sched_s is None else seq.first_sched_s - ready_s,  # queue_s
                    None,  # error_kind
                    None,  # error_message
                    "sim",  # token_count_source
                    extra,
                    wait_s,  # frontend_wait_s
                )
            )
    return out


def per_million_kwh(joules: float, tokens: int) -> float | None:
    return joules / tokens * MEGA / JOULES_PER_KWH if tokens else None


def energy_summary(result: EngineResult, input_tokens: int, output_tokens: int) -> dict[str, Any]:
    """Energy accounting of a run (module docstring); joules, kWh per million tokens, watts."""
    prefill_j, decode_j = _step_energy_j(result)
    step_j = prefill_j + decode_j
    idle_j = result.idle_energy_j
    total_j = step_j + idle_j
    share_in = prefill_j / step_j if step_j else 0.0
    j_in = prefill_j + idle_j * share_in
    j_out = decode_j + idle_j * (1.0 - share_in)
    return {
        "total_j": total_j,
        "step_j": step_j,
        "idle_j": idle_j,
        "prefill_j": prefill_j,
        "decode_j": decode_j,
        "average_power_w": total_j / result.end_s if result.end_s > 0 else None,
        "joules_per_input_token": j_in / input_tokens if input_tokens else None,
        "joules_per_output_token": j_out / output_tokens if output_tokens else None,
        "joules_per_token_all_in": total_j / output_tokens if output_tokens else None,
        "kwh_per_million_input_tokens": per_million_kwh(j_in, input_tokens),
        "kwh_per_million_output_tokens": per_million_kwh(j_out, output_tokens),
        "kwh_per_million_tokens_all_in": per_million_kwh(total_j, output_tokens),
    }


def _step_energy_j(result: EngineResult) -> tuple[float, float]:
    """(prefill J, decode J) of the timeline's points with tokens: each point's energy
    (power x its length) split by its prefill and decode tokens. In numpy, summed in the
    timeline's order (np.cumsum adds one after another, as a Python loop does: the same sums
    to the bit), 10^5-10^6 points a run."""
    # a view of the timeline's doubles, 7 a point (engine.Timeline), released on return
    points = np.frombuffer(result.timeline.data, dtype=np.float64).reshape(-1, 7)
    t0, power_w, pre, dec = points[:, 0], points[:, 4], points[:, 5], points[:, 6]
    t1 = np.append(t0[1:], result.end_s)  # point i holds until point i + 1
    tokens = pre + dec
    busy = tokens != 0
    e = power_w[busy] * (t1[busy] - t0[busy])
    if not e.size:
        return 0.0, 0.0
    prefill = np.cumsum(e * pre[busy] / tokens[busy])
    decode = np.cumsum(e * dec[busy] / tokens[busy])
    return float(prefill[-1]), float(decode[-1])


@dataclass(slots=True)
class SimResult:
    """The outcome of `tokenprobe.simulate`; `to_dict()` is exactly `simulate --json`."""

    config: dict[str, Any]
    engine: EngineResult
    pool: BlockPool
    preemptions: int
    records: list[RequestRecord]
    slo_ttft_s: float | None = None
    slo_tpot_s: float | None = None
    spec_decode: dict[str, Any] | None = None  # sim/specdecode.py SpecScheduler.summary()
    _summary: dict[str, Any] = field(default_factory=dict)

    def run(self, with_timeline: bool = True) -> Run:
        timeline = self.timeline_points() if with_timeline else []
        fe = self.engine.frontend
        return Run(
            kind="simulated",
            config=self.config,
            records=self.records,
            timeline=timeline,
            duration_s=self.engine.end_s,
            host=fe.host_samples(self.engine.end_s) if fe is not None and with_timeline else [],
        )

    def timeline_points(self) -> list[TimelinePoint]:
        return [TimelinePoint(*row) for row in self.engine.timeline.rows]

    def summary(self) -> dict[str, Any]:
        if not self._summary:
            run = self.run(with_timeline=False)
            self._summary = summarize(run, self.slo_ttft_s, self.slo_tpot_s)
        return self._summary

    def to_dict(self) -> dict[str, Any]:
        s = self.summary()
        records = self.records  # (counted through attrgetter: 10^5-10^6 records, no frame)
        traced = sum(map(bool, map(_TOKEN_TIMES, records)))
        return {
            **s,
            "energy": self.energy_on_basis(s["input_tokens"], s["output_tokens"]),
            "kv": {
                "peak_blocks_used": self.pool.peak_used_blocks,
                "capacity_blocks": self.pool.capacity_blocks,
                "block_size": self.pool.block_size,
                "capacity_tokens": self.pool.capacity_tokens,
            },
            "preemptions": self.preemptions,
            "rejected": list(map(_ERROR_KIND, records)).count(REJECTED),
            "steps": self.engine.steps,
            "busy_fraction": self.engine.busy_s / self.engine.end_s if self.engine.end_s else None,
            "itl_traced_requests": traced,
            **({"frontend": self.frontend_summary()} if self.engine.frontend is not None else {}),
            **({"spec_decode": self.spec_decode} if self.spec_decode is not None else {}),
            "config": self.config,
        }

    def energy_on_basis(self, input_tokens: int, output_tokens: int) -> dict[str, Any]:
        """GPU energy (module docstring) and the same run on its basis (sim/energy_basis.py)."""
        energy = energy_summary(self.engine, input_tokens, output_tokens)
        end_s = self.engine.end_s
        return {**energy, **basis_figures(energy["total_j"], self.config, end_s, output_tokens)}

    def frontend_summary(self) -> dict[str, Any]:
        """The API-server processes (`frontend_figures`)."""
        fe = self.engine.frontend
        assert fe is not None
        return frontend_figures([fe], self.engine.end_s)

    def write(self, directory: str | Path) -> Path:
        """The run folder (records, timeline, config, summary = to_dict())."""
        return write_run(self.run(), directory, summary=self.to_dict())


def frontend_figures(frontends: list[Frontend], end_s: float) -> dict[str, Any]:
    """API-server processes (one replica's, or every replica's of a fleet): utilization,
    requests' wait in front of them and the mean queue there (Little's law: total wait / run
    time), the mean token delivery lag."""
    waits = sorted(w for fe in frontends for w in fe.wait_s.values())
    lags = [lag for fe in frontends for lag in fe.lag_s]
    processes = sum(fe.processes for fe in frontends)
    busy_s = sum(fe.busy_s for fe in frontends)
    return {
        "api_server_processes": processes,
        "utilization": busy_s / (processes * end_s) if end_s > 0 else None,
        "wait_mean_s": sum(waits) / len(waits) if waits else None,
        "wait_p50_s": waits[int(0.5 * (len(waits) - 1))] if waits else None,
        "wait_p90_s": waits[int(0.9 * (len(waits) - 1))] if waits else None,
        "wait_p99_s": waits[int(0.99 * (len(waits) - 1))] if waits else None,
        "queue_mean": sum(waits) / end_s if end_s > 0 else None,
        "token_lag_mean_s": sum(lags) / len(lags) if lags else None,
    }
