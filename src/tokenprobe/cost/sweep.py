"""Vectorised decode sweep: numpy over GPU x batch x context (for plans, plots and what-ifs).

The operator formulas of `ops.py` run unchanged on numpy arrays; this module only builds the
grid and applies the roofline elementwise:
t = Σ_ops layers·(kernels·α + max(FLOP/F, bytes/B)) + comm +
step overhead (the same as `step.step_cost` without a power cap). `benchmarks/estimate_speed.py`
checks its rate (configurations per second).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from tokenprobe.cost.deployment import Deployment, make_deployment
from tokenprobe.cost.memory import DEFAULT_BUDGET, MemoryBudget, memory_report
from tokenprobe.cost.shape import BatchShape
from tokenprobe.cost.step import (
    flop_rate_scales,
    host_time_s,
    rates,
    special_byte_rates,
    terms,
)
from tokenprobe.cost.stepcomm import exposed_comm_s

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class _GridShape:
    """BatchShape's fields as broadcastable arrays (duck-typed into the operator formulas)."""

    decode_seqs: Any
    decode_context_tokens: Any
    prefill_tokens: Any = 0
    prefill_attn_pairs: Any = 0.0
    prefill_seqs: Any = 0

    @property
    def tokens(self) -> Any:
        return self.prefill_tokens + self.decode_seqs

    @property
    def logit_rows(self) -> Any:
        return self.prefill_seqs + self.decode_seqs


def decode_step_time_grid(dep: Deployment, batches: FloatArray, contexts: FloatArray) -> FloatArray:
    """Decode step time [s] for every (batch, context) pair: shape (len(batches), len(contexts))."""
    b = np.asarray(batches, dtype=np.float64)[:, None]
    c = np.asarray(contexts, dtype=np.float64)[None, :]
    shape = cast(BatchShape, _GridShape(decode_seqs=b, decode_context_tokens=b * c))
    flop_rate, byte_rate = rates(dep, b)
    special, fscale = special_byte_rates(dep), flop_rate_scales(dep)
    alpha = dep.efficiency.kernel_overhead_s
    stage = np.zeros(np.broadcast_shapes(b.shape, c.shape))
    for name, n, flop, nbytes, kernels in terms(dep, shape):
        tm = nbytes / special.get(name, byte_rate)
        tc = np.asarray(flop) / (flop_rate * fscale.get(name, 1.0))
        stage += n * (kernels * alpha + np.maximum(tc, tm))
    total = stage * dep.pp + exposed_comm_s(dep, shape, stage * dep.pp) + host_time_s(dep, shape)
    return np.asarray(total, dtype=np.float64)


@dataclass(frozen=True)
class DecodeSweep:
    """Arrays indexed [gpu, batch, context]."""

    gpus: list[str]
    batches: FloatArray
    contexts: FloatArray
    step_time_s: FloatArray
    fits: npt.NDArray[np.bool_]  # batch x KV of one request at that context fits in free memory

    @property
    def output_tokens_per_s(self) -> FloatArray:
        return np.asarray(self.batches[None, :, None] / self.step_time_s, dtype=np.float64)

    @property
    def configurations(self) -> int:
        return int(self.step_time_s.size)


def decode_sweep(
    model: str,
    gpus: Sequence[str],
    batches: Sequence[int] | FloatArray,
    contexts: Sequence[int] | FloatArray,
    *,
    budget: MemoryBudget = DEFAULT_BUDGET,
    **deployment: Any,
) -> DecodeSweep:
    """Decode step time and KV feasibility for each GPU x batch x context."""
    b = np.asarray(batches, dtype=np.float64)
    c = np.asarray(contexts, dtype=np.float64)
    times, fits = [], []
    for gpu in gpus:
        dep = make_deployment(model, gpu, **deployment)
        times.append(decode_step_time_grid(dep, b, c))
        max_requests = np.array(
            [memory_report(dep, int(ctx), budget).max_concurrent_requests for ctx in c]
        )
        fits.append(b[:, None] <= max_requests[None, :])
    return DecodeSweep(
        gpus=list(gpus), batches=b, contexts=c, step_time_s=np.stack(times), fits=np.stack(fits)
    )
