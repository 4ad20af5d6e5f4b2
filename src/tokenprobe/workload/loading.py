"""Workload files (TOML or JSON): the package docstring shows the keys; unknown keys refused."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tokenprobe.errors import ConfigError, SchemaError
from tokenprobe.files import parse_json, parse_toml, read_text
from tokenprobe.workload.arrivals import Arrival
from tokenprobe.workload.conversation import Conversation
from tokenprobe.workload.datasets import DatasetLengths, DatasetOptions, load_dataset_lengths
from tokenprobe.workload.lengths import LengthDist, read_lengths_file
from tokenprobe.workload.spec import Workload
from tokenprobe.workload.trace import read_trace

_TOP_KEYS = {"name", "num_requests", "shared_prefix_tokens", "arrival", "input_tokens"}
_TOP_KEYS |= {"output_tokens", "prefix_groups", "dataset", "conversation"}
_ARRIVAL_KEYS = {"kind", "rate_per_s", "burstiness", "concurrency", "trace_file"}
_DATASET_KEYS = {"file", "output_tokens", "max_input_tokens", "max_output_tokens"}
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


def _dataset_from(doc: Mapping[str, Any], base: Path, where: str) -> DatasetLengths:
    """[dataset]: file (relative to the workload file) and the length options; the lengths are
    estimated here (bench recounts them with the server's tokenizer)."""
    table = _table(doc, "dataset", _DATASET_KEYS, where)
    if "file" not in table:
        raise SchemaError(where, '[dataset] needs file = "..."')
    clash = [k for k in ("input_tokens", "output_tokens") if k in doc]
    if clash:
        raise SchemaError(where, f"[{clash[0]}] and [dataset] both give lengths; keep one")
    path = base / _file_name(table, "file", where)
    del table["file"]
    return load_dataset_lengths(path, DatasetOptions(**table))


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
    kwargs["prefix_groups"] = doc.get("prefix_groups", 1)
    if "conversation" in doc:
        table = _table(doc, "conversation", {"turns", "think_s"}, where)
        kwargs["conversation"] = Conversation(**table)
    if "dataset" in doc:
        kwargs["dataset"] = _dataset_from(doc, base, where)
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
