"""InferenceMAX single-node rows: the serving commands the extractor writes (transcribed from
InferenceMAX's launch scripts), and how the mapper reads them (tokenprobe.calibrate.inferencemax).
Mapping only: nothing is simulated here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tokenprobe.calibrate import group_key, group_of, load_rows
from tokenprobe.calibrate.serving import scheduler_for

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import inferencemax_commands as ic  # noqa: E402
import validate_inferencemax as vi  # noqa: E402

ROWS = vi.lines()


def _row(**want: str) -> dict[str, str]:
    for line in ROWS:
        if all(line[k] == v or line[k].startswith(v) for k, v in want.items()):
            return line
    raise AssertionError(f"no row {want}")


def _raw(**kw: object) -> dict[str, object]:
    base: dict[str, object] = {"ep": 1, "isl": 1024, "osl": 1024, "dp_attention": "false"}
    return {**base, **kw}


def test_sglang_b200_fp8_branches_follow_the_script() -> None:
    # dsr1_fp8_b200_docker.sh: TP 8 -> 128 requests, 0.82, 32k chunks, recv interval 30 from
    # conc 16 (10 below); TP 4 (8k/1k only) -> 32 requests, 0.95, 8k chunks
    tp8 = ic._sglang_dsr1_fp8_b200(8, 1, 16)
    assert "--max-running-requests 128" in tp8 and "--mem-fraction-static 0.82" in tp8
    assert "--scheduler-recv-interval 30" in tp8
    assert "--scheduler-recv-interval 10" in ic._sglang_dsr1_fp8_b200(8, 1, 8)
    tp4 = ic._sglang_dsr1_fp8_b200(4, 1, 16)
    assert "--max-running-requests 32" in tp4 and "--chunked-prefill-size 8192" in tp4


def test_vllm_gptoss_max_model_len_and_seqs() -> None:
    # gptoss_fp4_h200_slurm.sh: 1k/1k -> ISL + OSL + 20 = 2068; an 8k side -> + 200; seqs = conc
    row = _raw(hw="h200", framework="vllm", infmax_model_prefix="gptoss", precision="fp4", tp=2)
    command, script = ic.serving_command({**row, "conc": 64, "image": "vllm/vllm-openai:v0.13.0"})
    assert "--max-model-len 2068" in command and "--max-num-seqs 64" in command
    assert "VLLM_MXFP4_USE_MARLIN=1" in command and script.endswith("gptoss_fp4_h200_slurm.sh")
    long, _ = ic.serving_command(
        {**row, "conc": 8, "osl": 8192, "image": "vllm/vllm-openai:v0.11.2"}
    )
    assert "--max-model-len 9416" in long and "MARLIN" not in long
    # B200's script fixes 512 sequences whatever the concurrency, with an fp8 KV cache
    b200, _ = ic.serving_command(
        {**row, "hw": "b200", "conc": 4, "image": "vllm/vllm-openai:v0.13.0"}
    )
    assert "--max-num-seqs 512" in b200 and "--kv-cache-dtype fp8" in b200


def test_num_prompts_by_launcher() -> None:
    # slurm scripts: 10 x conc; launch_mi355x-amd.sh: DeepSeek-R1 50 x conc, 20 x at OSL 8k
    assert ic.num_prompts("openai/gpt-oss-120b", "h200", 1024, 64)[0] == 640
    assert ic.num_prompts(ic.DSR1, "mi355x", 8192, 4)[0] == 80
    assert ic.num_prompts(ic.DSR1, "mi355x", 1024, 4)[0] == 200


def test_mapper_reads_the_rows_command_lengths_and_count() -> None:
    line = _row(gpu="H200 SXM", engine="vLLM", engine_version="v0.13.0", tp="2",
                concurrency="64", isl="1024", osl="1024")  # fmt: skip
    (row,) = load_rows([line]).rows
    workload = row.predict.keywords["workload"]  # type: ignore[attr-defined]
    # range ratio 0.8: lengths uniform in [int(0.8 x 1024), 1024] = [819, 1024]
    assert (workload.input_len.low, workload.input_len.high) == (819, 1024)
    assert (workload.output_len.low, workload.output_len.high) == (819, 1024)
    assert workload.num_requests == 640  # 10 x conc
    config = scheduler_for(
        "vllm", row.deployment, line["notes"], line["engine_version"], overlap=True
    )
    assert (config.max_num_seqs, config.max_num_batched_tokens) == (64, 8192)
    assert config.gpu_memory_utilization == pytest.approx(0.9)
    assert config.overlap_schedule  # --async-scheduling
    # gpt-oss's MXFP4 checkpoint, not a 16-bit one (which would leave no KV room on one GPU)
    assert row.deployment.weight_dtype.name == "mxfp4"
    assert group_of(row.label) == group_key(line) == "H200 SXM vLLM v0.13.0 gpt-oss-120b mxfp4"


def test_sglang_row_gets_fp8_kv_nvfp4_weights_and_recv_interval() -> None:
    line = _row(gpu="B200", engine="SGLang", model="DeepSeek-R1-0528-FP4-V2", tp="8",
                concurrency="64")  # fmt: skip
    (row,) = load_rows([line]).rows
    config = scheduler_for("sglang", row.deployment, line["notes"], line["engine_version"])
    assert config.scheduler_recv_interval == 30  # the script's value from conc 16
    assert (config.max_num_seqs, config.max_num_batched_tokens) == (256, 16384)
    assert row.deployment.kv_dtype.name == "fp8"  # --kv-cache-dtype fp8_e4m3
    assert row.deployment.weight_dtype.name == "fp4"  # NVFP4 (precision.py's "fp4")


def test_unexpressed_rows_are_counted_by_reason() -> None:
    trt_dp = next(
        r for r in ROWS if r["engine"] == "TensorRT-LLM" and "dp_attention=true" in r["notes"]
    )
    result = load_rows([trt_dp])
    assert not result.rows
    assert any("attention DP" in why for why in result.skipped)
    assert sum(vi.unexpressed([trt_dp]).values()) == 1


def test_atom_and_mi355x_rows_run_with_the_atom_preset() -> None:
    # ATOM has an engine preset (sim/atom.py) and MI355X a catalog entry: both rows are expressed
    atom = next(r for r in ROWS if r["engine"] == "ATOM" and r["gpu"] == "MI355X")
    result = load_rows([atom])
    assert [r.engine for r in result.rows] == ["atom"]
    assert result.rows[0].deployment.gpu.name == "mi355x"
    assert not vi.unexpressed([atom])
