"""`simulate`'s expert-parallel back-end flags (cost/epcomm.py), spelled as the engines spell them:
SGLang's `--moe-a2a-backend deepep`, `--deepep-mode`, `--enable-two-batch-overlap` (vLLM's
`--enable-dbo`), `--ep-num-redundant-experts` and `--enable-eplb`; vLLM's `--all2all-backend`
names. Without a back end the MoE layers' exchange is the engine's own default
(`sim.engine_ep_comm`: vLLM's allgather by release, SGLang's and TensorRT-LLM's plain
all-to-all), or the plain all-to-all without an engine."""

from __future__ import annotations

from typing import Annotated

import typer

from tokenprobe.cost import DEFAULT_EP_COMM, VLLM_ALL2ALL_BACKENDS, EpComm

A2aBackendOption = Annotated[
    str,
    typer.Option(
        "--moe-a2a-backend",
        "--ep-backend",
        "--all2all-backend",
        help="How the MoE layers move tokens under --dp: all-to-all (NCCL, every routed copy, "
        "16-bit), deepep (DeepEP: FP8 dispatch for FP8 models, one NIC copy per node) or "
        "allgather (every token to every EP GPU); vLLM's names too: naive, "
        "allgather_reducescatter, pplx, deepep_high_throughput, deepep_low_latency. Default: "
        "the engine's (vLLM: allgather, its naive / allgather_reducescatter; SGLang, "
        "TensorRT-LLM: all-to-all)",
    ),
]
EplbOption = Annotated[
    bool,
    typer.Option(
        "--enable-eplb",
        help="EPLB places the experts by their measured load, balancing the persistent part "
        "of the expert load imbalance (implied by --ep-num-redundant-experts)",
    ),
]
DeepepModeOption = Annotated[
    str,
    typer.Option(
        "--deepep-mode",
        help="DeepEP kernels: auto (normal for steps with a prefill, low_latency for decode), "
        "normal or low_latency",
    ),
]
OverlapOption = Annotated[
    bool,
    typer.Option(
        "--enable-two-batch-overlap",
        "--enable-dbo",
        help="Two micro-batches: one's dispatch/combine runs under the other's compute, so a "
        "step takes max(compute, communication) (SGLang TBO, vLLM dual-batch overlap)",
    ),
]
RedundantOption = Annotated[
    int,
    typer.Option(
        "--ep-num-redundant-experts",
        help="EPLB's redundant expert copies placed over the EP GPUs (e.g. 32: DeepSeek-V3's "
        "288 over 72 GPUs)",
    ),
]


def ep_comm_option(
    backend: str,
    mode: str,
    overlap: bool,
    redundant: int,
    eplb: bool = False,
    default: EpComm = DEFAULT_EP_COMM,
) -> EpComm:
    """The flags as an EpComm (a bad value: ConfigError naming the flag's field); no back end
    (`backend` ""): `default`'s, the engine's (`sim.engine_ep_comm`), with its kernels unless
    --deepep-mode names them."""
    mode = mode.replace("_", "-")
    if not backend:
        backend, mode = default.backend, default.mode if mode == "auto" else mode
    if backend in VLLM_ALL2ALL_BACKENDS:
        backend, named = VLLM_ALL2ALL_BACKENDS[backend]
        mode = named if mode == "auto" else mode
    return EpComm(backend, mode, "auto", overlap, redundant, eplb)
