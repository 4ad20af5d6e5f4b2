"""benchmarks/validate_dp_rows.py and the DP+EP replay hooks: the rows the steady-state mappers
skip as data-parallel run through the DP+EP simulator, and the LMSYS large-scale EP rows read
the back end their notes name (DeepEP kernels, two-batch overlap, EPLB's redundant experts)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

from tokenprobe.cost import EpComm
from tokenprobe.records import RequestRecord, Run, TimelinePoint

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import deployment_replay as dr  # noqa: E402
import ep_replay  # noqa: E402
import validate_deployments as vd  # noqa: E402
import validate_dp_rows as vdp  # noqa: E402


def test_gpustack_dp_attention_rows_are_simulated_as_ranks() -> None:
    """GPUStack's 11 SGLang --enable-dp-attention rows: 10 run as 8 ranks stepping together
    (the 128/4 one is front-end-bound, skipped as calibrate.serving skips it), each measured
    metric with a finite prediction."""
    rows = vdp.replay_all(["gpustack"])
    assert len(rows) == 11
    covered = [r for r in rows if r.predicted is not None]
    assert len(covered) == 10
    for r in covered:
        assert r.errors() and all(math.isfinite(e) for e in r.errors().values()), r.label
    table = vdp.summarize(rows)
    assert table[0]["tpot_median_n"] == 10


def test_the_lmsys_rows_name_their_ep_back_end() -> None:
    rows = vd.load_rows([vd.DATA_DIR / "lmsys_large_scale_ep_h100.csv"])
    prefill = next(r for r in rows if r["phase"] == "prefill")
    decode = next(r for r in rows if r["phase"] == "decode")
    assert ep_replay.ep_comm_for(prefill, 256) == EpComm("deepep", "normal", "auto", True, 32)
    # "EPLB (288 experts with redundancy)": 32 more than DeepSeek-V3's 256
    assert ep_replay.ep_comm_for(decode, 256) == EpComm("deepep", "low-latency", "auto", True, 32)


def test_ep72_decode_is_covered_once_redundant_experts_are_placed() -> None:
    """256 experts do not divide over 72 GPUs: the row needs EPLB's 288."""
    rows = vd.load_rows([vd.DATA_DIR / "lmsys_large_scale_ep_h100.csv"])
    decode = next(r for r in rows if r["phase"] == "decode")
    replayed = dr.replay(decode, "profile")
    assert replayed.predicted is not None, replayed.why
    assert "32 redundant experts" in replayed.note


def test_an_mlenergy_dp_engine_gets_its_share_of_the_sweeps_max_num_seqs() -> None:
    """ML.ENERGY's DP launch passes each of the dp engines max_num_seqs / dp (ml-energy/benchmark
    benchmark.py `max_num_seqs_per_replica`): the 8-GPU row of the 512 sweep point runs 64
    sequences an engine, the 4-GPU row of 8 runs 2; the fleet's running count (`avg_batch_size`,
    summed over engines) stays the closed loop's users."""
    assert vdp.engine_max_num_seqs({"max_num_seqs": "512"}, 8, 256) == 64
    assert vdp.engine_max_num_seqs({"max_num_seqs": "8"}, 4, 256) == 2
    assert vdp.engine_max_num_seqs({}, 8, 256) == 256  # no sweep value: an engine's default


def test_mlenergy_dp_output_lengths_have_the_tasks_mean_and_spread() -> None:
    """The DP rows' outputs are drawn lognormal with the published mean and calibrate.mlenergy's
    CV (1 for code completion: sigma² = ln 2), not all equal: 4,000 draws of mean 245 land
    within sampling error (CV / √n = 1.6 % for the mean), and they differ from one another."""
    lengths = vdp.output_lengths(245.0, 1.0, 4000)
    mean = sum(lengths) / len(lengths)
    sd = math.sqrt(sum((k - mean) ** 2 for k in lengths) / len(lengths))
    assert abs(mean / 245.0 - 1) < 0.05
    assert 0.8 < sd / mean < 1.2
    assert vdp.output_lengths(245.0, 1.0, 4000) == lengths  # the same every run


def test_the_steady_window_is_ml_energys() -> None:
    """Six requests, max_num_seqs 2: the window opens at the second first token (t = 1.0) and
    closes when all but 2 + 1 have finished, at the third finish (t = 6.0). Request i has its
    first token at 0.5 i + 0.5, one token a second after it, and finishes at i + 4, so the
    tokens in [1, 6) are, by hand, 3 + 5 + 5 + 4 + 4 + 3 = 24; the GPUs draw 1,000 W until
    t = 3 and 2,000 W after: 2 s x 1 kW + 3 s x 2 kW = 8 kJ in the window. Four requests
    leave no window (the ramp-down would start before the ramp-up ends)."""
    records = []
    for i in range(6):
        first = 0.5 * i + 0.5
        finish = i + 4.0
        times = [first + k for k in range(int(finish - first) + 1)]
        records.append(RequestRecord(f"r{i}", 0.0, 0.0, first, finish, 8, len(times), times))
    timeline = [TimelinePoint(0.0, 0, 0, 0, 1000.0), TimelinePoint(3.0, 0, 0, 0, 2000.0)]
    window = vdp.steady_window(Run("simulated", records=records, timeline=timeline), 2)
    assert window is not None
    assert window["duration_s"] == 5.0
    assert window["tokens"] == 3 + 5 + 5 + 4 + 4 + 3
    assert window["energy_j"] == 2 * 1000.0 + 3 * 2000.0
    assert vdp.steady_window(Run("simulated", records=records[:4], timeline=timeline), 2) is None
