"""`Efficiency.mixed_step_overhead_s`: host time of a step that carries prompt tokens where the
engine cannot replay it as one CUDA graph (vLLM 0.11's FlashInfer backend, the Blackwell
default, captures only uniform decode batches; cost/efficiency.py)."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import cast

import numpy as np
import pytest

from tokenprobe.calibrate import load_profile
from tokenprobe.cost import BatchShape, Efficiency, host_time_s, make_deployment, step_cost
from tokenprobe.errors import ConfigError

DECODE = BatchShape(decode_seqs=32, decode_context_tokens=32 * 1000)
MIXED = BatchShape(
    prefill_tokens=330, prefill_attn_pairs=330 * 165, prefill_seqs=1, decode_seqs=32,
    decode_context_tokens=32 * 1000,
)  # fmt: skip


def _dep(**eff: float):  # type: ignore[no-untyped-def]
    return replace(make_deployment("llama-3.1-8b", "b200"), efficiency=Efficiency(**eff))


def test_only_a_step_with_prompt_tokens_pays_it() -> None:
    """step 0.4 ms + 20 us x 33 logit rows (32 decoding + the prompt's last) = 1.06 ms; the mixed
    step adds 1 ms on top, the decode-only step (32 rows: 1.04 ms) does not."""
    dep = _dep(step_overhead_s=0.4e-3, seq_overhead_s=20e-6, mixed_step_overhead_s=1e-3)
    assert host_time_s(dep, DECODE) == pytest.approx(0.4e-3 + 32 * 20e-6)
    assert host_time_s(dep, MIXED) == pytest.approx(0.4e-3 + 33 * 20e-6 + 1e-3)
    base = _dep(step_overhead_s=0.4e-3, seq_overhead_s=20e-6)
    assert step_cost(dep, MIXED).time_s - step_cost(base, MIXED).time_s == pytest.approx(1e-3)
    assert step_cost(dep, DECODE).time_s == pytest.approx(step_cost(base, DECODE).time_s)


def test_arrays_of_shapes_price_it_per_shape() -> None:
    """sweep.py passes BatchShape's fields as arrays (duck-typed): the same rule per element."""
    dep = _dep(step_overhead_s=0.0, seq_overhead_s=0.0, mixed_step_overhead_s=2e-3)
    grid = SimpleNamespace(prefill_seqs=np.array([0, 1, 3]), logit_rows=np.array([8, 9, 11]))
    assert np.allclose(host_time_s(dep, cast(BatchShape, grid)), [0.0, 2e-3, 2e-3])


def test_it_is_a_bounded_time_and_off_unless_a_profile_fits_it() -> None:
    with pytest.raises(ConfigError, match="mixed_step_overhead_s"):
        Efficiency(mixed_step_overhead_s=-1e-3)
    assert Efficiency().mixed_step_overhead_s == 0.0
    assert load_profile("vllm").efficiency.mixed_step_overhead_s == 0.0  # FA3: full graphs
    assert load_profile("vllm-blackwell").efficiency.mixed_step_overhead_s > 0.0
