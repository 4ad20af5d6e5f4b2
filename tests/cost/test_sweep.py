"""The vectorised sweep computes what the scalar step model computes."""

from __future__ import annotations

import numpy as np
import pytest

from tokenprobe.cost import DEFAULT_EFFICIENCY, BatchShape, make_deployment, step_cost
from tokenprobe.cost.sweep import decode_step_time_grid, decode_sweep


@pytest.mark.parametrize("model", ["llama-3.1-8b", "gemma-3-27b", "mixtral-8x7b", "deepseek-v3"])
def test_grid_equals_scalar_step(model: str) -> None:
    tp = 8 if model == "deepseek-v3" else 2
    eff = DEFAULT_EFFICIENCY.with_overrides({"seq_overhead_s": 20e-6})
    dep = make_deployment(model, "h200", tp=tp, weight_dtype="fp8", efficiency=eff)
    batches, contexts = np.array([1.0, 7.0, 96.0]), np.array([100.0, 3000.0, 70000.0])
    grid = decode_step_time_grid(dep, batches, contexts)
    for i, b in enumerate(batches):
        for j, c in enumerate(contexts):
            scalar = step_cost(dep, BatchShape.decode(int(b), int(c))).time_s
            assert grid[i, j] == pytest.approx(scalar, rel=1e-9)


def test_sweep_marks_kv_infeasible_points() -> None:
    sweep = decode_sweep("llama-3.1-70b", ["h100-sxm", "h200"], [1, 512], [1024, 131072], tp=2)
    assert sweep.configurations == 8
    assert sweep.fits[:, 0, 0].all()  # one short request always fits
    assert not sweep.fits[0, 1, 1]  # 512 x 128K tokens of 70B KV does not fit in 2 x 80 GB
    # more HBM bandwidth (H200) -> faster steps everywhere
    assert (sweep.step_time_s[1] < sweep.step_time_s[0]).all()


def test_per_sequence_host_time_adds_to_every_step_and_counts_as_overhead() -> None:
    base = make_deployment("llama-3.1-8b", "h100-sxm")
    eff = DEFAULT_EFFICIENCY.with_overrides({"seq_overhead_s": 30e-6})
    slow = make_deployment("llama-3.1-8b", "h100-sxm", efficiency=eff)
    shape = BatchShape(prefill_tokens=512, prefill_attn_pairs=512 * 513 / 2, prefill_seqs=1,
                       decode_seqs=63, decode_context_tokens=63 * 1000)  # fmt: skip
    a, b = step_cost(base, shape), step_cost(slow, shape)
    # 64 sequences stepped (one prefill, 63 decodes) x 30 us, all of it host overhead
    assert b.time_s - a.time_s == pytest.approx(64 * 30e-6)
    assert b.overhead_s - a.overhead_s == pytest.approx(64 * 30e-6)
