"""The expert-parallel back end of a DP+EP deployment row (benchmarks/deployment_replay.py).

A row's serving command, where its notes quote one, sets it through the engine flags the cost
model reads (`tokenprobe.cost.ep_comm_from_flags`: SGLang `--moe-a2a-backend deepep` /
`--enable-deepep-moe`, `--deepep-mode`, `--enable-two-batch-overlap`,
`--ep-num-redundant-experts`; vLLM `--all2all-backend deepep_*`, `--enable-dbo`). The LMSYS
large-scale EP rows quote no command: their notes say in the blog's words what ran ("DeepEP
normal dispatch", "DeepEP low-latency dispatch", "two-batch overlap", "EPLB with 32 redundant
experts (288)", "288 experts with redundancy"; lm-sys/lm-sys.github.io@2db4e4042b31f3c3c9f4f93
068ae80946d25a115:blog/2025-05-05-large-scale-ep.md), read here into the same setting. Nothing
is fitted: the setting only names which mechanism ran. A row whose command names no back end
runs its engine's default (`tokenprobe.sim.engine_ep_comm`: vLLM's allgather by release).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace

from tokenprobe.calibrate.observations import engine_name
from tokenprobe.cost import BatchShape, Deployment, EpComm, ep_comm_from_flags, gang_step
from tokenprobe.sim import engine_ep_comm

_PROSE = (
    (r"DeepEP normal dispatch", {"backend": "deepep", "mode": "normal"}),
    (r"DeepEP low-latency dispatch", {"backend": "deepep", "mode": "low-latency"}),
    (r"two-batch overlap", {"overlap": True}),
)


def ep_comm_for(row: Mapping[str, str], model_experts: int | None) -> EpComm:
    """The row's EP back end: its command's flags, then the blog's words (module docstring).
    `model_experts`: the model's routed experts, to read "N experts with redundancy"."""
    notes = row.get("notes", "")
    version = row.get("engine_version", "")
    own = engine_ep_comm(engine_name(row.get("engine", ""), version), version)
    ep = ep_comm_from_flags(notes, own)  # no back-end flag: the engine's (sim.engine_ep_comm)
    for pattern, fields in _PROSE:
        if re.search(pattern, notes, re.IGNORECASE):
            ep = replace(ep, **fields)  # type: ignore[arg-type]
    said = re.search(r"(\d+) redundant experts", notes)
    total = re.search(r"\((\d+) experts", notes)
    if said and not ep.redundant_experts:
        ep = replace(ep, redundant_experts=int(said.group(1)))
    elif total and model_experts and not ep.redundant_experts:
        ep = replace(ep, redundant_experts=int(total.group(1)) - model_experts)
    return ep


def _split(total: int, ranks: int) -> list[int]:
    """`total` sequences dealt over `ranks` as evenly as they go (round-robin)."""
    return [total // ranks + (1 if r < total % ranks else 0) for r in range(ranks)]


def gang_prefill_s(dep: Deployment, isl: int, prompts: int) -> float:
    """One prefill pass of `prompts` prompts of `isl` tokens dealt over the attention ranks,
    priced as the ranks step together (cost/dpep.py: the slowest rank, the shared experts,
    the EP exchange of the largest rank; each rank's own host time)."""
    shapes = [BatchShape.prefill(isl, n) if n else None for n in _split(prompts, dep.dp)]
    return gang_step(dep, shapes).time_s


def gang_decode_s(dep: Deployment, seqs: int, context_tokens: int) -> float:
    """One decode step of `seqs` sequences of `context_tokens` dealt over the ranks."""
    shapes = [BatchShape.decode(n, context_tokens) if n else None for n in _split(seqs, dep.dp)]
    return gang_step(dep, shapes).time_s
