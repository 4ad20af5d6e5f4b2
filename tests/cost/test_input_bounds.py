"""Sizes and numbers entering `tokenprobe.estimate`: extremes are refused by name, never hang,
overflow or come back as NaN (issue 15)."""

from __future__ import annotations

import json
import math
import tracemalloc
from typing import Any

import pytest

import tokenprobe
from tokenprobe.cost.deployment import MAX_GPUS
from tokenprobe.cost.estimate import MAX_BATCH, MAX_CONTEXT_TOKENS
from tokenprobe.cost.network import HTTP_REQUEST_HEADERS_BYTES, request_bytes
from tokenprobe.errors import ConfigError

BASE: dict[str, Any] = {"input_tokens": 128, "output_tokens": 16}


def _estimate(**kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = tokenprobe.estimate(
        "llama-3.1-8b", "h100-sxm", **{**BASE, **kw}
    ).to_dict()
    return out


def _non_finite(value: Any, path: str = "") -> list[str]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _non_finite(v, f"{path}.{k}")]
    if isinstance(value, list | tuple):
        return [p for i, v in enumerate(value) for p in _non_finite(v, f"{path}[{i}]")]
    if isinstance(value, float) and not math.isfinite(value):
        return [path]
    return []


@pytest.mark.parametrize(
    ("field", "limit"),
    [
        ("input_tokens", MAX_CONTEXT_TOKENS),
        ("output_tokens", MAX_CONTEXT_TOKENS),
        ("batch", MAX_BATCH),
    ],
)
def test_request_sizes_up_to_the_limit_are_finite_and_above_it_refused(
    field: str, limit: int
) -> None:
    assert not _non_finite(_estimate(**{field: limit}))
    for value in (limit + 1, 10**9, 10**300, 0, -1, True, 1.5, "8", None):
        with pytest.raises(ConfigError) as info:
            _estimate(**{field: value})
        assert info.value.field == field


def test_a_prompt_size_costs_no_memory_of_its_own() -> None:
    """The request body is sized in closed form: a 10^9-token prompt used to be built as a 4 GB
    string (68 s and 11.8 GB for `estimate --input-tokens 1000000000`)."""
    tracemalloc.start()
    try:
        n = request_bytes(10**9, "llama-3.1-8b")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10**6
    assert n > 4 * 10**9


@pytest.mark.parametrize("tokens", [0, 1, 7, 1000])
@pytest.mark.parametrize("model", ["llama-3.1-8b", 'mödel "quoted"'])
def test_request_bytes_equal_the_body_it_stands_for(tokens: int, model: str) -> None:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "x" * (4 * tokens)}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 1024,
    }
    assert request_bytes(tokens, model) == HTTP_REQUEST_HEADERS_BYTES + len(json.dumps(body))


FLOATS = [
    "power_limit_w",
    "gpu_memory_utilization",
    "pue",
    "server_overhead_fraction",
    "electricity_usd_per_kwh",
    "gpu_hour_usd",
    "tokenizer_tokens_per_s",
    "network_rtt_s",
    "cpu_offload_bytes",
]


@pytest.mark.parametrize("field", FLOATS)
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, True, [1.0], "fast"])
def test_non_finite_or_non_numeric_floats_are_refused_by_name(field: str, value: Any) -> None:
    with pytest.raises(ConfigError) as info:
        _estimate(**{field: value})
    assert field in info.value.field


@pytest.mark.parametrize("value", [math.nan, math.inf, "half", None, 1.5])
def test_efficiency_overrides_are_checked(value: Any) -> None:
    with pytest.raises(ConfigError, match=r"efficiency\.memory"):
        _estimate(efficiency={"memory": value})


def test_a_number_written_as_text_reads_as_that_number() -> None:
    """files.finite reads "0.5" as 0.5 (CLI and file values arrive as text)."""
    assert _estimate(efficiency={"memory": "0.5"}) == _estimate(efficiency={"memory": 0.5})


@pytest.mark.parametrize("field", ["tp", "pp", "num_gpus"])
@pytest.mark.parametrize("value", [0, -2, True, 2.0, "2", MAX_GPUS + 1])
def test_parallel_degrees_are_integers_in_range(field: str, value: Any) -> None:
    with pytest.raises(ConfigError) as info:
        _estimate(**{field: value})
    assert info.value.field == field


@pytest.mark.parametrize(
    ("field", "value"),
    [("model", 3), ("gpu", None), ("weight_dtype", None), ("kv_dtype", 8), ("host", None),
     ("power", "low"), ("efficiency", [0.5])],
)  # fmt: skip
def test_values_of_the_wrong_kind_are_refused_by_name(field: str, value: Any) -> None:
    kw = {**BASE, field: value}
    model, gpu = kw.pop("model", "llama-3.1-8b"), kw.pop("gpu", "h100-sxm")
    with pytest.raises(ConfigError) as info:
        tokenprobe.estimate(model, gpu, **kw)
    assert info.value.field == field
