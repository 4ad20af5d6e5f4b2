"""Workload: a frozen spec of arrivals, lengths and prefixes; `generate(rng)` gives the requests."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tokenprobe.errors import ConfigError
from tokenprobe.workload.arrivals import Arrival, arrival_times_s
from tokenprobe.workload.checks import MAX_LENGTH_TOKENS, MAX_REQUESTS, is_count
from tokenprobe.workload.lengths import LengthDist, fixed
from tokenprobe.workload.request import RequestSpec


@dataclass(frozen=True, slots=True)
class Workload:
    """A frozen workload spec. For a trace, `num_requests` and the lengths come from the trace."""

    arrival: Arrival
    input_len: LengthDist = field(default_factory=lambda: fixed(512, "input_tokens"))
    output_len: LengthDist = field(default_factory=lambda: fixed(256, "output_tokens"))
    num_requests: int = 100
    shared_prefix_tokens: int = 0
    name: str = "custom"

    def __post_init__(self) -> None:
        if self.arrival.kind != "trace" and not is_count(self.num_requests, 1, MAX_REQUESTS):
            allowed = f"an integer in [1, {MAX_REQUESTS:,}] (10^7: more takes minutes and GiB)"
            raise ConfigError("num_requests", self.num_requests, allowed)
        if not is_count(self.shared_prefix_tokens, 0, MAX_LENGTH_TOKENS):
            allowed = f"an integer in [0, {MAX_LENGTH_TOKENS}]"
            raise ConfigError("shared_prefix_tokens", self.shared_prefix_tokens, allowed)
        if not isinstance(self.name, str):
            raise ConfigError("name", self.name, "a string")
        for dist in (self.input_len, self.output_len):
            if not isinstance(dist, LengthDist):
                raise ConfigError("input_len/output_len", dist, "a LengthDist")

    @property
    def size(self) -> int:
        return len(self.arrival.trace) if self.arrival.kind == "trace" else self.num_requests

    def generate(self, rng: np.random.Generator) -> list[RequestSpec]:
        """The requests, in arrival order, with ids "0", "1", ...; a trace is replayed as is."""
        if self.arrival.kind == "trace":
            return list(self.arrival.trace)
        n = self.num_requests
        times = arrival_times_s(self.arrival, rng, n).tolist()
        ins = self.input_len.sample(rng, n).tolist()
        outs = self.output_len.sample(rng, n).tolist()
        prefix = self.shared_prefix_tokens
        return [
            RequestSpec(str(i), t, i_len, o_len, min(prefix, i_len))
            for i, (t, i_len, o_len) in enumerate(zip(times, ins, outs, strict=True))
        ]
