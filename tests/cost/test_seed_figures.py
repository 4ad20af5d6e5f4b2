"""The seeds' worked figures, from first principles and through the cost model."""

from __future__ import annotations

import pytest

from tokenprobe.cost import BatchShape, make_deployment, step_cost, transfer_time_s
from tokenprobe.cost.memory import weights_bytes_per_gpu
from tokenprobe.units import GIGA, MILLI, TERA, GiB, KiB


def test_kv_per_token_70b_fp16_is_320_kib() -> None:
    # seed 004: 80 layers x 8 KV heads x 128 dims x 2 (K, V) x 2 bytes
    dep = make_deployment("llama-2-70b", "h100-sxm", tp=4, weight_dtype="fp16")
    assert dep.kv_bytes_per_token == 320 * KiB
    assert dep.kv_bytes_per_token * 100_000 / GiB == pytest.approx(30.52, abs=0.01)
    # the seed's "100K tokens ~ 31.25 GiB" counts 100K as 102,400 tokens (100 x 1024)
    assert dep.kv_bytes_per_token * 100 * 1024 / GiB == pytest.approx(31.25)


def test_7b_fp16_weights_are_about_14_gb() -> None:
    dep = make_deployment("llama-2-7b", "a100-sxm-80gb", weight_dtype="fp16")
    assert weights_bytes_per_gpu(dep) / GIGA == pytest.approx(13.5, abs=0.1)


def test_one_decode_step_of_7b_weights_at_2_tb_per_s_is_about_7_ms() -> None:
    # seed 003: reading ~14 GB of weights at ~2 TB/s (A100 80GB: 2.039 TB/s) takes ~7 ms
    dep = make_deployment("llama-2-7b", "a100-sxm-80gb", weight_dtype="fp16", efficiency=None)
    weights = weights_bytes_per_gpu(dep)
    assert weights / dep.gpu.hbm_bytes_per_s / MILLI == pytest.approx(6.6, abs=0.2)
    # the model's step adds achievable-bandwidth efficiency, KV reads and overheads on top
    step = step_cost(dep, BatchShape.decode(batch=1, context_tokens=512))
    assert 6.6 * MILLI < step.time_s < 12 * MILLI
    assert step.bound == "memory"


def test_20_gb_over_pcie_and_nvlink() -> None:
    # seed 004: 20 GB over PCIe 5.0 x16 (128 GB/s both directions) ~ 156 ms; NVLink 900 GB/s ~ 22 ms
    assert transfer_time_s(20 * GIGA, 128 * GIGA) / MILLI == pytest.approx(156.25)
    h100 = make_deployment("llama-3.1-8b", "h100-sxm").gpu
    assert transfer_time_s(20 * GIGA, h100.link.bidirectional_bytes_per_s) / MILLI == pytest.approx(
        22.2, abs=0.1
    )
    assert 2 * h100.pcie_bytes_per_s / GIGA == pytest.approx(126, abs=2)


def test_decode_is_memory_bound_and_prefill_compute_bound_on_h100() -> None:
    dep = make_deployment("llama-3.1-8b", "h100-sxm")
    assert step_cost(dep, BatchShape.decode(1, 1024)).bound == "memory"
    assert step_cost(dep, BatchShape.prefill(4096)).bound == "compute"
    assert dep.peak_flop_per_s == pytest.approx(989.4 * TERA, rel=0.01)
