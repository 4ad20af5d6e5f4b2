"""SGLang 0.5 on AMD GPUs (`sglang-rocm-aiter`): SGLang 0.5's figures carried over, not fitted,
since the two mechanisms that gave SGLang 0.4 on ROCm its own profile (the Triton MLA decode's
HIP launch, RCCL without the custom all-reduce) are gone in 0.5's ROCm images (AITER kernels,
custom all-reduce); InferenceMAX's AMD rows stay held out (benchmarks/amd_today.py)."""

from __future__ import annotations

import csv
import importlib.util
import json
import sys
from dataclasses import fields
from pathlib import Path
from types import ModuleType

from typer.testing import CliRunner

from tokenprobe.calibrate import load_profile, select_profile
from tokenprobe.cli import app
from tokenprobe.cost import Efficiency

ROOT = Path(__file__).resolve().parents[2]
NAME = "sglang-rocm-aiter"
runner = CliRunner()


def _amd_today() -> ModuleType:
    spec = importlib.util.spec_from_file_location("amd_today", ROOT / "benchmarks" / "amd_today.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["amd_today"] = module
    spec.loader.exec_module(module)
    return module


def test_sglang_on_amd_is_priced_by_it_and_sglang_04_keeps_its_rocm_profile() -> None:
    chosen = select_profile("sglang", "amd")
    assert chosen is not None and chosen.name == NAME
    era = select_profile("sglang-2025h1", "amd")  # 0.4's Triton MLA and RCCL: fitted on MI300X
    assert era is not None and era.name == "sglang-rocm"
    on_nvidia = select_profile("sglang", "nvidia")
    assert on_nvidia is not None and on_nvidia.name == "sglang"


def test_it_is_sglang_05s_figures_with_no_rocm_04_penalty() -> None:
    p, base, rocm04 = load_profile(NAME), load_profile("sglang"), load_profile("sglang-rocm")
    assert p.parameters == ()  # nothing fitted
    for f in fields(Efficiency):
        assert getattr(p.efficiency, f.name) == getattr(base.efficiency, f.name), f.name
    # the custom all-reduce: no RCCL latency on each of the step's TP all-reduces; AITER's MLA
    # decode: no HIP-launch Triton penalty
    assert p.efficiency.allreduce_extra_latency_s == 0 < rocm04.efficiency.allreduce_extra_latency_s
    assert p.efficiency.mla_attention > rocm04.efficiency.mla_attention
    assert p.power == base.power
    assert {e.set for e in p.errors} == {"fitted", "held_out"}


def test_simulate_engine_sglang_on_mi355x_prices_with_it() -> None:
    args = ["simulate", "--model", "llama-3.1-8b", "--gpu", "mi355x", "--engine", "sglang"]
    args += ["--input-tokens", "64", "--output-tokens", "8", "--num-requests", "2"]
    result = runner.invoke(app, [*args, "--offline", "--json"])
    assert result.exit_code == 0, result.output
    efficiency = json.loads(result.output)["config"]["efficiency"]
    assert efficiency["step_overhead_s"] == load_profile(NAME).efficiency.step_overhead_s


def test_the_replay_transcribes_inferencemax_commands() -> None:
    amd = _amd_today()
    with (ROOT / "benchmarks" / "data" / "inferencemax_agg.csv").open(encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["gpu"].startswith("MI")]
    fp4 = next(r for r in rows if "MXFP4" in r["model"] and r["engine"] == "SGLang")
    # dsr1_fp4_mi355x_slurm.sh: a 32768-token chunk at 8k/1k above 32 users, else 196608
    assert "--chunked-prefill-size=196608" in amd.serving_command({**fp4, "concurrency": "64"})
    at_8k = {**fp4, "isl": "8192", "osl": "1024", "concurrency": "64"}
    assert "--chunked-prefill-size=32768" in amd.serving_command(at_8k)
    assert "--kv-cache-dtype fp8_e4m3" in amd.serving_command(fp4)
    row = amd.amd_row({**fp4, "concurrency": "4", "isl": "1024", "osl": "1024"})
    assert row.engine == "sglang" and row.deployment.weight_dtype.name == "mxfp4"
    # bench_serving --random-range-ratio 0.8: lengths uniform in [819, 1024]
    workload = row.predict.keywords["workload"]
    assert (workload.input_len.low, workload.input_len.high) == (819, 1024)
    assert workload.num_requests == 40  # --num-prompts 10 x concurrency
    config = row.predict.keywords["config"]
    assert not config.prefix_caching  # --disable-radix-cache
    assert config.gpu_memory_utilization == 0.8  # --mem-fraction-static=0.8
