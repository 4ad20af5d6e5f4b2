"""Shared settings and strategies of the parser fuzz suite (issue 15 items 5 and 9).

Each module feeds one parser generated file contents (random bytes, mutations of a valid example
from the catalog or the test data, valid documents with one value replaced by NaN, inf, a huge
or negative number or a value of the wrong type) and asserts the one contract: the parser
returns a valid object or raises ConfigError (SchemaError is one), nothing else, and returns.

`TOKENPROBE_FUZZ_EXAMPLES` sets the examples per test. Unset (CI), a small count with
`derandomize=True`, so the run is deterministic and the folder takes well under a minute on a
loaded 2-core box; set, that many random examples (e.g. 2000 for a soak run).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from tokenprobe.errors import ConfigError

FUZZ_EXAMPLES_ENV = "TOKENPROBE_FUZZ_EXAMPLES"
_ENV = os.environ.get(FUZZ_EXAMPLES_ENV, "").strip()
MAX_EXAMPLES = int(_ENV) if _ENV else 25
FUZZ = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=not _ENV,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
settings.register_profile("tokenprobe-fuzz", FUZZ)
CALL_LIMIT_S = 60  # "terminates": far above any honest parse, so load on the box cannot trip it

_T = TypeVar("_T")


class HangError(AssertionError):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise HangError(f"the parser ran for more than {CALL_LIMIT_S} s")


@contextlib.contextmanager
def terminates() -> Iterator[None]:
    """Fail (HangError) if the body runs past CALL_LIMIT_S: a FIFO read would block forever."""
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(CALL_LIMIT_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def parse_or_config_error(fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T | None:
    """`fn(*args)`, or None when it raised ConfigError; any other exception fails the test."""
    with terminates():
        try:
            return fn(*args, **kwargs)
        except ConfigError as exc:
            assert str(exc), "an error without a message"
            return None


def finite_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


# ---------------------------------------------------------------- values and documents

HOSTILE_NUMBERS = st.sampled_from(
    [math.nan, math.inf, -math.inf, -1, -1.0, 0, 0.0, 1e-320, 1e300, -1e300, 10**30, 2**63, 2**64]
)
HOSTILE_VALUES = st.one_of(
    HOSTILE_NUMBERS,
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(),
    st.text(max_size=12),
    st.sampled_from(["nan", "inf", "-1", "1e999", "[N/A]", "", "0x10", "\x00"]),
    st.lists(st.integers(min_value=-5, max_value=5), max_size=3),
    st.dictionaries(st.sampled_from(["a", "kind", "value"]), st.integers(), max_size=2),
)


def _toml_key(key: str) -> str:
    bare = key.replace("-", "").replace("_", "")
    return key if bare.isalnum() and key.isascii() else json.dumps(key)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        pairs = [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()]
        return "{" + ", ".join(pairs) + "}"
    raise TypeError(value)


def dumps_toml(doc: dict[str, Any], prefix: str = "") -> str:
    """A small TOML writer for the fuzz documents (tables, arrays of tables, scalars, lists)."""
    lines = []
    tables = []
    for key, value in doc.items():
        if isinstance(value, dict) or (
            isinstance(value, list) and value and all(isinstance(v, dict) for v in value)
        ):
            tables.append((key, value))
        else:
            lines.append(f"{_toml_key(key)} = {_toml_value(value)}")
    out = "\n".join(lines) + "\n"
    for key, value in tables:
        name = f"{prefix}{_toml_key(key)}"
        if isinstance(value, dict):
            out += f"\n[{name}]\n" + dumps_toml(value, f"{name}.")
        else:
            for item in value:
                out += f"\n[[{name}]]\n" + dumps_toml(item, f"{name}.")
    return out


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a leaf or a table of a nested dict/list document."""
    out: list[tuple[Any, ...]] = [prefix] if prefix else []
    if isinstance(doc, dict):
        for key, value in doc.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            out += _paths(value, (*prefix, i))
    return out


def _replaced(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(doc, dict):
        return {k: (_replaced(v, rest, value) if k == head else v) for k, v in doc.items()}
    return [(_replaced(v, rest, value) if i == head else v) for i, v in enumerate(doc)]


@st.composite
def mutated_docs(draw: st.DrawFn, doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` with one to three of its values (or tables) replaced by hostile ones, a key
    dropped, or an unknown key added."""
    out: Any = doc
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = _paths(out)
        path = draw(st.sampled_from(paths)) if paths else ()
        action = draw(st.sampled_from(["replace", "replace", "replace", "drop", "add"]))
        if action == "replace" and path:
            out = _replaced(out, path, draw(HOSTILE_VALUES))
        elif action == "drop" and path and isinstance(path[-1], str):
            parent = path[:-1]
            table = _get(out, parent)
            if isinstance(table, dict):
                out = _replaced(out, parent, {k: v for k, v in table.items() if k != path[-1]})
        else:
            parent = path[:-1] if path else ()
            table = _get(out, parent)
            if isinstance(table, dict):
                out = _replaced(out, parent, {**table, "unknown_key": draw(HOSTILE_VALUES)})
    assert isinstance(out, dict)
    return out


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        doc = doc[key]
    return doc


@st.composite
def mutated_bytes(draw: st.DrawFn, data: bytes) -> bytes:
    """`data` with a few bytes flipped, inserted or deleted, or cut short."""
    out = bytearray(data)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        if not out:
            break
        i = draw(st.integers(min_value=0, max_value=len(out) - 1))
        action = draw(st.sampled_from(["flip", "insert", "delete", "cut"]))
        if action == "flip":
            out[i] = draw(st.integers(min_value=0, max_value=255))
        elif action == "insert":
            out[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif action == "delete":
            del out[i]
        else:
            del out[i:]
    return bytes(out)


def file_contents(example: bytes) -> st.SearchStrategy[bytes]:
    """Random bytes, or the example mutated byte-wise."""
    return st.one_of(st.binary(max_size=300), mutated_bytes(example))


# ---------------------------------------------------------------- paths that are not files


def not_a_file(tmp_path: Path, kind: str, name: str) -> Path:
    """A path where a file is expected that is a folder, a FIFO, a dangling link, binary or
    not UTF-8 (chmod 000 does not stop root, so it is not among them)."""
    path = tmp_path / name
    if kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "dangling":
        path.symlink_to(tmp_path / "nowhere")
    elif kind == "binary":
        path.write_bytes(b"\x00\x01\x02 binary \xff")
    elif kind == "latin-1":
        path.write_bytes('name = "caf\xe9"\n'.encode("latin-1"))
    else:
        raise ValueError(kind)
    return path


NOT_FILE_KINDS = ("folder", "fifo", "dangling", "binary", "latin-1")


def assert_schema_error_naming(fn: Callable[[], object], path: Path) -> None:
    from tokenprobe.errors import SchemaError

    with terminates(), pytest.raises(SchemaError) as info:
        fn()
    assert path.name in str(info.value)
