"""Random request bodies and run names never crash the real server: every answer is 200 or a
4xx with a message."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import Server

VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["h100-sxm", "a100-sxm-80gb", "llama-3.1-8b", "fp8", "int4", "../x", ""]),
    st.text(max_size=20),
    st.lists(st.integers(), max_size=3),
)
FIELDS = st.sampled_from(
    [
        "model",
        "gpu",
        "tp",
        "pp",
        "input_tokens",
        "output_tokens",
        "batch",
        "weight_dtype",
        "kv_dtype",
        "power_limit_w",
        "hf_config",
        "extra",
    ]
)
BODIES = st.dictionaries(FIELDS, VALUES, max_size=6)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=BODIES)
def test_estimate_never_crashes(server: Server, body: dict[str, Any]) -> None:
    r = httpx.post(f"{server.url}/api/estimate", json=body, timeout=60)
    assert r.status_code == 200 or 400 <= r.status_code < 500, (body, r.status_code, r.text)
    if r.status_code != 200:
        assert r.json()["detail"]


@settings(max_examples=30, deadline=None)
@given(name=st.text(min_size=1, max_size=30))
def test_run_names_never_crash(server: Server, name: str) -> None:
    r = httpx.get(f"{server.url}/api/runs/{quote(name, safe='')}", timeout=30)
    assert r.status_code == 200 or 400 <= r.status_code < 500, (name, r.status_code, r.text)
    assert server.alive()
