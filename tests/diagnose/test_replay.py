"""`diagnose --predict` on simulated runs (issue 16 items 2, 3): the estimate prices the
deployment the run config records (a power limit included), and the replay of a simulated run
through the simulator reproduces it (same arrivals, lengths, deployment, engine and scheduler:
the check that the replay carries the load it was given)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

import tokenprobe.cli.diagnose  # noqa: F401  (registers the command on app)
from tokenprobe.cli.app import app
from tokenprobe.cost import Workload, estimate_deployment, make_deployment
from tokenprobe.diagnose import diagnose
from tokenprobe.diagnose.replay import replay_engine
from tokenprobe.records import DeploymentConfig, RunConfig, read_run
from tokenprobe.sim import engine_defaults, simulate

runner = CliRunner()
CAP_W = 250.0


def _capped_run(tmp_path: Path, **load: object) -> Path:
    dep = make_deployment("llama-3.1-8b", "h100-sxm", power_limit_w=CAP_W)
    kw = dict(input_tokens=512, output_tokens=96, rate_per_s=6.0, num_requests=120, seed=4)
    result = simulate(deployment=dep, **{**kw, **load})  # type: ignore[arg-type]
    return result.write(tmp_path / "run")


def test_predict_on_a_power_limited_simulated_run_prices_the_capped_deployment(
    tmp_path: Path,
) -> None:
    run = read_run(_capped_run(tmp_path))
    comparison = diagnose(run, predict=True).comparison
    assert comparison is not None and comparison["rows"], comparison
    load = comparison["load"]
    shape = Workload(load["input_tokens"], load["output_tokens"], load["batch"])
    capped = make_deployment("llama-3.1-8b", "h100-sxm", power_limit_w=CAP_W)
    uncapped = replace(capped, power_limit_w=None)
    want = estimate_deployment(capped, shape).tpot_s
    assert estimate_deployment(uncapped, shape).tpot_s < want  # the cap costs time here
    tpot = next(row for row in comparison["rows"] if row["metric"] == "tpot_s")
    assert tpot["predicted"] == pytest.approx(want)


@pytest.mark.parametrize(
    "load",
    [
        dict(rate_per_s=6.0),
        dict(rate_per_s=3.0, burstiness=0.2),  # bursts: a queue forms and drains
        dict(concurrency=6, rate_per_s=None),  # closed loop, replayed at its own times
    ],
)
def test_a_simulated_run_replayed_against_itself_agrees(tmp_path: Path, load: dict) -> None:
    run = read_run(_capped_run(tmp_path, **load))
    diagnosis = diagnose(run, predict=True, replay_run=True)
    replayed = diagnosis.replay
    assert replayed is not None and replayed["requests"] == len(run.records)
    assert "capped at 250 W" in replayed["deployment"]
    assert replayed["engine"] == "vllm" and replayed["engine_source"] == "run config"
    rows = {row["metric"]: row for row in replayed["rows"]}
    for metric in ("ttft_s", "tpot_s", "itl_s"):
        for p in ("p50", "p90", "p99"):
            assert rows[f"{metric} {p}"]["ratio"] == pytest.approx(1.0, rel=0.02), metric
    for metric in ("output_tokens_per_s", "kv_cache_usage_mean", "joules_per_output_token"):
        assert rows[metric]["ratio"] == pytest.approx(1.0, rel=0.02), metric
    verdicts = {v.rule: v.status for v in diagnosis.verdicts}
    assert verdicts["replay-mismatch"] == "clear"
    # request by request too: each request's own replay, matched by id
    pairs = replayed["per_request"]
    assert sorted(pairs["request_id"]) == sorted(r.request_id for r in run.records if r.ok)
    for side in ("ttft_s", "e2e_s"):
        measured, simulated = pairs[f"measured_{side}"], pairs[f"simulated_{side}"]
        assert simulated == pytest.approx(measured, rel=0.02, abs=1e-3), side


def test_the_replay_runs_the_engine_preset_asked_for(tmp_path: Path) -> None:
    """Another engine than the recorded one is another server (TensorRT-LLM's preset: its own
    KV sizing, KV for a request's whole length at admission, none of the recorded vLLM
    settings); with KV for few requests the replays part, which shows the preset was applied,
    not only named."""
    gpu = make_deployment("llama-3.1-8b", "h100-sxm").gpu
    small_kv = engine_defaults("vllm", gpu, gpu_memory_utilization=0.26)
    result = simulate(
        "llama-3.1-8b",
        "h100-sxm",
        input_tokens=2048,
        output_tokens=512,
        rate_per_s=20.0,
        num_requests=150,
        config=small_kv,
        engine="vllm",
    )
    run = read_run(result.write(tmp_path / "run"))
    same = diagnose(run, predict=True, replay_run=True).replay
    other = diagnose(run, predict=True, replay_run=True, engine="tensorrt-llm").replay
    assert same is not None and other is not None
    assert other["engine"] == "tensorrt-llm" and other["engine_source"] == "given"
    ttft = {r["metric"]: r for r in same["rows"]}["ttft_s p90"]
    ttft_other = {r["metric"]: r for r in other["rows"]}["ttft_s p90"]
    assert ttft["ratio"] == pytest.approx(1.0, rel=0.02)
    assert ttft_other["simulated"] != pytest.approx(ttft["simulated"], rel=0.02)


def test_cli_predict_json_carries_the_replay_and_refuses_an_unknown_engine(
    tmp_path: Path,
) -> None:
    folder = _capped_run(tmp_path)
    result = runner.invoke(app, ["diagnose", str(folder), "--predict", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert {r["metric"] for r in doc["replay"]["rows"]} >= {"ttft_s p99", "requests_per_s"}
    bad = runner.invoke(app, ["diagnose", str(folder), "--predict", "--engine", "tgi"])
    assert bad.exit_code == 2 and "engine" in bad.output


def test_a_run_without_a_catalog_deployment_says_why_there_is_no_replay() -> None:
    root = Path(__file__).resolve().parent.parent / "data" / "runs" / "llamacpp_cpu_pid"
    replayed = diagnose(read_run(root), predict=True, replay_run=True).replay
    assert replayed is not None and not replayed["rows"]
    assert any("names no catalog model and GPU" in n for n in replayed["notes"])
    assert RunConfig.of(read_run(root)).source == "measured"


@pytest.mark.parametrize(
    ("recorded", "server", "want"),
    [
        (None, "vllm", ("vllm", "server")),
        (None, "sglang", ("sglang", "server")),
        (None, "tensorrt_llm", ("tensorrt-llm", "server")),
        (None, "llamacpp", ("vllm", "default")),
        (None, None, ("vllm", "default")),
        ("sglang", "vllm", ("sglang", "run config")),
    ],
)
def test_the_replay_engine_is_the_configs_else_the_servers_else_vllm(
    recorded: str | None, server: str | None, want: tuple[str, str]
) -> None:
    rc = RunConfig("measured", DeploymentConfig(engine=recorded), server_engine=server)
    assert replay_engine(rc) == want
    assert replay_engine(rc, "tensorrt-llm") == ("tensorrt-llm", "given")


def test_a_shared_prefix_workload_replays_with_its_prefix(tmp_path: Path) -> None:
    """The records do not say which prompt tokens are shared; the recorded workload does, and
    the replay's prefix cache then finds them again as the run's did."""
    from tokenprobe.workload import Arrival, Workload, fixed

    workload = Workload(
        arrival=Arrival("poisson", rate_per_s=20.0),
        input_len=fixed(2048, "input_tokens"),
        output_len=fixed(32, "output_tokens"),
        num_requests=120,
        shared_prefix_tokens=1536,
    )
    result = simulate("llama-3.1-8b", "h100-sxm", workload=workload, seed=2)
    run = read_run(result.write(tmp_path / "run"))
    replayed = diagnose(run, predict=True, replay_run=True).replay
    assert replayed is not None
    ttft = {r["metric"]: r for r in replayed["rows"]}["ttft_s p50"]
    assert ttft["ratio"] == pytest.approx(1.0, rel=0.02)


def test_prefix_groups_replay_apart(tmp_path: Path) -> None:
    """Eight system prompts of 1,536 tokens (of 2,048-token prompts): each record names its
    group, so the replay finds each prefix cached only for its own group, as the run did. Read
    as one group (what the replay did before records carried it), every request after the
    first would share one prefix and the replay's p90 TTFT would come out lower."""
    from dataclasses import replace as _replace

    from tokenprobe.workload import Arrival, Workload, fixed

    workload = Workload(
        arrival=Arrival("poisson", rate_per_s=20.0),
        input_len=fixed(2048, "input_tokens"),
        output_len=fixed(32, "output_tokens"),
        num_requests=160,
        shared_prefix_tokens=1536,
        prefix_groups=8,
    )
    result = simulate("llama-3.1-8b", "h100-sxm", workload=workload, seed=3)
    run = read_run(result.write(tmp_path / "run"))
    assert len({r.extra["prefix_group"] for r in run.records}) == 8
    rows = {r["metric"]: r for r in diagnose(run, predict=True, replay_run=True).replay["rows"]}
    assert rows["ttft_s p90"]["ratio"] == pytest.approx(1.0, rel=0.02)
    merged = _replace(
        run,
        records=[
            _replace(r, extra={k: v for k, v in r.extra.items() if k != "prefix_group"})
            for r in run.records
        ],
    )
    one = {r["metric"]: r for r in diagnose(merged, predict=True, replay_run=True).replay["rows"]}
    assert one["ttft_s p90"]["simulated"] < 0.9 * rows["ttft_s p90"]["simulated"]
