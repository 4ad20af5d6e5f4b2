"""`Efficiency.ssm_memory`: a ceiling on the HBM rate of the Mamba-2 state traffic (the `ssm`
operator), the lesser of it and `memory` (cost/efficiency.py): vLLM 0.11's Triton
selective_state_update is bound on the SM side, so B200's faster HBM does not speed it up."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from tokenprobe.calibrate import load_csv, load_profile
from tokenprobe.cost import BatchShape, Efficiency, make_deployment, op_costs
from tokenprobe.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
B200_CSV = ROOT / "benchmarks" / "data" / "mlenergy_leaderboard_v3_b200.csv"

# Nemotron-Nano-9B-v2 (tests/test_model_parts.py): 27 Mamba-2 layers, each holding per sequence
# an fp32 SSM state of 128 heads x 80 x 128 and a bf16 conv state of 3 x 12,288, and moving per
# token its projections' activations: in_proj out 2·10,240 + 2·1024 + 128 = 22,656 and out_proj
# in 10,240, bf16
STATE_BYTES_PER_LAYER = 128 * 80 * 128 * 4 + 3 * 12_288 * 2  # 5,316,608
IO_BYTES_PER_TOKEN_PER_LAYER = (22_656 + 10_240) * 2
B200_HBM_BYTES_PER_S = 8.0e12


def _ssm_op(eff: Efficiency, seqs: int = 256) -> tuple[float, float]:
    dep = replace(make_deployment("nemotron-nano-9b-v2", "b200"), efficiency=eff)
    shape = BatchShape(decode_seqs=seqs, decode_context_tokens=seqs * 1000)
    (op,) = [o for o in op_costs(dep, shape) if o.name == "ssm"]
    return op.hbm_bytes, op.memory_s


def test_the_state_is_read_and_written_once_a_step_at_the_ceiling_rate() -> None:
    """256 decoding sequences: 27 x (2 x 256 x 5,316,608 + 256 x 65,792) = 73.95 GB a step; at a
    ceiling of 0.40 of B200's 8 TB/s (below `memory` 0.85) that is 73.95e9 / 3.2e12 = 23.1 ms."""
    nbytes, memory_s = _ssm_op(Efficiency(memory=0.85, ssm_memory=0.40))
    expected = 27 * (2 * 256 * STATE_BYTES_PER_LAYER + 256 * IO_BYTES_PER_TOKEN_PER_LAYER)
    assert nbytes == pytest.approx(expected)
    assert memory_s == pytest.approx(expected / (0.40 * B200_HBM_BYTES_PER_S))


def test_a_ceiling_above_memory_leaves_the_streaming_rate() -> None:
    """The lesser of the two: 0.95 over `memory` 0.80 prices the state at 0.80, as the default
    (1.0: no ceiling) does, so profiles that do not set it keep their figures."""
    _, at_default = _ssm_op(Efficiency(memory=0.80))
    _, above = _ssm_op(Efficiency(memory=0.80, ssm_memory=0.95))
    nbytes, _ = _ssm_op(Efficiency(memory=0.80))
    assert above == pytest.approx(at_default)
    assert at_default == pytest.approx(nbytes / (0.80 * B200_HBM_BYTES_PER_S))


def test_the_ceiling_is_a_fraction() -> None:
    with pytest.raises(ConfigError, match="ssm_memory"):
        Efficiency(ssm_memory=1.5)


def test_the_blackwell_figure_is_h200s_kernel_rate_per_sm_on_b200s_sms() -> None:
    """vllm-project/vllm PR #44251 (heuristic launch, fp32 state, headdim 64, dstate 128): EffBatch
    8192 in 188.20 us moves 8192 x 2 x 64 x 128 x 4 B = 536.9 MB, 2.853 TB/s on H200's 132 SMs;
    x 148 / 132 (B200's SMs) / 8 TB/s = 0.3998. `vllm` (H100, where that rate is what `memory`
    gives) does not set it."""
    bench = str(ROOT / "benchmarks")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    import fit_blackwell

    per_sm = 8192 * 2 * 64 * 128 * 4 / 188.20e-6 / 132
    ceiling = fit_blackwell.SSM_MEMORY_B200
    assert ceiling == pytest.approx(per_sm * 148 / 8.0e12)
    assert ceiling == pytest.approx(0.3998, abs=1e-4)
    assert load_profile("vllm-blackwell").efficiency.ssm_memory == pytest.approx(ceiling)
    vllm = load_profile("vllm").efficiency
    assert vllm.ssm_memory == 1.0
    # H100 (3.35 TB/s): `vllm`'s streaming rate is the H200 kernel's rate within 5 %
    assert 3.35e12 * vllm.memory == pytest.approx(per_sm * 132, rel=0.05)


def test_a_busy_b200_hybrid_row_is_no_longer_a_third_too_fast() -> None:
    """ML.ENERGY's Nemotron-Nano-9B-v2 on one B200 at 512 sequences (chat; its GPU power reads
    busy): 72.2 ms a token measured; with the state at `memory`'s rate the profile said ~51 ms
    (-30 %), within 15 % now."""
    rows = [r for r in load_csv(B200_CSV).rows if r.label == "NVIDIA-Nemotron-Nano-9B-v2 1gpu B512"]
    assert len(rows) == 1
    p = load_profile("vllm-blackwell")
    predicted = rows[0].predictions(p.efficiency, p.power)["itl_median"]
    assert predicted == pytest.approx(rows[0].measured["itl_median"], rel=0.15)
    at_memory = replace(p.efficiency, ssm_memory=1.0)
    assert rows[0].predictions(at_memory, p.power)["itl_median"] < 0.8 * predicted
