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

Limits (a workload is refused where it is built, so simulate, plan, calibrate and bench all get
them): at most `MAX_REQUESTS` (10^7) requests, token counts at most `MAX_LENGTH_TOKENS` (2^24,
16.8M: no served model's context is near it; sampled lengths are clipped to it), rates in
[1e-9, 1e9] requests/s, burstiness in [1e-6, 1e6], a lognormal's sigma at most 10 (beyond, its
samples are 0 or overflow), trace and length files at most `MAX_TRACE_BYTES` (128 MiB, about 3M
rows). 10^7 requests already take ~10 s and a few GiB to generate; 10^11 asked for 745 GiB.
Every number is checked finite (TOML and JSON both carry NaN/inf) and of its type (a bool is not
a count). A bad value in a file raises SchemaError naming the file, the field and the value.

Named scenarios (workload + deployment + scheduler settings) are in `tokenprobe.sim.scenarios`,
because they also fix the hardware and the server's settings.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from tokenprobe.errors import ConfigError, SchemaError
from tokenprobe.files import finite, parse_json, parse_toml, read_text
from tokenprobe.units import MiB

LENGTH_KINDS: tuple[str, ...] = ("fixed", "uniform", "normal", "lognormal", "empirical")
ARRIVAL_KINDS: tuple[str, ...] = ("poisson", "gamma", "constant", "offline", "closed", "trace")
MAX_REQUESTS = 10**7
MAX_LENGTH_TOKENS = 2**24
MAX_TRACE_BYTES = 128 * MiB
RATE_RANGE_PER_S = (1e-9, 1e9)
BURSTINESS_RANGE = (1e-6, 1e6)
MAX_LOGNORMAL_SIGMA = 10.0


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


def _positive(name: str, value: object, hi: float = math.inf) -> None:
    finite(name, value, lo=0.0, lo_open=True, hi=None if math.isinf(hi) else hi)
    if isinstance(value, str):  # finite() reads "4" as 4; a spec's number is never text
        raise ConfigError(name, value, "a number, not text")


def _nonnegative(name: str, value: object, hi: float = math.inf) -> None:
    finite(name, value, lo=0.0, hi=None if math.isinf(hi) else hi)
    if isinstance(value, str):
        raise ConfigError(name, value, "a number, not text")


def _in_range(name: str, value: object, lo: float, hi: float) -> None:
    _positive(name, value)
    finite(name, value, lo=lo, hi=hi)


def _is_count(value: object, lo: int, hi: int) -> bool:
    """An int (not a bool) in [lo, hi]."""
    return isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi


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
        # clipped before the cast: a float beyond int64 would wrap to a negative count
        counts: np.ndarray = np.clip(np.rint(raw), 1, MAX_LENGTH_TOKENS).astype(np.int64)
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


_TOKENS = f"an integer in [1, {MAX_LENGTH_TOKENS}] (2^24)"


def _check_fixed(d: LengthDist) -> None:
    if not _is_count(d.value, 1, MAX_LENGTH_TOKENS):
        raise ConfigError(d.name, d.value, f"a token count must be {_TOKENS}")


def _check_uniform(d: LengthDist) -> None:
    for key in ("low", "high"):
        if not _is_count(getattr(d, key), 1, MAX_LENGTH_TOKENS):
            raise ConfigError(f"{d.name}.{key}", getattr(d, key), _TOKENS)
    if not d.low <= d.high:
        raise ConfigError(f"{d.name}.low/high", (d.low, d.high), "need 1 <= low <= high")


def _check_normal(d: LengthDist) -> None:
    _positive(f"{d.name}.mean", d.mean, MAX_LENGTH_TOKENS)
    _nonnegative(f"{d.name}.std", d.std, MAX_LENGTH_TOKENS)


def _check_lognormal(d: LengthDist) -> None:
    _positive(f"{d.name}.mean", d.mean, MAX_LENGTH_TOKENS)
    _nonnegative(f"{d.name}.sigma", d.sigma, MAX_LOGNORMAL_SIGMA)


def _check_empirical(d: LengthDist) -> None:
    values = d.values
    if not isinstance(values, tuple) or not values or len(values) > MAX_REQUESTS:
        shown = values[:5] if isinstance(values, tuple | list) else values
        raise ConfigError(f"{d.name}.values", shown, f"a list of 1 to {MAX_REQUESTS} counts")
    bad = next((v for v in values if not _is_count(v, 1, MAX_LENGTH_TOKENS)), None)
    if bad is not None:
        raise ConfigError(f"{d.name}.values", bad, f"each value {_TOKENS}")


_LENGTH_CHECKS: dict[str, Callable[[LengthDist], None]] = {
    "fixed": _check_fixed,
    "uniform": _check_uniform,
    "normal": _check_normal,
    "lognormal": _check_lognormal,
    "empirical": _check_empirical,
}
_LENGTH_SAMPLERS: dict[str, Callable[[LengthDist, np.random.Generator, int], np.ndarray]] = {
    "fixed": lambda d, _rng, n: np.full(n, d.value),
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
    lines = read_text(p, max_bytes=MAX_TRACE_BYTES).splitlines()
    values: list[int] = []
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            value = int(text)
        except ValueError:
            raise SchemaError(f"{p}:{number}", f"{text[:40]!r} is not an integer") from None
        if not 1 <= value <= MAX_LENGTH_TOKENS:
            raise SchemaError(f"{p}:{number}", f"{name}={value}: {_TOKENS}")
        values.append(value)
    if not values:
        raise SchemaError(str(p), f"holds no {name} count")
    if len(values) > MAX_REQUESTS:
        raise SchemaError(str(p), f"holds {len(values):,} counts; at most {MAX_REQUESTS:,}")
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
            _in_range("rate_per_s", self.rate_per_s, *RATE_RANGE_PER_S)
        if self.kind == "gamma":
            _in_range("burstiness", self.burstiness, *BURSTINESS_RANGE)
        if self.kind == "closed" and not _is_count(self.concurrency, 1, MAX_REQUESTS):
            raise ConfigError("concurrency", self.concurrency, f"an integer in [1, {MAX_REQUESTS}]")
        if self.kind == "trace" and not self.trace:
            raise ConfigError("arrival.trace", "()", "a trace with at least one request")
        if len(self.trace) > MAX_REQUESTS:
            raise ConfigError("arrival.trace", len(self.trace), f"at most {MAX_REQUESTS} requests")

    @property
    def closed_loop(self) -> bool:
        return self.kind == "closed"


def _gaps_gamma(a: Arrival, rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.gamma(shape=a.burstiness, scale=1.0 / (a.rate_per_s * a.burstiness), size=n)


ARRIVALS: dict[str, Callable[[Arrival, np.random.Generator, int], np.ndarray]] = {
    "poisson": lambda a, rng, n: rng.exponential(1.0 / a.rate_per_s, size=n),
    "gamma": _gaps_gamma,
    "constant": lambda a, _rng, n: np.full(n, 1.0 / a.rate_per_s),
    "offline": lambda _a, _rng, n: np.zeros(n),
    "closed": lambda _a, _rng, n: np.zeros(n),
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
        if self.arrival.kind != "trace" and not _is_count(self.num_requests, 1, MAX_REQUESTS):
            allowed = f"an integer in [1, {MAX_REQUESTS:,}] (10^7: more takes minutes and GiB)"
            raise ConfigError("num_requests", self.num_requests, allowed)
        if not _is_count(self.shared_prefix_tokens, 0, MAX_LENGTH_TOKENS):
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


# ---------------------------------------------------------------- trace files

_TRACE_KEYS = ("arrival_s", "input_tokens", "output_tokens")
_TRACE_SUFFIXES_JSON = (".jsonl", ".json", ".ndjson")


def _trace_tokens(value: object, key: str, where: str) -> int:
    """A token count of a trace row: an int (or its text, or an integral float) in range."""
    if isinstance(value, str):
        text = value
        try:
            value = int(text.strip())
        except ValueError:
            raise SchemaError(where, f"{key}={text[:40]!r} is not an integer") from None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise SchemaError(where, f"{key}={value!r} is not an integer")
    if not 1 <= value <= MAX_LENGTH_TOKENS:
        raise SchemaError(where, f"{key}={value}: token counts must be >= 1 and <= 2^24")
    return value


def _trace_time(value: object, where: str) -> float:
    if isinstance(value, str):
        text = value
        try:
            value = float(text)
        except ValueError:
            raise SchemaError(where, f"arrival_s={text[:40]!r} is not a number") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SchemaError(where, f"arrival_s={value!r:.60} is not a number")
    t = float(value) if isinstance(value, float) or abs(value) < 2**1000 else math.inf
    if not (math.isfinite(t) and t >= 0):
        raise SchemaError(where, f"arrival_s={t} must be a finite time >= 0")
    return t


def _trace_row(row: Mapping[str, Any], where: str, index: int) -> RequestSpec:
    missing = [k for k in _TRACE_KEYS if k not in row or row[k] in (None, "")]
    if missing:
        raise SchemaError(where, f"missing {', '.join(missing)}")
    t = _trace_time(row["arrival_s"], where)
    i_len = _trace_tokens(row["input_tokens"], "input_tokens", where)
    o_len = _trace_tokens(row["output_tokens"], "output_tokens", where)
    rid = row.get("request_id")
    return RequestSpec(str(rid)[:200] if rid not in (None, "") else str(index), t, i_len, o_len)


def _jsonl_rows(text: str, path: Path) -> list[tuple[int, Mapping[str, Any]]]:
    rows: list[tuple[int, Mapping[str, Any]]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        obj = parse_json(line, f"{path}:{number}")
        if not isinstance(obj, dict):
            raise SchemaError(f"{path}:{number}", "expected a JSON object")
        rows.append((number, obj))
        if len(rows) > MAX_REQUESTS:
            break
    return rows


def _csv_rows(text: str, path: Path) -> list[tuple[int, Mapping[str, Any]]]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        if reader.fieldnames is None or not set(_TRACE_KEYS) <= set(reader.fieldnames):
            raise SchemaError(f"{path}:1", f"CSV header must name {', '.join(_TRACE_KEYS)}")
        rows: list[tuple[int, Mapping[str, Any]]] = []
        for row in reader:
            rows.append((reader.line_num, row))
            if len(rows) > MAX_REQUESTS:
                break
    except csv.Error as exc:  # e.g. a field over csv's 128 KiB field limit
        raise SchemaError(f"{path}:{reader.line_num}", f"not valid CSV: {exc}") from None
    return rows


def read_trace(path: str | Path) -> Arrival:
    """Replay of a CSV (with a header) or JSONL trace of arrival_s, input_tokens, output_tokens.

    A bad line raises SchemaError naming the file and line number. Rows are sorted by arrival.
    At most `MAX_TRACE_BYTES` are read and `MAX_REQUESTS` rows kept (module docstring).
    """
    p = Path(path)
    text = read_text(p, max_bytes=MAX_TRACE_BYTES)
    json_lines = p.suffix.lower() in _TRACE_SUFFIXES_JSON
    rows = _jsonl_rows(text, p) if json_lines else _csv_rows(text, p)
    if len(rows) > MAX_REQUESTS:
        raise SchemaError(str(p), f"holds more than {MAX_REQUESTS:,} requests; at most that many")
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
        raise SchemaError(where, f"[{key}] must be a table, not {table!r:.60}")
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise SchemaError(where, f"unknown keys in [{key}]: {unknown}; known: {sorted(allowed)}")
    return dict(table)


def _file_name(table: Mapping[str, Any], key: str, where: str) -> str:
    value = table[key]
    if not isinstance(value, str) or not value.strip():
        raise SchemaError(where, f"{key}={value!r:.60} is not a file name")
    return value


def _length_from(table: dict[str, Any], name: str, base: Path, where: str) -> LengthDist:
    if "file" in table:
        return read_lengths_file(base / _file_name(table, "file", where), name)
    if "values" in table:
        if not isinstance(table["values"], list):
            raise SchemaError(where, f"[{name}] values={table['values']!r:.60} is not a list")
        table["values"] = tuple(table["values"])
    return LengthDist(**table, name=name)


def workload_from_dict(doc: Mapping[str, Any], where: str, base: Path) -> Workload:
    """Build a Workload from a parsed file; `base` resolves relative trace/length file names.

    Any bad value raises SchemaError naming `where`, the field and the value.
    """
    if not isinstance(doc, Mapping):
        raise SchemaError(where, "expected a table / JSON object at the top")
    unknown = sorted(set(doc) - _TOP_KEYS)
    if unknown:
        raise SchemaError(where, f"unknown keys {unknown}; known: {sorted(_TOP_KEYS)}")
    try:
        return _workload_from_dict(doc, where, base)
    except SchemaError:
        raise
    except ConfigError as exc:
        raise SchemaError(where, str(exc)) from None


def _workload_from_dict(doc: Mapping[str, Any], where: str, base: Path) -> Workload:
    arrival_t = _table(doc, "arrival", _ARRIVAL_KEYS, where)
    if "trace_file" in arrival_t:
        arrival = read_trace(base / _file_name(arrival_t, "trace_file", where))
    else:
        arrival = Arrival(**arrival_t)
    kwargs: dict[str, Any] = {k: doc[k] for k in ("name", "num_requests") if k in doc}
    kwargs["shared_prefix_tokens"] = doc.get("shared_prefix_tokens", 0)
    for key in ("input_tokens", "output_tokens"):
        if key in doc:
            table = _table(doc, key, _LENGTH_KEYS, where)
            kwargs[key.replace("_tokens", "_len")] = _length_from(table, key, base, where)
    return Workload(arrival=arrival, **kwargs)


def load_workload(path: str | Path) -> Workload:
    """A Workload from a TOML (.toml) or JSON file; unknown keys and bad values are rejected
    with a SchemaError naming the file (tokenprobe.files reads it: no hang on a FIFO)."""
    p = Path(path)
    text = read_text(p)
    doc = parse_toml(text, str(p)) if p.suffix.lower() == ".toml" else parse_json(text, str(p))
    return workload_from_dict(doc, str(p), p.parent)
