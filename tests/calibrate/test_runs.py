"""Calibrating on runs the simulator made with known parameters recovers those parameters."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenprobe.calibrate import Params, fit, rows_from_run
from tokenprobe.cost import make_deployment
from tokenprobe.sim import simulate

TRUE = {"memory": 0.66, "step_overhead_s": 2.0e-3}


def _simulated_run(tmp_path: Path, name: str, concurrency: int, model: str) -> Path:
    truth = Params().with_values(TRUE)
    dep = make_deployment(model, "h100-sxm", efficiency=truth.efficiency)
    result = simulate(
        deployment=dep,
        input_tokens=512,
        output_tokens=64,
        concurrency=concurrency,
        num_requests=2 * concurrency,
        seed=1,
    )
    return result.write(tmp_path / name)


def test_simulated_runs_give_back_their_parameters(tmp_path: Path) -> None:
    rows = []
    for i, (conc, model) in enumerate(
        [(1, "llama-3.1-8b"), (8, "qwen3-14b"), (32, "llama-3.1-8b")]
    ):
        loaded = rows_from_run(_simulated_run(tmp_path, f"run{i}", conc, model))
        assert not loaded.skipped, loaded.skipped
        rows += loaded.rows
    assert {r.engine for r in rows} == {"tokenprobe-sim"}
    result = fit(rows, list(TRUE), ridge=0.0, max_iterations=40)
    for name, value in TRUE.items():
        assert result.values[name] == pytest.approx(value, rel=0.03), name


def test_a_folder_that_is_no_run_is_rejected(tmp_path: Path) -> None:
    from tokenprobe.errors import SchemaError

    with pytest.raises(SchemaError, match="run folder"):
        rows_from_run(tmp_path)


def test_a_bench_like_run_needs_its_gpu_and_then_calibrates(tmp_path: Path) -> None:
    """A run that records only the served model and the load (as `bench` does) is skipped with
    the reason, and used once the GPU is given."""
    import json

    folder = _simulated_run(tmp_path, "bench", 4, "llama-3.1-8b")
    doc = json.loads((folder / "config.json").read_text())
    doc["kind"] = "measured"
    doc["config"] = {
        "model": "llama-3.1-8b",
        "concurrency": 4,
        "input_tokens": 512,
        "output_tokens": 64,
        "num_requests": 8,
        "seed": 1,
    }
    (folder / "config.json").write_text(json.dumps(doc))
    skipped = rows_from_run(folder)
    assert not skipped.rows and "gpu" in next(iter(skipped.skipped))
    loaded = rows_from_run(folder, {"gpu": "h100-sxm"})
    assert len(loaded.rows) == 1 and loaded.rows[0].engine == "measured"
    result = fit(loaded.rows, ["memory"], ridge=0.0)
    assert result.objective_end <= result.objective_start
