"""Workload TOML/JSON files, traces and length files (workload.py): a valid Workload (within the
size limits) or ConfigError."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from tokenprobe.cli import app
from tokenprobe.workload import (
    MAX_LENGTH_TOKENS,
    MAX_REQUESTS,
    Workload,
    load_workload,
    read_lengths_file,
    read_trace,
)

from .conftest import (
    FUZZ,
    NOT_FILE_KINDS,
    assert_schema_error_naming,
    dumps_toml,
    file_contents,
    mutated_docs,
    not_a_file,
    parse_or_config_error,
)

DOC: dict[str, Any] = {
    "name": "chat",
    "num_requests": 50,
    "shared_prefix_tokens": 16,
    "arrival": {"kind": "gamma", "rate_per_s": 4.0, "burstiness": 0.5, "concurrency": 4},
    "input_tokens": {"kind": "normal", "mean": 512, "std": 128, "low": 1, "high": 9},
    "output_tokens": {"kind": "lognormal", "mean": 200, "sigma": 0.8, "value": 3},
}
KINDS = {
    "arrival": ["poisson", "gamma", "constant", "offline", "closed"],
    "tokens": ["fixed", "uniform", "normal", "lognormal", "empirical"],
}
TRACE_CSV = b"arrival_s,input_tokens,output_tokens\n0.0,10,20\n0.5,30,40\n1.25,7,9\n"
TRACE_JSONL = b'{"arrival_s": 0, "input_tokens": 5, "output_tokens": 6, "request_id": "a"}\n'


def _check(w: Workload | None) -> None:
    if w is None:
        return
    assert 1 <= w.size <= MAX_REQUESTS
    if w.size <= 2000:  # small enough to generate here: every request is a valid one
        reqs = w.generate(np.random.default_rng(0))
        assert len(reqs) == w.size
        for r in reqs:
            assert math.isfinite(r.arrival_s) and r.arrival_s >= 0
            assert 1 <= r.input_tokens <= MAX_LENGTH_TOKENS
            assert 1 <= r.output_tokens <= MAX_LENGTH_TOKENS
            assert 0 <= r.prefix_tokens <= r.input_tokens


@st.composite
def workload_docs(draw: st.DrawFn) -> dict[str, Any]:
    doc = dict(DOC)
    doc["arrival"] = {**DOC["arrival"], "kind": draw(st.sampled_from(KINDS["arrival"]))}
    for key in ("input_tokens", "output_tokens"):
        doc[key] = {**DOC[key], "kind": draw(st.sampled_from(KINDS["tokens"]))}
        if doc[key]["kind"] == "empirical":
            doc[key]["values"] = [3, 5, 8]
    return draw(mutated_docs(doc))


@FUZZ
@given(doc=workload_docs(), as_json=st.booleans())
def test_hostile_values(tmp_path: Path, doc: dict[str, Any], as_json: bool) -> None:
    if as_json:
        path = tmp_path / "w.json"
        path.write_text(json.dumps(doc))  # NaN/Infinity as JSON writes them: refused
    else:
        path = tmp_path / "w.toml"
        path.write_text(dumps_toml(doc))
    _check(parse_or_config_error(load_workload, path))


@FUZZ
@given(data=file_contents(dumps_toml(DOC).encode()), suffix=st.sampled_from([".toml", ".json"]))
def test_random_and_mutated_bytes(tmp_path: Path, data: bytes, suffix: str) -> None:
    path = tmp_path / f"w{suffix}"
    path.write_bytes(data)
    _check(parse_or_config_error(load_workload, path))


@FUZZ
@given(
    data=st.one_of(file_contents(TRACE_CSV), file_contents(TRACE_JSONL)),
    suffix=st.sampled_from([".csv", ".jsonl"]),
)
def test_trace_files(tmp_path: Path, data: bytes, suffix: str) -> None:
    path = tmp_path / f"t{suffix}"
    path.write_bytes(data)
    arrival = parse_or_config_error(read_trace, path)
    if arrival is not None:
        _check(Workload(arrival))


@FUZZ
@given(
    cell=st.sampled_from(["nan", "inf", "-1", "1e999", "1.5", "99999999999", "0", "[N/A]", "x"]),
    column=st.sampled_from(["arrival_s", "input_tokens", "output_tokens"]),
)
def test_trace_cells_name_file_and_line(tmp_path: Path, cell: str, column: str) -> None:
    row = {"arrival_s": "0.5", "input_tokens": "10", "output_tokens": "20", column: cell}
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,input_tokens,output_tokens\n0,1,1\n" + ",".join(row.values()))
    if column == "arrival_s" and cell in ("1.5", "0", "99999999999"):
        assert parse_or_config_error(read_trace, path) is not None  # a valid time
        return
    with pytest.raises(Exception) as info:
        read_trace(path)
    assert info.type.__name__ == "SchemaError" and "t.csv:3" in str(info.value)


@FUZZ
@given(data=file_contents(b"# lengths\n100\n200\n\n300\n"))
def test_length_files(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "lens.txt"
    path.write_bytes(data)
    dist = parse_or_config_error(read_lengths_file, path)
    if dist is not None:
        assert all(1 <= v <= MAX_LENGTH_TOKENS for v in dist.values)


@pytest.mark.parametrize("kind", NOT_FILE_KINDS)
@pytest.mark.parametrize("role", ["workload", "trace", "lengths"])
def test_paths_that_are_not_files(tmp_path: Path, kind: str, role: str) -> None:
    name = {"workload": "w.toml", "trace": "t.csv", "lengths": "lens.txt"}[role]
    bad = not_a_file(tmp_path, kind, name)
    if role == "workload":
        assert_schema_error_naming(lambda: load_workload(bad), bad)
        return
    key = "trace_file" if role == "trace" else "file"
    table = "arrival" if role == "trace" else "input_tokens"
    doc = {"arrival": {"kind": "offline"}, table: {key: name}}
    if role == "lengths":
        doc[table]["kind"] = "empirical"
    path = tmp_path / "w.toml"
    path.write_text(dumps_toml(doc))
    assert_schema_error_naming(lambda: load_workload(path), bad)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("num_requests = 100000000000\n[arrival]\nkind = 'offline'\n", "num_requests"),
        ("[arrival]\nkind = 'closed'\nconcurrency = 100000000000\n", "concurrency"),
        ("[arrival]\nkind = 'offline'\n[input_tokens]\nvalue = 16777217\n", "input_tokens"),
        ("[arrival]\nkind = 'offline'\n[input_tokens]\nkind='normal'\nmean=nan\n", "mean"),
        ("[arrival]\nkind = 'poisson'\nrate_per_s = inf\n", "rate_per_s"),
        ("num_requests = true\n[arrival]\nkind = 'offline'\n", "num_requests"),
        ("shared_prefix_tokens = 'x'\n[arrival]\nkind = 'offline'\n", "shared_prefix_tokens"),
    ],
)
def test_sizes_and_values_are_refused_naming_file_and_field(
    tmp_path: Path, text: str, field: str
) -> None:
    path = tmp_path / "w.toml"
    path.write_text(text)
    with pytest.raises(Exception) as info:
        load_workload(path)
    assert info.type.__name__ == "SchemaError"
    assert "w.toml" in str(info.value) and field in str(info.value)


def test_cli_simulate_refuses_1e11_requests_with_the_limit() -> None:
    args = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--rate", "5"]
    args += ["--input-tokens", "100", "--output-tokens", "100", "--num-requests", "100000000000"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    flat = "".join(result.output.split())
    assert "num_requests" in flat and "10,000,000" in flat


@pytest.mark.parametrize("kind", ["fifo", "binary"])
def test_cli_simulate_with_a_bad_workload_file_exits_2(tmp_path: Path, kind: str) -> None:
    path = not_a_file(tmp_path, kind, "w.toml")
    args = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--workload", str(path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "w.toml" in "".join(result.output.split())
