"""The JSON API over real HTTP: good answers, and a clear 4xx for every kind of bad input while
the server stays up."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tokenprobe.hardware import gpu_names
from tokenprobe.model import catalog_names

from .conftest import RUN_NAME, Server


def _post(server: Server, path: str, body: Any) -> httpx.Response:
    return httpx.post(f"{server.url}{path}", json=body, timeout=60)


def test_catalog_lists_models_gpus_and_dtypes(server: Server) -> None:
    c = httpx.get(f"{server.url}/api/catalog").json()
    assert c["models"] == catalog_names()
    assert [g["name"] for g in c["gpus"]] == gpu_names()
    assert "fp8" in c["dtypes"] and c["limits"]["batch"]["min"] == 1


def test_estimate_matches_the_library(server: Server) -> None:
    import tokenprobe

    body = {"model": "llama-3.1-8b", "gpu": "h200", "batch": 4, "input_tokens": 2048}
    r = _post(server, "/api/estimate", body)
    assert r.status_code == 200
    j = r.json()
    want = tokenprobe.estimate(
        "llama-3.1-8b", "h200", input_tokens=2048, output_tokens=256, batch=4
    ).to_dict()
    assert j["estimate"]["tpot_s"] == pytest.approx(want["tpot_s"])
    assert j["estimate"]["ttft_s"] == pytest.approx(want["ttft_s"])
    assert {"roofline", "shares", "tpot", "throughput", "memory", "kv"} <= set(j["figures"])


def test_a_shipped_profile_is_applied_and_listed(server: Server) -> None:
    import tokenprobe
    from tokenprobe.calibrate import load_profile, shipped_profiles

    assert httpx.get(f"{server.url}/api/catalog").json()["profiles"] == shipped_profiles()
    body = {"model": "qwen3-8b", "gpu": "h100-sxm", "input_tokens": 233, "profile": "sglang"}
    j = _post(server, "/api/estimate", body).json()
    p = load_profile("sglang")
    want = tokenprobe.estimate(
        "qwen3-8b",
        "h100-sxm",
        input_tokens=233,
        output_tokens=256,
        efficiency=p.efficiency,
        power=p.power,
    ).to_dict()
    assert j["estimate"]["ttft_s"] == pytest.approx(want["ttft_s"])
    assert j["estimate"]["ttft_breakdown_s"]["frontend_s"] == pytest.approx(
        p.efficiency.request_overhead_s
    )
    plain = _post(server, "/api/estimate", {**body, "profile": None}).json()
    assert plain["estimate"]["ttft_s"] < j["estimate"]["ttft_s"]


def test_pasted_config_is_estimated(server: Server) -> None:
    cfg = {
        "model_type": "llama",
        "hidden_size": 2048,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "num_hidden_layers": 16,
        "intermediate_size": 8192,
        "vocab_size": 32000,
    }
    r = _post(server, "/api/estimate", {"hf_config": cfg, "gpu": "h100-sxm"})
    assert r.status_code == 200, r.text
    assert r.json()["estimate"]["params_total"] > 1e9


def test_whatif_covers_every_catalog_gpu(server: Server) -> None:
    r = _post(server, "/api/whatif", {"model": "llama-3.1-70b", "tp": 2, "batch": 8})
    assert r.status_code == 200
    rows = r.json()["rows"]
    assert sorted(row["gpu"] for row in rows) == sorted(gpu_names())
    fitting = [row for row in rows if row.get("fits")]
    assert fitting and all(row["output_tokens_per_s"] > 0 for row in fitting)
    # sorted: fitting GPUs first, fastest first
    speeds = [row["output_tokens_per_s"] for row in fitting]
    assert speeds == sorted(speeds, reverse=True)


BAD_ESTIMATES: list[tuple[str, Any, int, str]] = [
    ("unknown model", {"model": "llama-9-000b"}, 400, "model="),
    ("unknown GPU", {"gpu": "h900"}, 400, "closest known"),
    ("model as a path", {"model": "/etc/passwd"}, 400, "model="),
    ("GPU as a path", {"gpu": "../../etc/hosts.toml"}, 400, "gpu="),
    ("negative batch", {"batch": -1}, 422, "batch"),
    ("zero input", {"input_tokens": 0}, 422, "input_tokens"),
    ("huge output", {"output_tokens": 10**12}, 422, "output_tokens"),
    ("huge integer", {"batch": 10**40}, 422, "batch"),
    ("string number", {"batch": "8"}, 422, "valid integer"),
    ("float batch", {"batch": 2.5}, 422, "batch"),
    ("bool tp", {"tp": True}, 422, "tp"),
    ("null gpu", {"gpu": None}, 422, "gpu"),
    ("list body", [1, 2], 422, "body"),
    ("unknown key", {"bacth": 8}, 422, "bacth"),
    ("unknown dtype", {"weight_dtype": "fp7"}, 422, "weight_dtype"),
    ("negative power", {"power_limit_w": -5}, 422, "power_limit_w"),
    ("TP the model cannot split", {"tp": 7}, 400, "tp"),
    ("profile that does not ship", {"profile": "tgi"}, 400, "profile"),
    ("profile as a path", {"profile": "../../etc/passwd"}, 400, "profile"),
    ("pasted config without sizes", {"hf_config": {"model_type": "llama"}}, 400, "hf_config"),
    ("pasted config with huge sizes", {"hf_config": {"hidden_size": 10**15}}, 400, "hf_config"),
]


@pytest.mark.parametrize(("case", "body", "status", "words"), BAD_ESTIMATES)
def test_bad_estimate_input_is_a_clear_4xx(
    server: Server, case: str, body: Any, status: int, words: str
) -> None:
    r = _post(server, "/api/estimate", body)
    assert r.status_code == status, (case, r.text)
    assert words in r.json()["detail"], (case, r.json())
    assert server.alive()


def test_broken_json_and_huge_bodies_are_refused(server: Server) -> None:
    headers = {"Content-Type": "application/json"}
    r = httpx.post(f"{server.url}/api/estimate", content=b'{"batch": ', headers=headers)
    assert r.status_code == 422 and "JSON" in r.json()["detail"]
    digits = b'{"batch": ' + b"9" * 5000 + b"}"  # past Python's int-from-string limit
    r = httpx.post(f"{server.url}/api/estimate", content=digits, headers=headers)
    assert r.status_code in (400, 422) and r.json()["detail"]
    r = httpx.post(f"{server.url}/api/estimate", content=b" " * 2_000_000, headers=headers)
    assert r.status_code == 413
    assert server.alive()


def test_whatif_rejects_bad_input(server: Server) -> None:
    assert _post(server, "/api/whatif", {"model": "nope"}).status_code == 400
    assert _post(server, "/api/whatif", {"batch": -3}).status_code == 422
    assert _post(server, "/api/whatif", {"gpu": "h100-sxm"}).status_code == 422  # not a field
    assert server.alive()


def test_runs_are_listed_and_reported(server: Server) -> None:
    runs = httpx.get(f"{server.url}/api/runs").json()["runs"]
    assert [r["name"] for r in runs] == [RUN_NAME]
    assert runs[0]["completed"] == 200
    summary = httpx.get(f"{server.url}/api/runs/{RUN_NAME}").json()["summary"]
    assert summary["completed"] == 200
    page = httpx.get(f"{server.url}/runs/{RUN_NAME}", timeout=60)
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert 'id="fig-timeline"' in page.text


TRAVERSALS = [
    "..",
    "../secret.txt",
    "..%2Fsecret.txt",
    "..%2F..%2F..%2Fetc%2Fpasswd",
    "%2Fetc%2Fpasswd",
    "sim-small%2F..%2F..%2Fsecret.txt",
    ".hidden",
    "a%00b",
    "~root",
]


@pytest.mark.parametrize("name", TRAVERSALS)
@pytest.mark.parametrize("prefix", ["/runs/", "/api/runs/"])
def test_run_names_cannot_leave_the_runs_folder(server: Server, prefix: str, name: str) -> None:
    status, text = server.raw_get(prefix + name)
    assert 400 <= status < 500, (name, status, text[:200])
    assert "top secret" not in text
    assert server.alive()


def test_a_symlink_out_of_the_runs_folder_is_not_a_run(server: Server) -> None:
    link = server.runs_dir / "escape"
    link.symlink_to(server.secret.parent)
    try:
        assert httpx.get(f"{server.url}/runs/escape").status_code == 404
        names = [r["name"] for r in httpx.get(f"{server.url}/api/runs").json()["runs"]]
        assert "escape" not in names
    finally:
        link.unlink()


def test_unknown_run_is_404_with_a_message(server: Server) -> None:
    r = httpx.get(f"{server.url}/runs/no-such-run")
    assert r.status_code == 404 and "no-such-run" in r.json()["detail"]


def test_plotly_is_served_from_the_package(server: Server) -> None:
    from tokenprobe.report.html import plotly_js

    r = httpx.get(f"{server.url}/static/plotly.js", timeout=30)
    assert r.status_code == 200 and r.text == plotly_js()
    page = httpx.get(f"{server.url}/").text
    assert '<script src="/static/plotly.js">' in page and "cdn" not in page.lower()
