"""Synthetic measurements: profiler-schema rows whose values the cost model produced with known
parameters (so a fit has a known answer), seeded noise optional."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from tokenprobe.calibrate import Params, load_rows
from tokenprobe.calibrate.observations import Row
from tokenprobe.calibrate.profiler import CSV_COLUMNS, SOURCE_ID
from tokenprobe.units import MILLI

TRUE_VALUES = {
    "compute_prefill": 0.62,
    "memory": 0.72,
    "attention_memory": 0.50,
    "kernel_overhead_s": 7e-6,
    "step_overhead_s": 1.2e-3,
    "power.busy_power_fraction": 0.35,
}
MODELS = ("llama-3.1-8b", "qwen3-14b", "gemma-3-12b", "llama-2-7b")
PREFILL_LENGTHS = (256, 1024, 4096)
DECODE = ((1, 1024), (16, 1024), (64, 4096), (128, 512))


def _line(model: str, kind: str, batch: int, tokens: int, run: str) -> dict[str, str]:
    row = dict.fromkeys(CSV_COLUMNS, "")
    row.update(
        source_id=SOURCE_ID,
        engine="pytorch-eager",
        model=model,
        model_hf_id=model,
        gpu="h100-sxm",
        weight_precision="bf16",
        kv_cache_precision="bf16",
        tp="1",
        workload_type=kind,
        batch_size=str(batch),
        isl=str(tokens),
        notes=run,
    )
    # placeholders, replaced by the true model's values below
    row["ttft_ms_mean" if kind == "prefill_step" else "itl_ms_mean"] = "1"
    row["power_W_total"] = "100"
    return row


def synthetic_rows(
    truth: Params, noise: float = 0.0, seed: int = 0, models: tuple[str, ...] = MODELS
) -> list[Row]:
    """Rows measured on a 'GPU' that behaves exactly like the cost model at `truth`."""
    lines = []
    for model in models:
        lines += [_line(model, "prefill_step", 1, n, model) for n in PREFILL_LENGTHS]
        lines += [_line(model, "decode_step", b, c, model) for b, c in DECODE]
    rows = load_rows(lines).rows
    rng = np.random.default_rng(seed)
    out = []
    for row in rows:
        values = row.predictions(truth.efficiency, truth.power)
        measured = {k: values[k] * float(np.exp(rng.normal(0.0, noise))) for k in row.measured}
        out.append(
            Row(
                row.source,
                f"{row.run}",
                row.engine,
                row.label,
                row.deployment,
                measured,
                row.predict,
            )
        )
    return out


@pytest.fixture
def truth() -> Params:
    return Params().with_values(TRUE_VALUES)


@pytest.fixture
def make_rows() -> Callable[..., list[Row]]:
    return synthetic_rows


def ms(value_s: float) -> str:
    return f"{value_s / MILLI:.9g}"
