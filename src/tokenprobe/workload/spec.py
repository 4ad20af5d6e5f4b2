"""Workload: a frozen spec of arrivals, lengths and prefixes; `generate(rng)` gives the requests.

The simulator and the load generator both run `generate(np.random.default_rng(seed))`, so a
simulated and a measured run of one workload and seed have the same arrival times and lengths.

Shared prefixes: the first `shared_prefix_tokens` of every prompt are one of `prefix_groups`
texts (request i's group drawn uniformly, after the lengths, so a one-group workload draws what it
always drew), as vLLM's prefix_repetition dataset repeats `num_prefixes` prefixes
(vllm-project/vllm: vllm/benchmarks/datasets.py, PrefixRepetitionRandomDataset). With synthetic
lengths the prefix is part of `input_tokens`; with a dataset it comes before the dataset's prompt
(input = prefix + prompt), since a dataset's prompt cannot shrink.

Dataset: request i takes row i mod n of the dataset's kept rows (file order), its lengths from
`DatasetLengths` (`workload.datasets`); the input/output distributions are then unused.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tokenprobe.errors import ConfigError
from tokenprobe.workload.arrivals import Arrival, arrival_times_s
from tokenprobe.workload.checks import MAX_LENGTH_TOKENS, MAX_REQUESTS, is_count
from tokenprobe.workload.conversation import (
    Conversation,
    conversation_requests,
    conversations_for,
    dataset_conversation_requests,
    draw_groups,
)
from tokenprobe.workload.datasets import DatasetLengths
from tokenprobe.workload.lengths import LengthDist, fixed
from tokenprobe.workload.request import RequestSpec

MAX_PREFIX_GROUPS = 1_000_000


@dataclass(frozen=True, slots=True)
class Workload:
    """A frozen workload spec. For a trace, `num_requests` and the lengths come from the trace."""

    arrival: Arrival
    input_len: LengthDist = field(default_factory=lambda: fixed(512, "input_tokens"))
    output_len: LengthDist = field(default_factory=lambda: fixed(256, "output_tokens"))
    num_requests: int = 100
    shared_prefix_tokens: int = 0
    name: str = "custom"
    prefix_groups: int = 1
    dataset: DatasetLengths | None = None
    conversation: Conversation = field(default_factory=Conversation)

    def __post_init__(self) -> None:
        if self.arrival.kind != "trace" and not is_count(self.num_requests, 1, MAX_REQUESTS):
            allowed = f"an integer in [1, {MAX_REQUESTS:,}] (10^7: more takes minutes and GiB)"
            raise ConfigError("num_requests", self.num_requests, allowed)
        if not is_count(self.shared_prefix_tokens, 0, MAX_LENGTH_TOKENS):
            allowed = f"an integer in [0, {MAX_LENGTH_TOKENS}]"
            raise ConfigError("shared_prefix_tokens", self.shared_prefix_tokens, allowed)
        if not is_count(self.prefix_groups, 1, MAX_PREFIX_GROUPS):
            allowed = f"an integer in [1, {MAX_PREFIX_GROUPS:,}]"
            raise ConfigError("prefix_groups", self.prefix_groups, allowed)
        if not isinstance(self.name, str):
            raise ConfigError("name", self.name, "a string")
        for dist in (self.input_len, self.output_len):
            if not isinstance(dist, LengthDist):
                raise ConfigError("input_len/output_len", dist, "a LengthDist")
        if not isinstance(self.conversation, Conversation):
            raise ConfigError("conversation", self.conversation, "a Conversation")
        turns = self.conversation.turns
        if turns > 1 and self.arrival.kind == "trace":
            raise ConfigError("conversation.turns", turns, "not with a trace (it has the turns)")
        if self.dataset is not None and self.arrival.kind == "trace":
            raise ConfigError(
                "dataset", self.dataset.dataset.path, "not with a trace (it has lengths)"
            )

    @property
    def size(self) -> int:
        return len(self.arrival.trace) if self.arrival.kind == "trace" else self.num_requests

    def with_dataset(self, lengths: DatasetLengths) -> Workload:
        return replace(self, dataset=lengths)

    def generate(
        self, rng: np.random.Generator, num_requests: int | None = None
    ) -> list[RequestSpec]:
        """The requests, in arrival order, with ids "0", "1", ...; a trace is replayed as is.
        `num_requests` overrides the workload's (bench's `--duration-s` asks for more)."""
        if self.arrival.kind == "trace":
            return list(self.arrival.trace)
        n = self.num_requests if num_requests is None else num_requests
        if self.conversation.multi_turn:
            return self._conversations(rng, n)
        times = arrival_times_s(self.arrival, rng, n).tolist()
        items: list[int]
        if self.dataset is None:
            ins = self.input_len.sample(rng, n).tolist()
            outs = self.output_len.sample(rng, n).tolist()
            items = [-1] * n
        else:
            ds, k = self.dataset, len(self.dataset.rows)
            ins = [self.shared_prefix_tokens + ds.input_tokens[i % k] for i in range(n)]
            outs = [ds.output_tokens[i % k] for i in range(n)]
            items = [ds.rows[i % k] for i in range(n)]
        groups = draw_groups(rng, self.prefix_groups, n)
        prefix = self.shared_prefix_tokens
        return [
            RequestSpec(str(i), t, i_len, o_len, min(prefix, i_len), g, item)
            for i, (t, i_len, o_len, g, item) in enumerate(
                zip(times, ins, outs, groups, items, strict=True)
            )
        ]

    def _conversations(self, rng: np.random.Generator, n: int) -> list[RequestSpec]:
        conv = self.conversation
        if self.dataset is not None:  # as many conversations as it takes, at most n
            starts = arrival_times_s(self.arrival, rng, n).tolist()
            groups = draw_groups(rng, self.prefix_groups, n)
            prefix = self.shared_prefix_tokens
            return dataset_conversation_requests(conv, starts, self.dataset, groups, prefix, n)
        n_conv = conversations_for(conv.turns, n)
        starts = arrival_times_s(self.arrival, rng, n_conv).tolist()
        messages = self.input_len.sample(rng, n).tolist()
        outputs = self.output_len.sample(rng, n).tolist()
        groups = draw_groups(rng, self.prefix_groups, n_conv)
        return conversation_requests(
            conv, starts, messages, outputs, groups, self.shared_prefix_tokens
        )


def build_workload(
    *,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    rate_per_s: float | None = None,
    burstiness: float = 1.0,
    concurrency: int | None = None,
    offline: bool = False,
    num_requests: int = 100,
    dataset: DatasetLengths | None = None,
) -> Workload:
    """The workload of the CLI flags (simulate's and bench's): fixed lengths (or a dataset's) and
    exactly one arrival mode; a rate with burstiness 1 is Poisson, else gamma."""
    modes = [rate_per_s is not None, concurrency is not None, offline]
    if sum(modes) != 1:
        raise ConfigError("arrival", modes, "give exactly one of rate, concurrency, offline")
    if dataset is None and (input_tokens is None or output_tokens is None):
        raise ConfigError("input_tokens/output_tokens", None, "both are needed without a workload")
    if rate_per_s is not None:
        kind = "poisson" if burstiness == 1.0 else "gamma"
        arrival = Arrival(kind, rate_per_s=rate_per_s, burstiness=burstiness)
    elif concurrency is not None:
        arrival = Arrival("closed", concurrency=concurrency)
    else:
        arrival = Arrival("offline")
    # with a dataset the lengths are its own; the fixed ones below are then unused
    return Workload(
        arrival=arrival,
        input_len=fixed(input_tokens or 512, "input_tokens"),
        output_len=fixed(output_tokens or 256, "output_tokens"),
        num_requests=num_requests,
        dataset=dataset,
    )


_LENGTH_PARAMS: dict[str, tuple[str, ...]] = {
    "fixed": ("value",),
    "uniform": ("low", "high"),
    "normal": ("mean", "std"),
    "lognormal": ("mean", "sigma"),
    "empirical": (),
}


def _length_dict(d: LengthDist) -> dict[str, Any]:
    keys = _LENGTH_PARAMS[d.kind]
    out: dict[str, Any] = {"kind": d.kind, **{k: getattr(d, k) for k in keys}}
    if d.kind == "empirical":
        out["count"] = len(d.values)
        out["mean"] = d.expected
    return out


def workload_dict(w: Workload) -> dict[str, Any]:
    """The workload as the run's config keeps it (JSON-ready; a dataset by its path and counts)."""
    a = w.arrival
    doc: dict[str, Any] = {
        "name": w.name,
        "num_requests": w.size,
        "arrival": {
            "kind": a.kind,
            "rate_per_s": a.rate_per_s,
            "burstiness": a.burstiness,
            "concurrency": a.concurrency,
        },
        "input_tokens": _length_dict(w.input_len),
        "output_tokens": _length_dict(w.output_len),
        "shared_prefix_tokens": w.shared_prefix_tokens,
    }
    if w.prefix_groups != 1:
        doc["prefix_groups"] = w.prefix_groups
    if w.conversation.multi_turn:
        doc["conversation"] = {"turns": w.conversation.turns, "think_s": w.conversation.think_s}
    if w.dataset is not None:
        doc["dataset"] = w.dataset.to_dict()
        for key in ("input_tokens", "output_tokens"):
            doc[key] = {"kind": "dataset", "mean": doc["dataset"][f"mean_{key}"]}
    return doc
