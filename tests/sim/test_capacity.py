"""Capacity under SLOs: seed 003's "max output 256 -> 1024" turns one GPU into several."""

from __future__ import annotations

import pytest

from tokenprobe.cost import make_deployment
from tokenprobe.errors import ConfigError
from tokenprobe.sim.capacity import gpus_needed, max_rate_per_s
from tokenprobe.workload import fixed


def test_longer_outputs_need_more_gpus_at_the_same_rate_and_slo() -> None:
    dep = make_deployment("llama-2-7b", "a100-sxm-80gb", weight_dtype="fp16")
    kw = {"slo_tpot_s": 0.02, "slo_ttft_s": 2.0, "num_requests": 150, "iterations": 7}
    short = max_rate_per_s(dep, fixed(512), fixed(256), **kw)  # type: ignore[arg-type]
    long = max_rate_per_s(dep, fixed(512), fixed(1024), **kw)  # type: ignore[arg-type]
    assert 0 < short.max_rate_per_s <= short.saturated_rate_per_s
    assert short.tpot_p90_s is not None and short.tpot_p90_s <= 0.02
    rate = short.max_rate_per_s  # what one GPU sustains with 256-token answers
    assert gpus_needed(rate, short) == 1
    # 4x the output per request: at least 3 GPUs for the same rate (the seed's "1 -> 3")
    needed = gpus_needed(rate, long)
    assert needed is not None and needed >= 3


def test_needs_an_slo() -> None:
    dep = make_deployment("llama-2-7b", "a100-sxm-80gb", weight_dtype="fp16")
    with pytest.raises(ConfigError, match="slo"):
        max_rate_per_s(dep, fixed(512), fixed(256))
