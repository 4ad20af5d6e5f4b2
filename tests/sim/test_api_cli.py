"""`tokenprobe.simulate` and `tokenprobe simulate`: same numbers, run folder, bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import tokenprobe.cli.simulate  # noqa: F401  (registers the command until cli/__init__ does)
from tokenprobe.cli.app import app
from tokenprobe.errors import ConfigError
from tokenprobe.metrics import SUMMARY_KEYS
from tokenprobe.records import read_run
from tokenprobe.sim import simulate

runner = CliRunner()
FLAGS = ["--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--input-tokens", "512"]
FLAGS += ["--output-tokens", "128", "--rate", "8", "--num-requests", "120", "--seed", "3"]


def _roundtrip(d: object) -> object:
    return json.loads(json.dumps(d))


def test_python_api_equals_cli_json() -> None:
    result = simulate(
        "llama-3.1-8b",
        "h100-sxm",
        input_tokens=512,
        output_tokens=128,
        rate_per_s=8.0,
        num_requests=120,
        seed=3,
    )
    cli = runner.invoke(app, ["simulate", *FLAGS, "--json"])
    assert cli.exit_code == 0, cli.output
    data = json.loads(cli.output)
    assert data == _roundtrip(result.to_dict())
    for key in (*SUMMARY_KEYS, "energy", "kv", "preemptions", "rejected"):
        assert key in data
    assert data["energy"]["kwh_per_million_output_tokens"] > 0
    assert data["completed"] == 120 and data["output_tokens"] == 120 * 128


def test_tables_and_run_folder(tmp_path: Path) -> None:
    cli = runner.invoke(app, ["simulate", *FLAGS, "--out", str(tmp_path / "run")])
    assert cli.exit_code == 0, cli.output
    for text in ("TTFT", "TPOT", "KV blocks", "kWh per million"):
        assert text in cli.output
    run = read_run(tmp_path / "run")
    assert run.kind == "simulated" and len(run.records) == 120
    assert run.warnings == []
    assert run.config["model"] == "llama-3.1-8b"
    assert run.timeline and run.duration_s is not None
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["ttft_s"]["p50"] > 0 and summary["kv"]["capacity_blocks"] > 0


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--rate", "0"], "rate_per_s"),
        (["--rate", "1", "--offline"], "exactly one"),
        (["--input-tokens", "-5"], "input_tokens"),
        (["--scheduler", "magic"], "scheduler"),
        (["--max-num-seqs", "512", "--max-num-batched-tokens", "256"], "max_num_batched_tokens"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], needle: str) -> None:
    base = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--output-tokens", "8"]
    if "--input-tokens" not in args:
        base += ["--input-tokens", "8"]
    if "--rate" not in args and "--offline" not in args:
        base += ["--offline"]
    result = runner.invoke(app, [*base, *args])
    assert result.exit_code == 2, result.output
    assert needle in result.output and "Traceback" not in result.output


def test_unknown_scenario_and_unreadable_workload(tmp_path: Path) -> None:
    result = runner.invoke(app, ["simulate", "--scenario", "nope"])
    assert result.exit_code == 2 and "seed-003" in result.output
    bad = tmp_path / "w.toml"
    bad.write_text('[arrival]\nkind = "trace"\ntrace_file = "t.csv"\n')
    (tmp_path / "t.csv").write_text("arrival_s,input_tokens,output_tokens\n0,10,x\n")
    args = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--workload", str(bad)]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "t.csv:2" in result.output


def test_model_that_leaves_no_room_for_kv() -> None:
    with pytest.raises(ConfigError, match="does not fit"):
        simulate("llama-3.1-70b", "l4", input_tokens=8, output_tokens=8, offline=True)


def test_a_profile_adds_its_front_end_latency_to_ttft(tmp_path: Path) -> None:
    # a profile file with only a front-end latency: TTFT grows by it at concurrency 1, TPOT not
    profile = tmp_path / "slow-front.toml"
    profile.write_text('[engine]\nname = "x"\n[efficiency]\nrequest_overhead_s = 0.05\n')
    flags = ["--model", "qwen3-8b", "--gpu", "h100-sxm", "--input-tokens", "233"]
    flags += ["--output-tokens", "64", "--concurrency", "1", "--num-requests", "10", "--json"]
    base = json.loads(runner.invoke(app, ["simulate", *flags]).output)
    cli = runner.invoke(app, ["simulate", *flags, "--profile", str(profile)])
    assert cli.exit_code == 0, cli.output
    slow = json.loads(cli.output)
    assert slow["ttft_s"]["p50"] == pytest.approx(base["ttft_s"]["p50"] + 0.05, rel=1e-6)
    assert slow["tpot_s"]["p50"] == pytest.approx(base["tpot_s"]["p50"], rel=1e-6)


# 8k-token prompts with 1k outputs overfill a 0.3-utilisation KV cache
KV_STARVED = ["--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--input-tokens", "8000"]
KV_STARVED += ["--output-tokens", "1000", "--offline", "--num-requests", "60", "--json"]
KV_STARVED += ["--gpu-memory-utilization", "0.3"]


def test_cli_capacity_policy_stops_preemption() -> None:
    # on-demand blocks preempt, TensorRT-LLM's guaranteed-no-evict admits fewer, never preempts
    flags = KV_STARVED
    runs = {}
    for policy in ("max_utilization", "guaranteed_no_evict"):
        cli = runner.invoke(app, ["simulate", *flags, "--capacity-policy", policy])
        assert cli.exit_code == 0, cli.output
        runs[policy] = json.loads(cli.output)
    assert runs["max_utilization"]["preemptions"] > 0
    assert runs["guaranteed_no_evict"]["preemptions"] == 0
    assert (
        runs["guaranteed_no_evict"]["config"]["scheduler"]["capacity_policy"]
        == "guaranteed_no_evict"
    )
    assert all(r["completed"] == 60 for r in runs.values())


def test_cli_prefix_caching_is_vllms_default_and_can_be_turned_off() -> None:
    # the same KV-starved run: with vLLM v1's default prefix caching a preempted request finds
    # its computed blocks again, so the run ends sooner than with recomputation from scratch
    flags = KV_STARVED
    runs = {s: _simulate_json(*flags, *([s] if s else [])) for s in ("", "--no-prefix-caching")}
    on, off = runs[""], runs["--no-prefix-caching"]
    assert on["config"]["scheduler"]["prefix_caching"] is True
    assert off["config"]["scheduler"]["prefix_caching"] is False
    assert on["preemptions"] > 0 and off["preemptions"] > 0
    assert on["duration_s"] < off["duration_s"]
    assert all(r["completed"] == 60 for r in (on, off))


def _simulate_json(*args: str) -> dict[str, Any]:
    cli = runner.invoke(app, ["simulate", *args])
    assert cli.exit_code == 0, cli.output
    out: dict[str, Any] = json.loads(cli.output)
    return out


def test_cli_memory_rule_sizes_the_kv_cache() -> None:
    flags = ["--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--input-tokens", "100"]
    flags += ["--output-tokens", "10", "--offline", "--num-requests", "4", "--json"]
    kv = {}
    for rule in ("vllm", "sglang", "tensorrt-llm"):
        out = _simulate_json(*flags, "--memory-rule", rule)
        assert out["config"]["scheduler"]["memory_rule"] == rule
        kv[rule] = out["kv"]["capacity_tokens"]
    assert kv["vllm"] < kv["sglang"] < kv["tensorrt-llm"]
    bad = runner.invoke(app, ["simulate", *flags, "--memory-rule", "tgi"])
    assert bad.exit_code != 0 and "memory_rule" in bad.output


def test_cli_engine_presets_start_from_each_engines_defaults() -> None:
    flags = ["--model", "qwen3-8b", "--gpu", "h100-sxm", "--input-tokens", "200"]
    flags += ["--output-tokens", "20", "--offline", "--num-requests", "8", "--json"]
    configs = {
        engine: _simulate_json(*flags, "--engine", engine)["config"]["scheduler"]
        for engine in ("vllm", "sglang", "tensorrt-llm")
    }
    assert configs["vllm"]["max_num_seqs"] == 1024 and configs["vllm"]["memory_rule"] == "vllm"
    assert configs["sglang"]["gpu_memory_utilization"] == 0.88  # mem_fraction_static at TP 1
    assert configs["sglang"]["memory_rule"] == "sglang"
    trt = configs["tensorrt-llm"]
    assert trt["capacity_policy"] == "guaranteed_no_evict" and trt["max_num_seqs"] == 2048
    # the flags still override the preset
    out = _simulate_json(*flags, "--engine", "sglang", "--max-num-seqs", "64")
    assert out["config"]["scheduler"]["max_num_seqs"] == 64
    bad = runner.invoke(app, ["simulate", *flags, "--engine", "tgi"])
    assert bad.exit_code != 0 and "engine" in bad.output and "tensorrt-llm" in bad.output


def test_cli_sglang_scheduler_flags() -> None:
    flags = ["--model", "qwen3-8b", "--gpu", "h100-sxm", "--input-tokens", "200", "--engine"]
    flags += ["sglang", "--output-tokens", "20", "--offline", "--num-requests", "8", "--json"]
    plain = _simulate_json(*flags)["config"]["scheduler"]
    assert plain["scheduling"] == "sglang" and not plain["enable_mixed_chunk"]
    out = _simulate_json(
        *flags, "--max-prefill-tokens", "4096", "--schedule-conservativeness", "0.5",
        "--enable-mixed-chunk",
    )["config"]["scheduler"]  # fmt: skip
    assert (out["max_prefill_tokens"], out["schedule_conservativeness"]) == (4096, 0.5)
    assert out["enable_mixed_chunk"]
    bad = runner.invoke(app, ["simulate", *flags, "--schedule-conservativeness", "-1"])
    assert bad.exit_code == 2 and "schedule_conservativeness" in bad.output
