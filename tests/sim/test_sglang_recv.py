"""SGLang's --scheduler-recv-interval N (sim/sglang_recv.py): while the server only decodes, a
request that has arrived is read only every N decode steps; an idle server reads at once."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tokenprobe.cost import make_deployment
from tokenprobe.errors import ConfigError
from tokenprobe.hardware import get_gpu
from tokenprobe.sim import SchedulerConfig, engine_defaults, simulate
from tokenprobe.workload import Arrival, LengthDist, Workload, fixed

DEP = make_deployment("llama-3.1-8b", "h100-sxm")
BASE = engine_defaults("sglang", get_gpu("h100-sxm"), 1)


def _run(concurrency: int, interval: int, requests: int) -> dict[str, object]:
    # output lengths spread over 32-96 tokens, so that requests end at different steps
    workload = Workload(
        Arrival("closed", concurrency=concurrency),
        fixed(256, "input_tokens"),
        LengthDist("uniform", low=32, high=96, name="output_tokens"),
        num_requests=requests,
    )
    config = replace(BASE, scheduler_recv_interval=interval)
    return simulate(deployment=DEP, workload=workload, config=config, exact_steps=True).summary()


def test_an_idle_server_reads_a_request_at_once() -> None:
    """One user: each request arrives when the last one ended, on an idle server, which spins
    its loop and reads it at once: the same run as with an interval of 1."""
    one, ten = _run(1, 1, 6), _run(1, 10, 6)
    assert ten["ttft_s"]["p50"] == pytest.approx(one["ttft_s"]["p50"], rel=1e-9)
    assert ten["output_tokens_per_s"] == pytest.approx(one["output_tokens_per_s"], rel=1e-9)


def test_a_busy_server_reads_new_requests_every_n_decode_steps() -> None:
    """Eight users whose requests end at staggered steps: an arriving request waits for the
    next read, 0 to N - 1 decode steps, (N - 1) / 2 = 4.5 on average for N = 10, so the median
    TTFT grows by about 4.5 decode steps (a step of 8 sequences is the TPOT scale)."""
    one, ten = _run(8, 1, 64), _run(8, 10, 64)
    step_s = one["tpot_s"]["p50"]
    extra_s = ten["ttft_s"]["p50"] - one["ttft_s"]["p50"]
    assert 3.0 * step_s < extra_s < 6.5 * step_s


def test_the_interval_is_an_integer_at_least_one() -> None:
    with pytest.raises(ConfigError, match="scheduler_recv_interval"):
        SchedulerConfig(scheduler_recv_interval=0)
