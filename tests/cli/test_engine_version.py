"""`simulate --engine vllm-2025h1` and `--engine-version` (cli/engine_version_options.py): the era
preset runs vLLM 0.7.3's V0 server with its MLA memory rule; a version picks its own server and
the era's profile; bad versions are one clear line, exit 2."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from tokenprobe.cli import app

runner = CliRunner()
R1 = ["--model", "deepseek-ai/DeepSeek-R1", "--gpu", "h200", "--tp", "8", "--weight-dtype", "fp8"]
LOAD = ["--input-tokens", "256", "--output-tokens", "8", "--concurrency", "2"]


def _config(*extra: str) -> dict[str, object]:
    args = ["simulate", *R1, *LOAD, "--num-requests", "4", "--json", *extra]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    config = json.loads(result.output)["config"]
    assert isinstance(config, dict)
    return config


def _scheduler(config: dict[str, object]) -> tuple[object, object, object]:
    s = config["scheduler"]
    assert isinstance(s, dict)
    return s["scheduling"], s["memory_rule"], s["max_num_batched_tokens"]


def test_the_era_preset_simulates_its_v0_server() -> None:
    era = _config("--engine", "vllm-2025h1")
    # V0 without chunked prefill: a step budget of max_model_len (163840), 0.7.x's MLA memory
    assert _scheduler(era) == ("vllm-v0", "vllm-0.7-mla", 163840)
    assert era["profile"] == "vllm-2025h1"
    # today's vLLM: V1, 8192-token steps on an H200, today's memory rule
    assert _scheduler(_config("--engine", "vllm"))[:2] == ("vllm", "vllm")


def test_engine_version_picks_the_release_and_its_eras_profile() -> None:
    old = _config("--engine", "vllm", "--engine-version", "0.7.3")
    assert _scheduler(old)[:2] == ("vllm-v0", "vllm-0.7-mla")
    assert old["profile"] == "vllm-2025h1"  # 0.7.x is the era's
    v1 = _config("--engine", "vllm-2025h1", "--engine-version", "0.8.5")
    assert _scheduler(v1)[:2] == ("vllm", "vllm")  # V1 is the default from 0.8.0


def test_the_sglang_era_simulates_its_04_server() -> None:
    # `--engine sglang-2025h1` runs the scheduler validate.py replays 0.4 rows with
    # (sim/sglang_dp.py): lpm, the overlap loop on plain TP, 0.4's 8192-token chunk on an H200
    s = _config("--engine", "sglang-2025h1")["scheduler"]
    assert isinstance(s, dict)
    assert (s["schedule_policy"], s["overlap_schedule"], s["max_num_batched_tokens"]) == (
        "lpm",
        True,
        8192,
    )
    late = _config("--engine", "sglang")["scheduler"]  # 0.5: fcfs, its overlap not modelled
    assert isinstance(late, dict)
    assert (late["schedule_policy"], late["overlap_schedule"]) == ("fcfs", False)
    flagged = _config("--engine", "sglang-2025h1", "--max-num-batched-tokens", "4096")
    assert flagged["scheduler"]["max_num_batched_tokens"] == 4096  # type: ignore[index]


def test_bad_engine_versions_name_the_field() -> None:
    for extra in (
        ["--engine", "vllm", "--engine-version", "latest"],
        ["--engine", "sglang", "--engine-version", "0.4.3"],
    ):
        result = runner.invoke(app, ["simulate", *R1, *LOAD, *extra])
        assert result.exit_code == 2, result.output
        assert "engine_version" in "".join(result.output.split())
        assert "Traceback" not in result.output
