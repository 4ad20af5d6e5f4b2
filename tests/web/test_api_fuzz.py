"""Random request bodies and run names never crash the real server: every answer is a 200 or a
4xx with a message (never a 5xx), and the server's log holds no traceback afterwards (conftest).

Bodies come three ways: field-aware (each field a valid value or junk, so many reach the cost
model), pasted Hugging Face configs (real shapes with keys spoiled: zeros, negatives, huge,
NaN, strings, lists), and arbitrary JSON or bytes sent to every route. 200 examples for the
calculator's bodies, fewer for the rest (about a minute in all on a loaded 2-core box);
TOKENPROBE_FUZZ_EXAMPLES=N runs N for the first and the same shares of N for the others.
"""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import quote

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenprobe.hardware import gpu_names
from tokenprobe.model import catalog_names

from .conftest import Server

EXAMPLES = int(os.environ.get("TOKENPROBE_FUZZ_EXAMPLES", "200"))


def fuzz(share: float) -> settings:
    return settings(
        max_examples=max(1, round(EXAMPLES * share)),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


JSON_HEADERS = {"Content-Type": "application/json"}

NUMBERS = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([0, 1, 2, 3, 7, 64, 4096, 2**31, 2**63, 10**9, 10**12, -1]),
    st.floats(allow_nan=True, allow_infinity=True),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, st.text(max_size=30))
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)

VALID: dict[str, st.SearchStrategy[Any]] = {
    "model": st.sampled_from([*catalog_names(), "/etc/passwd", "../x", "", "LLAMA-3.1-8B "]),
    "gpu": st.sampled_from([*gpu_names(), "h900", "../../etc/hosts.toml"]),
    "tp": st.sampled_from([1, 2, 4, 8, 3, 64]),
    "pp": st.sampled_from([1, 2, 3, 64]),
    "input_tokens": st.integers(min_value=1, max_value=2**20),
    "output_tokens": st.integers(min_value=1, max_value=2**20),
    "batch": st.integers(min_value=1, max_value=2**16),
    "weight_dtype": st.sampled_from(["bf16", "fp8", "int4", "mxfp4", "fp32", "fp7"]),
    "kv_dtype": st.sampled_from([None, "bf16", "fp8", "int8", "fp4"]),
    "power_limit_w": st.floats(min_value=1, max_value=5000),
    "profile": st.sampled_from([None, "vllm", "sglang", "tensorrt-llm", "tgi", "../x"]),
}

LLAMA = {
    "model_type": "llama",
    "hidden_size": 2048,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "num_hidden_layers": 16,
    "intermediate_size": 8192,
    "vocab_size": 32000,
}
BASE_CONFIGS = [
    LLAMA,
    {**LLAMA, "model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 2},
    {
        **LLAMA,
        "model_type": "deepseek_v3",
        "n_routed_experts": 64,
        "num_experts_per_tok": 6,
        "moe_intermediate_size": 1408,
        "first_k_dense_replace": 1,
        "kv_lora_rank": 512,
        "q_lora_rank": 1536,
        "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128,
        "v_head_dim": 128,
    },
    {**LLAMA, "model_type": "gemma3_text", "sliding_window": 1024, "head_dim": 256},
    {**LLAMA, "model_type": "gpt_oss", "sliding_window": 128, "num_local_experts": 32},
    {"model_type": "llava", "text_config": dict(LLAMA)},
]
CONFIG_KEYS = sorted({k for cfg in BASE_CONFIGS for k in cfg} | {"head_dim", "layer_types"})


@st.composite
def pasted_configs(draw: st.DrawFn) -> dict[str, Any]:
    cfg = dict(draw(st.sampled_from(BASE_CONFIGS)))
    for key in draw(st.lists(st.sampled_from(CONFIG_KEYS), max_size=4)):
        cfg[key] = draw(st.one_of(NUMBERS, JSON_VALUES))
    return cfg


@st.composite
def field_bodies(draw: st.DrawFn) -> dict[str, Any]:
    """A body whose fields are each a valid value (mostly) or junk; sometimes a pasted config."""
    body: dict[str, Any] = {}
    for name in draw(st.lists(st.sampled_from([*VALID, "hf_config", "extra"]), max_size=6)):
        if name == "hf_config":
            body[name] = draw(pasted_configs())
        elif name in VALID and draw(st.integers(0, 3)):
            body[name] = draw(VALID[name])
        else:
            body[name] = draw(JSON_VALUES)
    return body


def _assert_answered(r: httpx.Response, what: object) -> None:
    """An answer, not a crash: below 500 (a redirect of "/runs/." to "/runs" is fine), and a
    refusal says why."""
    assert r.status_code < 500, (what, r.status_code, r.text)
    if r.status_code >= 400 and r.headers.get("content-type") == "application/json":
        assert r.json()["detail"], (what, r.text)


def _post(server: Server, path: str, content: bytes) -> httpx.Response:
    return httpx.post(f"{server.url}{path}", content=content, headers=JSON_HEADERS, timeout=120)


@fuzz(1.0)
# a what-if estimates on every catalog GPU: one in four, to keep the default run short
@given(path=st.sampled_from(["/api/estimate"] * 3 + ["/api/whatif"]), body=field_bodies())
def test_field_bodies_never_crash(server: Server, path: str, body: dict[str, Any]) -> None:
    if path == "/api/whatif":
        body.pop("gpu", None)  # not a what-if field; keep most bodies past validation
    _assert_answered(_post(server, path, json.dumps(body).encode()), body)


@fuzz(0.5)
@given(cfg=pasted_configs(), batch=st.integers(1, 64))
def test_pasted_configs_never_crash(server: Server, cfg: dict[str, Any], batch: int) -> None:
    body = json.dumps({"hf_config": cfg, "batch": batch}).encode()
    _assert_answered(_post(server, "/api/estimate", body), cfg)


ROUTES = [
    ("POST", "/api/estimate"),
    ("POST", "/api/whatif"),
    ("GET", "/api/catalog"),
    ("GET", "/api/runs"),
    ("GET", "/api/runs/sim-small"),
    ("GET", "/"),
    ("PUT", "/api/estimate"),
]


@fuzz(0.25)
@given(
    route=st.sampled_from(ROUTES),
    content=st.one_of(
        JSON_VALUES.map(lambda v: json.dumps(v).encode()),  # NaN/Infinity written as such
        st.binary(max_size=200),
    ),
)
def test_any_body_to_any_route_never_crashes(
    server: Server, route: tuple[str, str], content: bytes
) -> None:
    method, path = route
    r = httpx.request(
        method, f"{server.url}{path}", content=content, headers=JSON_HEADERS, timeout=120
    )
    _assert_answered(r, (route, content))


@fuzz(0.25)
@given(
    prefix=st.sampled_from(["/api/runs/", "/runs/"]),
    name=st.one_of(
        st.text(min_size=1, max_size=40),
        st.lists(st.sampled_from(["..", ".", "/", "%2e", "%2f", "sim-small", "\x00", "~"])).map(
            "".join
        ),
    ),
)
def test_run_names_never_crash(server: Server, prefix: str, name: str) -> None:
    r = httpx.get(f"{server.url}{prefix}{quote(name, safe='%')}", timeout=60)
    _assert_answered(r, name)
    assert "top secret" not in r.text
