"""Workloads (requirement S1): arrival processes, length distributions, trace replay, scenarios.

A `Workload` is a frozen, validated spec; `generate(rng)` turns it into `RequestSpec`s with a
seeded `numpy.random.Generator` passed in (same seed, same requests).

Arrival processes (`ARRIVALS`, a plain dict: one edit adds one):
- poisson(rate): exponential gaps of mean 1/rate.
- gamma(rate, burstiness): gaps ~ Gamma(shape=burstiness, scale=1/(rate*burstiness)), the same
  parametrisation as vLLM's benchmark_serving `--burstiness` (1 = Poisson, < 1 burstier, > 1 more
  regular; the mean rate stays `rate`).
- constant(rate): gaps of exactly 1/rate.
- offline: every request at t = 0.
- closed(concurrency N): N users, each sends its next request when its previous one finishes
  (zero think time); arrival times are decided by the simulator / load generator, here all 0.
- trace: replay (arrival_s, input_tokens, output_tokens) rows from a CSV or JSONL file.
The first request of an open-loop process arrives at t = 0, as in vLLM's benchmark.

Length distributions (`LengthDist`, integers >= 1): fixed, uniform (inclusive), normal (rounded,
clipped to >= 1), lognormal (parametrised by its *mean* and the sigma of the underlying normal:
mu = ln(mean) - sigma^2/2), empirical (resampled uniformly from given values or a file).

Workload files (`load_workload`): TOML or JSON, unknown keys rejected, e.g.

    name = "chat"
    num_requests = 1000
    shared_prefix_tokens = 0
    [arrival]            # kind = poisson | gamma | constant | offline | closed | trace
    kind = "gamma"
    rate_per_s = 4.0
    burstiness = 0.5     # trace: trace_file = "trace.csv" (relative to the workload file)
    [input_tokens]       # kind = fixed (value) | uniform (low, high) | normal (mean, std)
    kind = "normal"      #      | lognormal (mean, sigma) | empirical (values or file)
    mean = 512
    std = 128
    [output_tokens]
    kind = "fixed"
    value = 256

Named scenarios (workload + deployment + scheduler settings) are in `tokenprobe.sim.scenarios`,
because they also fix the hardware and the server's settings.
"""

from __future__ import annotations

import csv
import json
import math
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from tokenprobe.errors import ConfigError, SchemaError

LENGTH_KINDS: tuple[str, ...] = ("fixed", "uniform", "normal", "lognormal", "empirical")
ARRIVAL_KINDS: tuple[str, ...] = ("poisson", "gamma", "constant", "offline", "closed", "trace")


class RequestSpec(NamedTuple):
    """One request to send: when (s after the run starts) and how many tokens in and out.

    `prefix_tokens` of the prompt are shared with every other request of the same
    `prefix_group` (a common system prompt), which prefix caching may reuse. A NamedTuple
    (immutable, and cheap to build 10^5 times for a simulation).
    """

    request_id: str
    arrival_s: float
    input_tokens: int
    output_tokens: int
    prefix_tokens: int = 0
    prefix_group: int = 0


def _positive(name: str, value: float) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise ConfigError(name, value, "must be a positive finite number")


def _nonnegative(name: str, value: float) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
        raise ConfigError(name, value, "must be a finite number >= 0")


@dataclass(frozen=True, slots=True)
class LengthDist:
    """A distribution of token counts (integers >= 1); see the module docstring for the kinds."""

    kind: str = "fixed"
    value: int = 0
    low: int = 0
    high: int = 0
    mean: float = 0.0
    std: float = 0.0
    sigma: float = 0.0
    values: tuple[int, ...] = ()
    name: str = "tokens"

    def __post_init__(self) -> None:
        if self.kind not in LENGTH_KINDS:
            raise ConfigError(f"{self.name}.kind", self.kind, f"one of {', '.join(LENGTH_KINDS)}")
        _LENGTH_CHECKS[self.kind](self)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """`n` token counts (int64, each >= 1)."""
        raw = _LENGTH_SAMPLERS[self.kind](self, rng, n)
        counts: np.ndarray = np.maximum(np.rint(raw), 1).astype(np.int64)
        return counts

    @property
    def expected(self) -> float:
        """The distribution's mean (tokens), before rounding and clipping."""
        return {
            "fixed": float(self.value),
            "uniform": (self.low + self.high) / 2,
            "normal": self.mean,
            "lognormal": self.mean,
            "empirical": float(np.mean(self.values)) if self.values else 0.0,
        }[self.kind]


def _check_fixed(d: LengthDist) -> None:
    if not (isinstance(d.value, int) and d.value >= 1):
        raise ConfigError(d.name, d.value, "a token count must be an integer >= 1")


def _check_uniform(d: LengthDist) -> None:
    if not (1 <= d.low <= d.high):
        raise ConfigError(f"{d.name}.low/high", (d.low, d.high), "need 1 <= low <= high")


def _check_normal(d: LengthDist) -> None:
    _positive(f"{d.name}.mean", d.mean)
    _nonnegative(f"{d.name}.std", d.std)


def _check_lognormal(d: LengthDist) -> None:
    _positive(f"{d.name}.mean", d.mean)
    _nonnegative(f"{d.name}.sigma", d.sigma)


def _check_empirical(d: LengthDist) -> None:
    if not d.values or any(not isinstance(v, int) or v < 1 for v in d.values):
        raise ConfigError(f"{d.name}.values", d.values[:5], "a non-empty list of integers >= 1")


_LENGTH_CHECKS: dict[str, Callable[[LengthDist], None]] = {
    "fixed": _check_fixed,
    "uniform": _check_uniform,
    "normal": _check_normal,
    "lognormal": _check_lognormal,
    "empirical": _check_empirical,
}
_LENGTH_SAMPLERS: dict[str, Callable[[LengthDist, np.random.Generator, int], np.ndarray]] = {
    "fixed": lambda d, rng, n: np.full(n, d.value),
    "uniform": lambda d, rng, n: rng.integers(d.low, d.high, size=n, endpoint=True),
    "normal": lambda d, rng, n: rng.normal(d.mean, d.std, size=n),
    "lognormal": lambda d, rng, n: rng.lognormal(math.log(d.mean) - d.sigma**2 / 2, d.sigma, n),
    "empirical": lambda d, rng, n: rng.choice(np.asarray(d.values), size=n),
}


def fixed(tokens: int, name: str = "tokens") -> LengthDist:
    return LengthDist("fixed", value=tokens, name=name)


def read_lengths_file(path: str | Path, name: str = "tokens") -> LengthDist:
    """An empirical distribution from a file of one integer per line (blank and # lines skipped)."""
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise SchemaError(str(p), f"cannot read: {exc.strerror}") from None
    values: list[int] = []
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            values.append(int(text))
        except ValueError:
            raise SchemaError(f"{p}:{number}", f"{text!r} is not an integer") from None
    return LengthDist("empirical", values=tuple(values), name=name)


# ---------------------------------------------------------------- arrivals


@dataclass(frozen=True, slots=True)
class Arrival:
    """How requests arrive; see the module docstring for the kinds and their parameters."""

    kind: str = "poisson"
    rate_per_s: float = 0.0
    burstiness: float = 1.0
    concurrency: int = 0
    trace: tuple[RequestSpec, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in ARRIVAL_KINDS:
            raise ConfigError("arrival.kind", self.kind, f"one of {', '.join(ARRIVAL_KINDS)}")
        if self.kind in ("poisson", "gamma", "constant"):
            _positive("rate_per_s", self.rate_per_s)
        if self.kind == "gamma":
            _positive("burstiness", self.burstiness)
        if self.kind == "closed" and not (
            isinstance(self.concurrency, int) and self.concurrency > 0
        ):
            raise ConfigError("concurrency", self.concurrency, "an integer >= 1")
        if self.kind == "trace" and not self.trace:
            raise ConfigError("arrival.trace", "()", "a trace with at least one request")

    @property
    def closed_loop(self) -> bool:
        return self.kind == "closed"


def _gaps_gamma(a: Arrival, rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.gamma(shape=a.burstiness, scale=1.0 / (a.rate_per_s * a.burstiness), size=n)


ARRIVALS: dict[str, Callable[[Arrival, np.random.Generator, int], np.ndarray]] = {
    "poisson": lambda a, rng, n: rng.exponential(1.0 / a.rate_per_s, size=n),
    "gamma": _gaps_gamma,
    "constant": lambda a, rng, n: np.full(n, 1.0 / a.rate_per_s),
    "offline": lambda a, rng, n: np.zeros(n),
    "closed": lambda a, rng, n: np.zeros(n),
}
"""Gap generators: n inter-arrival gaps (s); arrival i = sum of the first i gaps (first at 0)."""


def arrival_times_s(arrival: Arrival, rng: np.random.Generator, n: int) -> np.ndarray:
    gaps = ARRIVALS[arrival.kind](arrival, rng, n)
    return np.concatenate(([0.0], np.cumsum(gaps[:-1]))) if n else np.zeros(0)


# ---------------------------------------------------------------- workload


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
        if self.arrival.kind != "trace" and not (
            isinstance(self.num_requests, int) and self.num_requests >= 1
        ):
            raise ConfigError("num_requests", self.num_requests, "an integer >= 1")
        if self.shared_prefix_tokens < 0:
            raise ConfigError("shared_prefix_tokens", self.shared_prefix_tokens, "must be >= 0")

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


# ---------------------------------------------------------------- trace files

_TRACE_KEYS = ("arrival_s", "input_tokens", "output_tokens")


def _trace_row(row: Mapping[str, Any], where: str, index: int) -> RequestSpec:
    missing = [k for k in _TRACE_KEYS if k not in row or row[k] in (None, "")]
    if missing:
        raise SchemaError(where, f"missing {', '.join(missing)}")
    try:
        t = float(row["arrival_s"])
        i_len = int(row["input_tokens"])
        o_len = int(row["output_tokens"])
    except (TypeError, ValueError) as exc:
        raise SchemaError(where, f"not a number: {exc}") from None
    if not (math.isfinite(t) and t >= 0):
        raise SchemaError(where, f"arrival_s={t} must be a finite time >= 0")
    if i_len < 1 or o_len < 1:
        raise SchemaError(where, f"token counts must be >= 1 (got {i_len} in, {o_len} out)")
    rid = str(row.get("request_id") or index)
    return RequestSpec(rid, t, i_len, o_len)


def _trace_rows(path: Path) -> list[tuple[int, Mapping[str, Any]]]:
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() in (".jsonl", ".json", ".ndjson"):
        rows: list[tuple[int, Mapping[str, Any]]] = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise SchemaError(f"{path}:{number}", f"not valid JSON: {exc.msg}") from None
            if not isinstance(obj, dict):
                raise SchemaError(f"{path}:{number}", "expected a JSON object")
            rows.append((number, obj))
        return rows
    reader = csv.DictReader(text.splitlines())
    if reader.fieldnames is None or not set(_TRACE_KEYS) <= set(reader.fieldnames):
        raise SchemaError(f"{path}:1", f"CSV header must name {', '.join(_TRACE_KEYS)}")
    return [(reader.line_num, row) for row in reader]


def read_trace(path: str | Path) -> Arrival:
    """Replay of a CSV (with a header) or JSONL trace of arrival_s, input_tokens, output_tokens.

    A bad line raises SchemaError naming the file and line number. Rows are sorted by arrival.
    """
    p = Path(path)
    try:
        rows = _trace_rows(p)
    except OSError as exc:
        raise SchemaError(str(p), f"cannot read: {exc.strerror}") from None
    specs = [_trace_row(row, f"{p}:{number}", i) for i, (number, row) in enumerate(rows)]
    if not specs:
        raise SchemaError(str(p), "the trace holds no request")
    return Arrival("trace", trace=tuple(sorted(specs, key=lambda s: s.arrival_s)))


# ---------------------------------------------------------------- workload files

_TOP_KEYS = {"name", "num_requests", "shared_prefix_tokens", "arrival", "input_tokens"}
_TOP_KEYS |= {"output_tokens"}
_ARRIVAL_KEYS = {"kind", "rate_per_s", "burstiness", "concurrency", "trace_file"}
_LENGTH_KEYS = {"kind", "value", "low", "high", "mean", "std", "sigma", "values", "file"}


def _table(doc: Mapping[str, Any], key: str, allowed: set[str], where: str) -> dict[str, Any]:
    table = doc.get(key, {})
    if not isinstance(table, dict):
        raise SchemaError(where, f"[{key}] must be a table")
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise SchemaError(where, f"unknown keys in [{key}]: {unknown}; known: {sorted(allowed)}")
    return dict(table)


def _length_from(table: dict[str, Any], name: str, base: Path, where: str) -> LengthDist:
    if "file" in table:
        return read_lengths_file(base / str(table["file"]), name)
    if "values" in table:
        table["values"] = tuple(table["values"])
    try:
        return LengthDist(**table, name=name)
    except TypeError as exc:
        raise SchemaError(where, f"[{name}]: {exc}") from None


def workload_from_dict(doc: Mapping[str, Any], where: str, base: Path) -> Workload:
    """Build a Workload from a parsed file; `base` resolves relative trace/length file names."""
    unknown = sorted(set(doc) - _TOP_KEYS)
    if unknown:
        raise SchemaError(where, f"unknown keys {unknown}; known: {sorted(_TOP_KEYS)}")
    arrival_t = _table(doc, "arrival", _ARRIVAL_KEYS, where)
    if "trace_file" in arrival_t:
        arrival = read_trace(base / str(arrival_t.pop("trace_file")))
    else:
        arrival = Arrival(**arrival_t)
    kwargs: dict[str, Any] = {k: doc[k] for k in ("name", "num_requests") if k in doc}
    kwargs["shared_prefix_tokens"] = int(doc.get("shared_prefix_tokens", 0))
    for key in ("input_tokens", "output_tokens"):
        if key in doc:
            table = _table(doc, key, _LENGTH_KEYS, where)
            kwargs[key.replace("_tokens", "_len")] = _length_from(table, key, base, where)
    return Workload(arrival=arrival, **kwargs)


def load_workload(path: str | Path) -> Workload:
    """A Workload from a TOML (.toml) or JSON file; unknown keys and bad values are rejected."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise SchemaError(str(p), f"cannot read: {exc.strerror}") from None
    try:
        doc = tomllib.loads(text) if p.suffix.lower() == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise SchemaError(str(p), f"does not parse: {exc}") from None
    if not isinstance(doc, dict):
        raise SchemaError(str(p), "expected a table / JSON object at the top")
    return workload_from_dict(doc, str(p), p.parent)
