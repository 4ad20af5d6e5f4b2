"""`tokenprobe profile` on a real GPU (`pytest -m gpu`); skipped without torch and CUDA."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenprobe.calibrate import calibrate, rows_from_run
from tokenprobe.calibrate.profiler import (
    ProfileSpec,
    gpu_unavailable_reason,
    profile_gpu,
    write_profile_run,
)

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def profile_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    reason = gpu_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    spec = ProfileSpec(
        model="llama-3.1-8b",
        batches=(1, 16, 64),
        contexts=(512, 4096),
        prefill_lengths=(256, 1024, 4096),
    )
    run = profile_gpu(spec)
    assert run.peak_memory_bytes > 15 * 2**30  # 8B parameters in bf16 are ~16 GB
    return write_profile_run(run, tmp_path_factory.mktemp("profile") / "run")


def test_profile_run_reads_back_as_rows(profile_run: Path) -> None:
    loaded = rows_from_run(profile_run)
    assert not loaded.skipped
    kinds = {m for r in loaded.rows for m in r.measured}
    assert {"prefill_s", "decode_step_s"} <= kinds
    # prefill time grows with length; decode step time grows with batch at one context
    prefill = sorted((int(r.label.split("L")[-1]), r.measured["prefill_s"]) for r in loaded.rows
                     if "prefill_s" in r.measured)  # fmt: skip
    assert [t for _, t in prefill] == sorted(t for _, t in prefill)


def test_calibrating_on_the_profile_lowers_the_error(profile_run: Path) -> None:
    rows = rows_from_run(profile_run).rows
    cal = calibrate(rows, holdout=["*never*"])
    before = sum(g.mdape for g in cal.fitted_before)
    after = sum(g.mdape for g in cal.fitted_after)
    assert after <= before
