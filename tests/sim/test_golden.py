"""A seeded simulation against its golden file (regenerate: TOKENPROBE_REGEN_GOLDEN=1 pytest ...).

The step function is the tests' fixed stand-in, so the file changes only when the simulator's
behaviour does (scheduling, preemption, token timing, energy accounting), never with the cost model.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tokenprobe.sim import SchedulerConfig, run_workload
from tokenprobe.sim.kv import BlockPool
from tokenprobe.workload import Arrival, LengthDist, Workload

from .helpers import IDLE_W, linear_step

GOLDEN = Path(__file__).parent / "golden" / "seeded_gamma_chat.json"


def _simulate() -> dict[str, object]:
    workload = Workload(
        Arrival("gamma", rate_per_s=6.0, burstiness=0.5),
        LengthDist("lognormal", mean=300, sigma=0.6, name="input_tokens"),
        LengthDist("uniform", low=20, high=200, name="output_tokens"),
        num_requests=300,
        shared_prefix_tokens=64,
    )
    config = SchedulerConfig(max_num_seqs=32, max_num_batched_tokens=1024, prefix_caching=True)
    pool = BlockPool(400, config.block_size, config.prefix_caching)  # tight: forces preemption
    result = run_workload(workload, linear_step, pool, config, idle_w=IDLE_W, seed=42)
    data = result.to_dict()
    data.pop("config")
    return json.loads(json.dumps(data))  # type: ignore[no-any-return]


def test_seeded_simulation_matches_golden() -> None:
    data = _simulate()
    if os.environ.get("TOKENPROBE_REGEN_GOLDEN"):
        GOLDEN.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    golden = json.loads(GOLDEN.read_text())
    assert data["preemptions"] == golden["preemptions"] and golden["preemptions"] > 0
    assert _close(data, golden)


def _close(a: object, b: object, path: str = "") -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), path
        return all(_close(a[k], b[k], f"{path}.{k}") for k in a)
    if isinstance(a, float) and isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-9), path
        return True
    assert a == b, path
    return True
