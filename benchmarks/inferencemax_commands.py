"""The serving command and client settings of each InferenceMAX single-node configuration.

Transcribed from InferenceMAX's own launch scripts (github:SemiAnalysisAI/InferenceX, formerly
InferenceMAX/InferenceMAX; ``benchmarks/<prefix>_<precision>_<hw>[_trt|_atom]_{slurm,docker}.sh``)
at the commits named in SCRIPT_COMMITS, with each script's conditionals (TP, concurrency,
ISL/OSL, EP) applied to the row. The slurm and docker scripts of one configuration pass the same
server flags (compared at 3ed476642); they differ in the client's prompt count only (NUM_PROMPTS
below). vLLM's ``--config config.yaml`` keys are its CLI flags (vLLM's ``--config`` reads YAML
whose keys are the long option names), written here as ``--key value``; TensorRT-LLM's
``--extra_llm_api_options`` YAML is written as ``extra_llm_api_options: key=value, ...``.

Client (``benchmarks/benchmark_lib.sh`` run_benchmark_serving at 3ed476642): kimbochen/bench_serving
``benchmark_serving.py --dataset-name random --random-range-ratio R --ignore-eos --request-rate inf
--max-concurrency conc``. R is 0.8: ``random-range-ratio`` defaults to '0.8' in
``.github/workflows/benchmark-tmpl.yml`` and ``run-sweep.yml`` does not pass it. That client draws
each request's input and output lengths uniform in ``[int(L*R), L]`` (``sample_uniform`` in
``utils/bench_serving/benchmark_serving.py`` at 7e1cd1466, "porting over
kimbochen/bench_serving@2ddd364c"), so lengths lie in [819, 1024] and [6553, 8192].
"""

from __future__ import annotations

from collections.abc import Callable

REPO = "github:SemiAnalysisAI/InferenceX"
RANGE_RATIO = 0.8
DSR1 = "deepseek-ai/DeepSeek-R1-0528"
# vLLM v0.11.2 rows ran the scripts of "Upgrade vLLM to v0.11.2 (#273)", v0.13.0 rows those of
# "Update vLLM version to v0.13.0 (#327)" (whose only change for these rows is Hopper's
# VLLM_MXFP4_USE_MARLIN=1 and B200's renamed compilation pass keys); every other script's server
# flags are unchanged from the image's introduction to 3ed476642 (git log of each script)
SCRIPT_COMMITS = {"v0.11.2": "25506e87c", "default": "3ed476642"}

VLLM_GPTOSS_COMMON = (
    "--async-scheduling --no-enable-prefix-caching --max-cudagraph-capture-size 2048 "
    "--max-num-batched-tokens 8192"
)


def _max_model_len(isl: int, osl: int) -> int:
    """The H200/B200 gpt-oss scripts' CALCULATED_MAX_MODEL_LEN."""
    if (isl, osl) == (1024, 1024):
        return isl + osl + 20
    if 8192 in (isl, osl):
        return isl + osl + 200
    return 10240


def _vllm_gptoss(hw: str, tp: int, conc: int, isl: int, osl: int, version: str) -> str:
    if hw == "h100":
        env = "" if version == "v0.11.2" else "VLLM_MXFP4_USE_MARLIN=1 "
        return (
            f"{env}vllm serve openai/gpt-oss-120b {VLLM_GPTOSS_COMMON} --max-model-len 10240 "
            f"--gpu-memory-utilization 0.9 --tensor-parallel-size {tp} --max-num-seqs {conc}"
        )
    if hw == "h200":
        env = "" if version == "v0.11.2" else "VLLM_MXFP4_USE_MARLIN=1 "
        return (
            f"{env}vllm serve openai/gpt-oss-120b {VLLM_GPTOSS_COMMON} "
            f"--max-model-len {_max_model_len(isl, osl)} --gpu-memory-utilization 0.9 "
            f"--tensor-parallel-size {tp} --max-num-seqs {conc}"
        )
    passes = (
        '{"pass_config":{"enable_fi_allreduce_fusion":true,"enable_noop":true}}'
        if version == "v0.11.2"
        else '{"pass_config":{"fuse_allreduce_rms":true,"eliminate_noops":true}}'
    )
    return (
        "VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1 vllm serve openai/gpt-oss-120b --kv-cache-dtype fp8 "
        f"--compilation-config '{passes}' {VLLM_GPTOSS_COMMON} "
        f"--max-model-len {_max_model_len(isl, osl)} --gpu-memory-utilization 0.9 "
        f"--tensor-parallel-size {tp} --max-num-seqs 512"
    )


def _sglang_dsr1_h200(tp: int, isl: int, osl: int) -> str:
    seqs = 512 if (isl, osl) == (1024, 1024) else 256
    return (
        f"python3 -m sglang.launch_server --tensor-parallel-size={tp} --data-parallel-size=1 "
        f"--disable-radix-cache --max-running-requests {seqs} --cuda-graph-max-bs {seqs} "
        "--chunked-prefill-size 32768 --max-prefill-tokens 32768 --mem-fraction-static 0.82 "
        "--attention-backend flashinfer --stream-interval 10"
    )


def _sglang_dsr1_fp8_b200(tp: int, ep: int, conc: int) -> str:
    if tp == 4:  # the script's TP=4 branch (8k/1k only)
        seqs, mem, chunk, recv = 32, 0.95, 8192, 10
    else:
        seqs, mem, chunk, recv = 128, 0.82, 32768, 30 if conc >= 16 else 10
    return (
        "SGL_ENABLE_JIT_DEEPGEMM=false SGLANG_ENABLE_FLASHINFER_GEMM=true "
        f"python3 -m sglang.launch_server --tensor-parallel-size={tp} --data-parallel-size=1 "
        f"--cuda-graph-max-bs {seqs} --max-running-requests {seqs} --mem-fraction-static {mem} "
        f"--kv-cache-dtype fp8_e4m3 --chunked-prefill-size {chunk} --max-prefill-tokens {chunk} "
        f"--enable-flashinfer-allreduce-fusion --scheduler-recv-interval {recv} "
        "--disable-radix-cache --attention-backend trtllm_mla --stream-interval 30 "
        f"--ep-size {ep} --moe-runner-backend flashinfer_trtllm --quantization fp8"
    )


def _sglang_dsr1_fp4_b200(tp: int, ep: int, conc: int) -> str:
    recv = 30 if conc >= 16 else 10
    return (
        f"python3 -m sglang.launch_server --tensor-parallel-size={tp} --data-parallel-size=1 "
        "--cuda-graph-max-bs 256 --max-running-requests 256 --mem-fraction-static 0.85 "
        f"--kv-cache-dtype fp8_e4m3 --chunked-prefill-size 16384 --ep-size {ep} "
        "--quantization modelopt_fp4 --enable-flashinfer-allreduce-fusion "
        f"--scheduler-recv-interval {recv} --enable-symm-mem --disable-radix-cache "
        "--attention-backend trtllm_mla --moe-runner-backend flashinfer_trtllm --stream-interval 10"
    )


def _sglang_dsr1_amd(hw: str, precision: str, tp: int, conc: int, isl: int, osl: int) -> str:
    chunk = 196608
    if precision == "fp4" and (isl, osl) == (8192, 1024) and conc > 32:
        chunk = 32768
    extra = {
        ("mi300x", "fp8"): "",
        ("mi325x", "fp8"): "",
        ("mi355x", "fp8"): " --attention-backend aiter --enable-torch-compile",
        ("mi355x", "fp4"): " --attention-backend aiter --kv-cache-dtype fp8_e4m3",
    }[(hw, precision)]
    return (
        f"SGLANG_USE_AITER=1 python3 -m sglang.launch_server --tensor-parallel-size={tp} "
        f"--mem-fraction-static=0.8 --cuda-graph-max-bs=128 --chunked-prefill-size={chunk} "
        f"--num-continuous-decode-steps=4 --max-prefill-tokens={chunk} --disable-radix-cache"
        f"{extra}"
    )


def _atom(model: str, tp: int, ep: int, isl: int, osl: int) -> str:
    max_len = "" if (isl, osl) == (1024, 1024) else " --max-model-len 10240"
    expert = " --enable-expert-parallel" if ep > 1 else ""
    return (
        f"python3 -m atom.entrypoints.openai_server --model {model} -tp {tp} "
        f"--kv_cache_dtype fp8{max_len}{expert} --block-size 16"
    )


def _trt_gptoss(tp: int, ep: int, conc: int, isl: int, osl: int, dp_attention: bool) -> str:
    # MAX_MODEL_LEN = isl + osl + 200 (utils/matrix_logic/generate_sweep_configs.py)
    options = (
        f"cuda_graph_config.enable_padding=true, cuda_graph_config.max_batch_size={conc}, "
        f"enable_attention_dp={str(dp_attention).lower()}, kv_cache_config.dtype=fp8, "
        "kv_cache_config.enable_block_reuse=false, "
        "kv_cache_config.free_gpu_memory_fraction=0.85, stream_interval=20, "
        "num_postprocess_workers=4, moe_config.backend=TRTLLM"
    )
    if dp_attention:
        options += ", attention_dp_config.enable_balance=true"
    return (
        "TRTLLM_ENABLE_PDL=1 mpirun -n 1 trtllm-serve openai/gpt-oss-120b --backend=pytorch "
        f"--max_batch_size 512 --max_seq_len={isl + osl + 200} --max_num_tokens=20000 "
        f"--tp_size={tp} --ep_size={ep}; extra_llm_api_options: {options}"
    )


def script_name(prefix: str, precision: str, hw: str, framework: str) -> str:
    suffix = {"trt": "_trt", "atom": "_atom"}.get(framework, "")
    return f"benchmarks/{prefix}_{precision}_{hw.removesuffix('-trt')}{suffix}_slurm.sh"


def num_prompts(model: str, hw: str, osl: int, conc: int) -> tuple[int, str]:
    """The client's prompt count and how it is known. Slurm scripts send 10 x conc unless the
    launcher exports NUM_PROMPTS: runners/launch_mi355x-amd.sh (the MI355X nodes) and the B200
    docker launchers (launch_b200-dgxc.sh, launch_b200-nvd.sh) at 3ed476642 export 50 x conc
    (20 x conc at OSL 8k) for deepseek-ai/DeepSeek-R1-0528 and, on MI355X,
    amd/DeepSeek-R1-0528-MXFP4-Preview (on B200, nvidia/DeepSeek-R1-0528-FP4, not the FP4-V2 these
    rows ran), else 10 x conc. A B200 row does not say whether a slurm or a docker node ran it."""
    many = (20 if osl == 8192 else 50) * conc
    if hw == "mi355x" and model in (DSR1, "amd/DeepSeek-R1-0528-MXFP4-Preview"):
        return many, f"{many // conc} x conc (runners/launch_mi355x-amd.sh)"
    if hw == "b200" and model == DSR1:
        return 10 * conc, (
            f"10 x conc on slurm nodes, {many // conc} x conc on docker nodes "
            "(num_requests: the slurm count)"
        )
    return 10 * conc, "10 x conc"


def serving_command(row: dict[str, object]) -> tuple[str, str]:
    """(serving command with its flags, the script it comes from as repo@commit:path)."""
    hw, fw = str(row["hw"]), str(row["framework"])
    prefix, precision = str(row["infmax_model_prefix"]), str(row["precision"])
    tp, conc = int(row["tp"]), int(row["conc"])  # type: ignore[call-overload]
    ep = int(row.get("ep") or 1)  # type: ignore[call-overload]
    isl, osl = int(row["isl"]), int(row["osl"])  # type: ignore[call-overload]
    version = str(row["image"]).rsplit(":", 1)[-1]
    builders: dict[tuple[str, str], Callable[[], str]] = {
        ("vllm", "gptoss"): lambda: _vllm_gptoss(hw, tp, conc, isl, osl, version),
        ("sglang", "dsr1"): lambda: (
            _sglang_dsr1_h200(tp, isl, osl)
            if hw == "h200"
            else _sglang_dsr1_fp8_b200(tp, ep, conc)
            if (hw, precision) == ("b200", "fp8")
            else _sglang_dsr1_fp4_b200(tp, ep, conc)
            if hw == "b200"
            else _sglang_dsr1_amd(hw, precision, tp, conc, isl, osl)
        ),
        ("atom", "dsr1"): lambda: _atom(str(row["model"]), tp, ep, isl, osl),
        ("atom", "gptoss"): lambda: _atom(str(row["model"]), tp, ep, isl, osl),
        ("trt", "gptoss"): lambda: _trt_gptoss(
            tp, ep, conc, isl, osl, str(row.get("dp_attention")) == "true"
        ),
    }
    build = builders.get((fw, prefix))
    if build is None:
        return "", ""
    commit = SCRIPT_COMMITS.get(version, SCRIPT_COMMITS["default"])
    return build(), f"{REPO}@{commit}:{script_name(prefix, precision, hw, fw)}"
