"""AMD's ATOM as an engine preset (sim/atom.py): its server's defaults as read at
ROCm/ATOM@9304f0bf (arg_utils.py, config.py, scheduler.py), scheduled as vLLM V0 without chunked
prefill, which is what its `Scheduler.schedule` does."""

from __future__ import annotations

import json
from dataclasses import replace

from typer.testing import CliRunner

from tokenprobe.calibrate.observations import engine_name
from tokenprobe.cli import app
from tokenprobe.cost import make_deployment
from tokenprobe.hardware import get_gpu
from tokenprobe.sim import engine_defaults, engine_preset, simulate
from tokenprobe.sim.base import VLLM_V0_SCHEDULING
from tokenprobe.workload import Arrival, Workload, fixed

runner = CliRunner()


def test_atom_defaults_are_its_servers() -> None:
    config = engine_defaults("atom", get_gpu("mi355x"), 8)
    # --max-num-seqs 512, --max-num-batched-tokens 16384, --gpu-memory-utilization 0.9,
    # --block-size 16, enable_prefix_caching False; whole prompts in prefill-only batches
    assert (config.max_num_seqs, config.max_num_batched_tokens) == (512, 16384)
    assert (config.gpu_memory_utilization, config.block_size) == (0.9, 16)
    assert not config.prefix_caching and not config.chunked_prefill
    assert config.scheduling == VLLM_V0_SCHEDULING
    # the command's flags are read with vLLM's spellings, which ATOM's arg_utils.py shares
    assert engine_preset("ROCm-ATOM").flags["max_num_seqs"] == ("--max-num-seqs",)
    assert engine_defaults("atom", get_gpu("mi355x"), 8, max_num_seqs=64).max_num_seqs == 64


def test_inferencemax_atom_rows_name_the_preset() -> None:
    version = "rocm7.1.1-ubuntu24.04-pytorch2.9-atom0.1.1-MI350x"
    assert engine_name("ATOM", version) == "atom"


def test_a_prompt_budget_of_16384_tokens_prefills_two_8k_prompts_a_step() -> None:
    # 4 users of 8,000-token prompts: ATOM admits whole prompts while the batch stays within
    # 16,384 tokens, so the first step prefills 2 (16,000) and the next step the other 2; the
    # decodes wait for the second prefill step (no mixed batches), so all four first tokens
    # come from prefill-only steps: the last two requests' TTFT is two prefill steps
    dep = make_deployment("llama-3.1-8b", "mi355x", tp=1)
    config = engine_defaults("atom", dep.gpu, 1)
    workload = Workload(
        Arrival("closed", concurrency=4), fixed(8000), fixed(16), num_requests=4, name="closed"
    )
    result = simulate(deployment=dep, workload=workload, config=config)
    ttft = sorted(float(r.first_token_s or 0.0) for r in result.records)
    assert ttft[1] < ttft[2]  # two waves of prefill
    assert abs(ttft[0] - ttft[1]) < 1e-9 and abs(ttft[2] - ttft[3]) < 1e-9
    # with a budget for all four at once they come together
    wide = simulate(
        deployment=dep, workload=workload, config=replace(config, max_num_batched_tokens=32768)
    )
    assert len({round(float(r.first_token_s or 0.0), 9) for r in wide.records}) == 1


def test_simulate_engine_atom_runs_on_an_amd_gpu() -> None:
    args = ["simulate", "--model", "llama-3.1-8b", "--gpu", "mi355x", "--engine", "atom"]
    args += ["--input-tokens", "128", "--output-tokens", "16", "--num-requests", "4"]
    args += ["--offline", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    scheduler = json.loads(result.output)["config"]["scheduler"]
    assert scheduler["max_num_seqs"] == 512 and scheduler["block_size"] == 16
