"""records.RunConfig (issue 16 item 2): the run configuration declared once. simulate and
bench-import write it, every reader gets the same object back (every field, through
config.json on disk), old run folders still read, and a field of the wrong type is refused
naming it. bench's side (the real llama.cpp server) is tests/loadgen/test_runconfig_measured.py."""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from pathlib import Path

import pytest
from typer.testing import CliRunner

import tokenprobe.cli.bench
import tokenprobe.cli.simulate  # noqa: F401  (registers the commands on app)
from tokenprobe.calibrate import load_profile
from tokenprobe.cli.app import app
from tokenprobe.cost import make_deployment
from tokenprobe.errors import SchemaError
from tokenprobe.records import DeploymentConfig, RunConfig, read_run
from tokenprobe.sim import SchedulerConfig, engine_defaults, price_deployment, simulate

DATA = Path(__file__).parent / "data"
LOADGEN_DATA = Path(__file__).parent / "loadgen" / "data"
runner = CliRunner()


def _round_trip(folder: Path) -> RunConfig:
    """The folder's RunConfig, checked to come back equal through its own JSON form."""
    run = read_run(folder)
    rc = RunConfig.of(run)
    again = RunConfig.from_dict(json.loads(json.dumps(rc.to_dict())), run.kind)
    assert again == rc
    return rc


def test_simulate_writes_every_field_that_prices_the_deployment(tmp_path: Path) -> None:
    profile = load_profile("sglang")
    dep = make_deployment(
        "qwen3-30b-a3b",
        "h100-sxm",
        tp=2,
        pp=2,
        expert_parallel=True,
        weight_dtype="fp8",
        kv_dtype="fp8",
        power_limit_w=450.0,
        efficiency=profile.efficiency,
        power=profile.power,
    )
    config = engine_defaults("sglang", dep.gpu, 2, max_num_seqs=64)
    result = simulate(
        deployment=dep,
        input_tokens=256,
        output_tokens=32,
        concurrency=8,
        num_requests=24,
        seed=11,
        config=config,
        slo_ttft_s=0.5,
        slo_tpot_s=0.05,
        profile="sglang",
        engine="sglang",
    )
    rc = _round_trip(result.write(tmp_path / "run"))
    dc = rc.deployment
    assert rc.source == "simulated" and rc.seed == 11
    assert (rc.slo_ttft_s, rc.slo_tpot_s) == (0.5, 0.05)
    assert (dc.model, dc.gpu, dc.tp, dc.pp, dc.expert_parallel) == (
        "qwen3-30b-a3b", "h100-sxm", 2, 2, True,
    )  # fmt: skip
    assert (dc.weight_dtype, dc.act_dtype, dc.kv_dtype) == ("fp8", "fp8", "fp8")
    assert (dc.profile, dc.engine, dc.power_limit_w) == ("sglang", "sglang", 450.0)
    assert dc.efficiency == asdict(profile.efficiency) and dc.power == asdict(profile.power)
    assert SchedulerConfig(**{k: v for k, v in dc.scheduler.items() if k != "name"}) == config
    assert rc.workload is not None and rc.workload["arrival"]["concurrency"] == 8
    # the reader prices exactly the deployment that ran
    assert price_deployment(dc) == dep


def test_a_replica_across_nodes_is_repriced_on_its_own_layout(tmp_path: Path) -> None:
    """TP8 on servers of 4 GPUs spans two nodes (its all-reduce crosses the NICs), where the
    H100's catalog topology (8 a server) would put it in one: the run records the layout it ran
    on and the reader prices that one, not the catalog's."""
    dep = make_deployment("llama-3.1-70b", "h100-sxm", tp=8, gpus_per_node=4)
    assert (dep.nodes, dep.gpus_per_node) == (2, 4)
    result = simulate(
        deployment=dep, input_tokens=128, output_tokens=8, concurrency=2, num_requests=4, seed=1
    )
    dc = _round_trip(result.write(tmp_path / "run")).deployment
    assert (dc.nodes, dc.gpus_per_node) == (2, 4)
    again = price_deployment(dc)
    assert again == dep
    assert again != make_deployment("llama-3.1-70b", "h100-sxm", tp=8)  # one node of 8


def test_simulate_cli_records_the_profile_and_engine(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["simulate", "--model", "llama-3.1-8b", "--gpu", "a100-80gb-sxm", "--input-tokens", "64"]
    args += ["--output-tokens", "8", "--rate", "2", "--num-requests", "5", "--out", str(out)]
    args += ["--profile", "vllm", "--engine", "tensorrt-llm", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    dc = _round_trip(out).deployment
    assert (dc.profile, dc.engine) == ("vllm", "tensorrt-llm")
    assert dc.efficiency == asdict(load_profile("vllm").efficiency)
    assert dc.scheduler["capacity_policy"] == "guaranteed_no_evict"  # the preset that ran


@pytest.mark.parametrize(
    ("path", "tool", "model"),
    [
        (LOADGEN_DATA / "guidellm_0.8.1_report.json", "guidellm", None),
        (LOADGEN_DATA / "aiperf_profile_export.jsonl", "aiperf", None),
        ("vllm", "vllm bench serve", "m"),
    ],
)
def test_bench_import_writes_a_run_config_that_round_trips(
    tmp_path: Path, path: Path | str, tool: str, model: str | None
) -> None:
    if path == "vllm":
        path = tmp_path / "vllm.json"
        doc = {"backend": "vllm", "model_id": "m", "duration": 2.0, "request_rate": 1.0}
        doc |= {"input_lens": [10], "output_lens": [3], "ttfts": [0.1], "itls": [[0.02, 0.03]]}
        path.write_text(json.dumps(doc))
    out = tmp_path / "r"
    result = runner.invoke(app, ["bench-import", str(path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    folder = out if (out / "config.json").exists() else next(out.iterdir())
    rc = _round_trip(folder)
    assert rc.source == "imported" and rc.extra["source"] == tool
    assert rc.deployment.model == rc.served_model == model


@pytest.mark.parametrize("name", ["llamacpp_cpu_pid", "llamacpp_cpu_nopid"])
def test_run_folders_written_before_the_type_still_read(name: str) -> None:
    raw = json.loads((DATA / "runs" / name / "config.json").read_text())["config"]
    rc = _round_trip(DATA / "runs" / name)
    assert rc.source == "measured"
    assert rc.deployment.model == raw["model"] and rc.server_url == raw["url"]
    assert rc.deployment.gpu is None and rc.deployment.tp is None  # not known: not guessed
    assert rc.extra["telemetry"] == raw["telemetry"]
    written = rc.to_dict()  # nothing the writer kept is lost, and no value is made up
    assert {k: v for k, v in raw.items() if v is not None}.items() <= written.items()
    assert "tp" not in written and "gpu" not in written


def test_an_old_simulated_config_reads_its_deployment() -> None:
    """simulate's config before the type: 7 deployment keys, the scheduler, the workload."""
    old = {
        "model": "llama-3.1-8b", "gpu": "h100-sxm", "tp": 2, "num_gpus": 2,
        "weight_dtype": "bf16", "kv_dtype": "fp8", "kv_bytes_per_token": 65536,
        "workload": {"name": "custom"}, "scheduler": {"name": "continuous", "block_size": 16},
        "seed": 0, "kv_capacity_blocks": 100,
    }  # fmt: skip
    rc = RunConfig.from_dict(old, "simulated")
    assert (rc.deployment.tp, rc.deployment.pp, rc.deployment.kv_dtype) == (2, None, "fp8")
    assert rc.deployment.power_limit_w is None and rc.deployment.engine is None
    assert rc.extra["kv_capacity_blocks"] == 100
    assert price_deployment(rc.deployment).num_gpus == 2


@pytest.mark.parametrize(
    ("key", "value"),
    [("tp", "2"), ("tp", 0), ("pp", True), ("power_limit_w", -5), ("slo_ttft_s", "x"),
     ("efficiency", {"memory": "high"}), ("scheduler", [1]), ("gpu", 3), ("seed", -1),
     ("spec_decode", 2), ("spec_acceptance", "x"), ("nodes", 0), ("gpus_per_node", "8")],
)  # fmt: skip
def test_a_field_of_the_wrong_type_is_refused_naming_it(key: str, value: object) -> None:
    with pytest.raises(SchemaError, match=f"config.{key}"):
        RunConfig.from_dict({"model": "m", key: value}, "measured")


def test_every_deployment_field_is_written() -> None:
    """A field added to DeploymentConfig reaches config.json without another edit; one not
    known is left out and reads back as not known (a seed of 0 is known)."""
    values = dict(model="m", catalog_model="c", gpu="g", tp=2, pp=2, expert_parallel=True)
    values |= dict(attention_dp=True, dp_ranks=2, nodes=2, gpus_per_node=4)
    values |= dict(weight_dtype="fp8", act_dtype="fp8", kv_dtype="fp8", profile="p")
    values |= dict(efficiency={"memory": 0.5}, power={"dvfs_exponent": 2.0})
    values |= dict(power_limit_w=300.0, engine="sglang", scheduler={"max_num_seqs": 8})
    values |= dict(spec_decode="mtp:2", spec_acceptance=0.8)
    values |= dict(ep_comm={"backend": "deepep", "overlap": True})
    assert set(values) == {f.name for f in fields(DeploymentConfig)}  # this test knows them all
    dc = DeploymentConfig(**values)  # type: ignore[arg-type]
    doc = RunConfig("measured", deployment=dc, seed=0).to_dict()
    assert set(values) <= set(doc) and doc["seed"] == 0
    assert RunConfig.from_dict(doc) == RunConfig("measured", deployment=dc, seed=0)
    sparse = RunConfig("measured", deployment=DeploymentConfig(model="m")).to_dict()
    assert sparse == {"model": "m", "run_source": "measured"}
