"""Property tests: arbitrary bytes, lines and JSON values never make the SSE parsers or the result
importers raise anything but their documented failure.

- `LineSplitter` + `take_line` (the client's whole per-line path): at most RequestFailedError
  (which becomes a failure record); whatever is accepted is finite where it is a number.
- `import_runs` over any JSON file: Runs or SchemaError, and the Runs it gives can be written.

~200 examples each, no deadline (machine load must not fail a test); TOKENPROBE_FUZZ_EXAMPLES
raises the count for a long run.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenprobe.errors import SchemaError
from tokenprobe.loadgen.importers import import_runs
from tokenprobe.loadgen.sse import (
    LineSplitter,
    MalformedStreamError,
    RequestFailedError,
    ServerStreamError,
    StreamState,
    chunk_fields,
    server_figures,
    take_line,
)
from tokenprobe.records import write_run

FUZZ = settings(
    max_examples=int(os.environ.get("TOKENPROBE_FUZZ_EXAMPLES", "200")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=5)
    ),
    max_leaves=25,
)
KEYS = ["choices", "text", "delta", "content", "reasoning_content", "finish_reason", "usage"]
KEYS += ["timings", "prompt_ms", "predicted_ms", "prompt_n", "predicted_n", "cache_n", "error"]
KEYS += ["completion_tokens", "prompt_tokens", "total_tokens"]
# JSON objects built from the keys a chunk really has, so the fuzzer reaches the deep branches
chunk_like = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=5)
    ),
    max_leaves=30,
)


def _feed_all(data: bytes, cuts: list[int]) -> StreamState:
    state = StreamState()
    splitter = LineSplitter(max_line_bytes=4096)
    bounds = [0, *sorted({c % (len(data) + 1) for c in cuts}), len(data)]
    try:
        for a, b in itertools.pairwise(bounds):
            for line in splitter.feed(data[a:b]):
                if take_line(line, 1.0, state, "text/event-stream"):
                    return state
        if splitter.pending:
            take_line(splitter.pending, 2.0, state, "text/event-stream")
    except MalformedStreamError:  # the line bound: the client turns it into malformed_stream
        pass
    except RequestFailedError as exc:
        assert exc.kind in ("malformed_stream", "stream_error") and exc.message
    return state


def _assert_finite_figures(state: StreamState) -> None:
    for value in server_figures(state).values():
        assert not isinstance(value, float) or math.isfinite(value)
    json.dumps(server_figures(state), allow_nan=False)


@FUZZ
@given(st.binary(max_size=600), st.lists(st.integers(min_value=0), max_size=6))
def test_any_bytes_are_lines_a_failure_or_data(data: bytes, cuts: list[int]):
    _assert_finite_figures(_feed_all(data, cuts))


@FUZZ
@given(
    st.lists(st.one_of(json_values, chunk_like), min_size=1, max_size=4),
    st.sampled_from([b"data: ", b"data:", b"error: ", b"", b": ", b"event: "]),
)
def test_any_json_values_in_data_lines_are_chunks_or_a_failure(values: list[Any], prefix: bytes):
    stream = b"".join(prefix + json.dumps(v).encode() + b"\r\n\n" for v in values)
    _assert_finite_figures(_feed_all(stream, []))


@FUZZ
@given(chunk_like)
def test_chunk_fields_gives_typed_fields_or_a_documented_error(value: Any):
    try:
        text, finish, usage, timings = chunk_fields(json.dumps(value).encode())
    except (MalformedStreamError, ServerStreamError):  # anything else fails the test
        return
    assert isinstance(text, str) and (finish is None or isinstance(finish, str))
    assert usage is None or isinstance(usage, dict)
    assert timings is None or isinstance(timings, dict)


VLLM_KEYS = ["input_lens", "output_lens", "ttfts", "itls", "errors", "start_times", "duration"]
VLLM_KEYS += ["request_rate", "burstiness", "max_concurrency", "model_id", "backend"]
number_lists = st.lists(
    st.one_of(st.integers(-5, 10**20), st.floats(allow_nan=False), st.none(), st.text(max_size=3)),
    max_size=4,
)
vllm_docs = st.dictionaries(
    st.sampled_from(VLLM_KEYS),
    st.one_of(number_lists, st.lists(number_lists, max_size=4), json_values),
    max_size=len(VLLM_KEYS),
)
timing_keys = ["request_start", "targeted_start", "first_token_iteration"]
timing_keys += ["last_token_iteration", "request_end"]
guidellm_request = st.fixed_dictionaries(
    {},
    optional={
        "request_id": json_values,
        "prompt_tokens": st.one_of(st.integers(-3, 2**60), json_values),
        "output_tokens": st.one_of(st.integers(-3, 2**60), json_values),
        "info": st.one_of(
            st.fixed_dictionaries(
                {"timings": st.dictionaries(st.sampled_from(timing_keys), scalars, max_size=5)},
                optional={"error": json_values},
            ),
            json_values,
        ),
    },
)
guidellm_docs = st.fixed_dictionaries(
    {},
    optional={
        "benchmarks": st.one_of(
            st.lists(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "id": json_values,
                        "duration": scalars,
                        "requests": st.one_of(
                            st.dictionaries(
                                st.sampled_from(["successful", "incomplete", "errored"]),
                                st.one_of(st.lists(guidellm_request, max_size=3), json_values),
                            ),
                            json_values,
                        ),
                    },
                ),
                max_size=3,
            ),
            json_values,
        )
    },
)


def _import(tmp_path: Path, doc: Any, source: str, raw: str | None = None) -> None:
    path = tmp_path / "result.json"
    path.write_text(raw if raw is not None else json.dumps(doc), encoding="utf-8")
    try:
        runs = import_runs(path, source)
    except SchemaError as exc:
        assert str(path) in str(exc)
        return
    for i, run in enumerate(runs):  # what is accepted can be written (no NaN, no odd types)
        write_run(run, tmp_path / f"out{i}")


@FUZZ
@given(st.one_of(vllm_docs, json_values))
def test_vllm_import_of_any_json_is_runs_or_a_schema_error(tmp_path: Path, doc: Any):
    _import(tmp_path, doc, "vllm")


@FUZZ
@given(st.one_of(guidellm_docs, json_values))
def test_guidellm_import_of_any_json_is_runs_or_a_schema_error(tmp_path: Path, doc: Any):
    _import(tmp_path, doc, "guidellm")


@FUZZ
@given(st.binary(max_size=200), st.sampled_from(["vllm", "guidellm", "aiperf", "auto"]))
def test_import_of_any_bytes_is_runs_or_a_schema_error(tmp_path: Path, data: bytes, source: str):
    path = tmp_path / "result.json"
    path.write_bytes(data)
    with contextlib.suppress(SchemaError):  # anything else fails the test
        import_runs(path, source)


def test_vllm_import_refuses_a_nan_or_1e999_by_name(tmp_path: Path):
    doc = '{"input_lens":[1],"output_lens":[1],"ttfts":[1e999],"itls":[[]]}'
    path = tmp_path / "r.json"
    path.write_text(doc)
    try:
        import_runs(path, "vllm")
    except SchemaError as exc:
        assert "ttfts[0]" in str(exc)
    else:
        raise AssertionError("an infinite ttft was imported")
