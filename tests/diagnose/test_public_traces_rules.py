"""The diagnosis rules on runs built from REAL public telemetry (tests/data/telemetry/
real_public_*; sources and licenses in that folder's README). Each case asserts only what the
recording itself shows; the thresholds are those of tokenprobe.diagnose.context.

The nvidia-smi captures hold two moments of one H100 (idle, then under gpu-burn), taken seconds
apart by two separate nvidia-smi calls; each moment is diagnosed as a run of its own, since the
log says nothing about the time between them. One test also reads the whole capture as ONE run,
to check how the time-weighting treats an imported log with no run duration.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest

from tokenprobe.diagnose import Verdict, diagnose, signals_of
from tokenprobe.diagnose.context import (
    BUSY_UTIL,
    CAPPED_CLOCK_OF_BOOST,
    HIGH_POWER_OF_TDP,
    KV_FULL,
    LOW_POWER_OF_TDP,
    MEM_UTIL_HIGH,
    MIN_CLOCK_SAMPLES,
    POWER_CAP_OF_LIMIT,
    POWER_THERMAL_BITS,
    THROTTLE_SHARE,
)
from tokenprobe.hardware import get_gpu
from tokenprobe.records import Run
from tokenprobe.telemetry.nvidia_smi_csv import read_nvidia_smi_csv
from tokenprobe.telemetry.prometheus_text import gpu_samples, parse_exposition, server_sample

DATA = Path(__file__).parents[1] / "data" / "telemetry"


def _nvidia_smi_moment(name: str, which: int) -> Run:
    """Sample `which` (0 idle, 1 gpu-burn) of a real capture, as an imported H100 SXM run."""
    run = read_nvidia_smi_csv(DATA / f"real_public_nvidia_smi_{name}.csv").to_run(
        {"gpu": "h100-sxm"}
    )
    return replace(run, telemetry=[run.telemetry[which]])


def _verdict(run: Run, rule: str) -> Verdict:
    return next(v for v in diagnose(run).verdicts if v.rule == rule)


def _smi_cells(name: str, which: int) -> dict[str, str]:
    """Row `which` of a real nvidia-smi capture as {header: cell}, read as plain CSV text."""
    lines = (DATA / f"real_public_nvidia_smi_{name}.csv").read_text().splitlines()
    header = [c.strip() for c in lines[0].split(",")]
    rows = [r for r in lines if r.strip() and not r.startswith("timestamp")]
    return dict(zip(header, (c.strip() for c in rows[which].split(",")), strict=True))


def _number(cell: str) -> float:
    """'631.95 W' -> 631.95, '1980 MHz' -> 1980.0 (the unit as printed is dropped)."""
    return float(cell.split()[0])


def _dcgm_value(name: str, metric: str) -> float:
    """The value of `metric` in a real dcgm-exporter scrape, read as plain text."""
    text = (DATA / name).read_text()
    (line,) = [ln for ln in text.splitlines() if ln.strip().startswith(metric + "{")]
    return float(line.rsplit(" ", 1)[1])


def test_thresholds_the_cases_below_rely_on() -> None:
    """If these move, re-read the comments below before trusting the cases."""
    assert (BUSY_UTIL, LOW_POWER_OF_TDP, HIGH_POWER_OF_TDP, MEM_UTIL_HIGH) == (0.8, 0.75, 0.8, 0.5)
    assert KV_FULL == 0.9
    assert MIN_CLOCK_SAMPLES == 10
    assert (POWER_CAP_OF_LIMIT, CAPPED_CLOCK_OF_BOOST, THROTTLE_SHARE) == (0.9, 0.85, 0.1)
    assert POWER_THERMAL_BITS & 0x1 == 0  # "GPU idle" is not a power/thermal reason
    assert get_gpu("h100-sxm").tdp_w == 700.0  # the capture's "power.limit [W]": "700.00 W"
    # catalog boost clocks: H100 SXM = the capture's clocks.max.sm "1980 MHz"; T4; A100 SXM4
    assert get_gpu("h100-sxm").sm_clock_hz == 1980e6
    assert get_gpu("t4").sm_clock_hz == 1590e6 and get_gpu("t4").tdp_w == 70.0
    assert get_gpu("a100-sxm-40gb").sm_clock_hz == 1410e6


def test_h100_under_gpu_burn_is_compute_bound() -> None:
    """gpu-burn (a GEMM burner): utilization.gpu "100 %" >= 80 % and power.draw "631.95 W" =
    90 % of 700 W >= 80 %: compute-bound fires."""
    verdict = _verdict(_nvidia_smi_moment("h100_gpuburn", 1), "compute-bound")
    assert verdict.status == "fired", verdict.reason
    assert verdict.finding is not None
    assert verdict.finding.evidence["gpu_util_busy"] == pytest.approx(1.0)
    assert verdict.finding.evidence["power_of_tdp_busy"] == pytest.approx(631.95 / 700, abs=1e-3)


def test_h100_under_gpu_burn_is_neither_memory_bound_nor_throttled() -> None:
    """Same moment: 90 % of TDP is above the 75 % memory-bound ceiling and utilization.memory is
    "11 %" (< 50 %); clocks_event_reasons.active is 0x0 and the SM clock is "1980 MHz", the
    card's clocks.max.sm: no throttling."""
    run = _nvidia_smi_moment("h100_gpuburn", 1)
    memory = _verdict(run, "memory-bandwidth-bound")
    assert memory.status == "clear", memory.reason
    throttling = _verdict(run, "throttling")
    assert throttling.status == "clear", throttling.reason


def test_h100_under_gpu_burn_is_at_its_power_limit_but_not_power_capped() -> None:
    """The power-cap check's must-not-fire case on a real row: power.draw "631.95 W" of
    enforced.power.limit "700.00 W" is 90.3 %, at the limit by the >= 90 % mark, but the SM clock
    "1980 MHz" is the card's clocks.max.sm and the catalog's boost clock (100 % >= 85 %): GPU
    Boost is not held back, so throttling stays clear and compute-bound still fires."""
    cells = _smi_cells("h100_gpuburn", 1)
    power, limit = _number(cells["power.draw [W]"]), _number(cells["enforced.power.limit [W]"])
    clock = _number(cells["clocks.current.sm [MHz]"])
    max_clock = _number(cells["clocks.max.sm [MHz]"])
    assert (power, limit, clock, max_clock) == (631.95, 700.0, 1980.0, 1980.0)
    assert power / limit >= POWER_CAP_OF_LIMIT
    assert clock * 1e6 / get_gpu("h100-sxm").sm_clock_hz >= CAPPED_CLOCK_OF_BOOST

    run = _nvidia_smi_moment("h100_gpuburn", 1)
    assert run.telemetry[0].power_limit_w == pytest.approx(limit)
    throttling = _verdict(run, "throttling")
    assert throttling.status == "clear", throttling.reason
    assert throttling.reason.endswith(
        "at >= 90% of the 700 W power limit (enforced, from the telemetry) 100% of the busy time "
        "with SM clock 1980 MHz = 100% of the 1980 MHz boost clock"
    ), throttling.reason
    compute = _verdict(run, "compute-bound")
    assert compute.status == "fired" and compute.finding is not None
    assert "the tensor cores are the limit" in compute.finding.summary


def test_idle_h100_is_not_busy_and_its_idle_reason_is_not_throttling() -> None:
    """Idle: "0 %" utilization at "69.85 W" (10 % of TDP), so no boundness fires; the only
    clock-event reason, 0x0000000000000001 (GPU idle), is not a power/thermal one."""
    run = _nvidia_smi_moment("h100_gpuburn", 0)
    assert run.telemetry[0].throttle_reasons == 0x1
    for rule in ("compute-bound", "memory-bandwidth-bound", "throttling"):
        verdict = _verdict(run, rule)
        assert verdict.status == "clear", f"{rule}: {verdict.reason}"
    # its clock, "345 MHz", is 17 % of boost, but at 10 % of the limit the board is not capped
    assert _verdict(run, "throttling").reason.endswith(
        "power 10% of the 700 W power limit (enforced, from the telemetry): not at it"
    )


@pytest.mark.parametrize("which", [0, 1], ids=["idle", "gpu-burn"])
def test_mig_mode_without_utilization_skips_boundness_instead_of_guessing(which: int) -> None:
    """In MIG mode nvidia-smi prints [N/A] for utilization.gpu: the rules that need it skip
    (even at "433.78 W" under gpu-burn) rather than call the GPU idle or busy."""
    run = _nvidia_smi_moment("h100_mig_gpuburn", which)
    for rule in ("compute-bound", "memory-bandwidth-bound"):
        verdict = _verdict(run, rule)
        assert verdict.status == "skipped", f"{rule}: {verdict.reason}"
        assert "utilization" in verdict.reason
    assert _verdict(run, "throttling").status == "clear"  # reasons 0x1 / 0x0, clock 1980 MHz


def _capture_times(path: Path) -> list[float]:
    """The `timestamp` cells of an nvidia-smi capture, read as plain text (local time)."""
    rows = [r for r in path.read_text().splitlines() if r.strip() and not r.startswith("timestamp")]
    stamps = [row.split(",")[0].strip() for row in rows]
    return [datetime.strptime(t, "%Y/%m/%d %H:%M:%S.%f").timestamp() for t in stamps]


def test_the_whole_h100_capture_as_one_run_weighs_both_rows() -> None:
    """The two rows (idle "0 %" / "69.85 W" at 08:12:38.696, gpu-burn "100 %" / "631.95 W" at
    08:12:53.353) as ONE imported run, which has no duration and no requests: the idle row holds
    until the gpu-burn row, and the gpu-burn row, the GPU's last, holds for the GPU's median
    sampling period (its only gap) instead of for nothing. The mean utilization is therefore
    (0 x gap + 1 x gap) / (2 x gap) = 50 %, where a zero-weight last row read 0 %."""
    path = DATA / "real_public_nvidia_smi_h100_gpuburn.csv"
    idle_t, burn_t = _capture_times(path)
    gap = burn_t - idle_t
    assert gap == pytest.approx(14.657, abs=1e-3)
    run = read_nvidia_smi_csv(path).to_run({"gpu": "h100-sxm"})
    assert run.duration_s is None and not run.records
    sig = signals_of(run)
    assert sig.gpu_util is not None and sig.power_w is not None
    assert list(sig.gpu_util.dt_s) == pytest.approx([gap, gap])
    expected_util = (0.0 * gap + 1.0 * gap) / (gap + gap)
    assert expected_util == 0.5
    assert sig.gpu_util.mean() == pytest.approx(expected_util)
    assert sig.power_w.mean() == pytest.approx((69.85 * gap + 631.95 * gap) / (gap + gap))
    # 50 % busy at 350.9 W (50 % of 700 W): neither compute- nor memory-bound
    compute = _verdict(run, "compute-bound")
    assert compute.status == "clear" and "util 50%" in compute.reason, compute.reason


DCGM_SCRAPES = {
    "t4": ("real_public_dcgm_exporter_t4_busy.txt", "t4"),
    "a100-mig": ("real_public_dcgm_exporter_a100_mig_busy.txt", "a100-sxm-40gb"),
}


def _dcgm_run(which: str) -> Run:
    """One real dcgm-exporter scrape as an imported run of the named catalog GPU."""
    name, gpu = DCGM_SCRAPES[which]
    text = (DATA / name).read_text()
    return Run(kind="imported", config={"gpu": gpu}, telemetry=gpu_samples(text, 0.0))


@pytest.mark.parametrize("which", list(DCGM_SCRAPES))
def test_one_dcgm_scrape_has_no_reasons_and_one_clock_sample(which: str) -> None:
    """dcgm-exporter's default counters carry no clock-event (throttle) reasons field, nor a power
    limit, and one scrape is one SM-clock sample (T4 660 MHz, A100 1215 MHz), short of the 10 the
    clock-drop check needs: only the power-cap check (power and clock of the same sample against
    the catalog TDP and boost clock) can judge throttling here."""
    text = (DATA / DCGM_SCRAPES[which][0]).read_text()
    assert "REASONS" not in text  # neither _CLOCK_THROTTLE_REASONS nor _CLOCK_EVENT_REASONS
    assert "POWER_LIMIT" not in text and "POWER_MGMT_LIMIT" not in text
    run = _dcgm_run(which)
    assert [s.throttle_reasons for s in run.telemetry] == [None]
    assert [s.power_limit_w for s in run.telemetry] == [None]
    assert len([s for s in run.telemetry if s.sm_clock_hz is not None]) == 1


@pytest.mark.parametrize("which", list(DCGM_SCRAPES))
def test_one_dcgm_scrape_of_an_unknown_gpu_cannot_judge_throttling(which: str) -> None:
    """The same scrape with no catalog GPU named: no boost clock and no TDP to hold the clock and
    the power against, so the rule says it could not judge and names every gap, instead of
    "clear"."""
    name, _ = DCGM_SCRAPES[which]
    run = Run(kind="imported", config={}, telemetry=gpu_samples((DATA / name).read_text(), 0.0))
    verdict = _verdict(run, "throttling")
    assert verdict.status == "skipped", verdict.reason
    assert "no throttle reasons" in verdict.reason
    assert "only 1 busy SM-clock sample (10 needed" in verdict.reason
    assert "power cap not judged: the run config names no catalog GPU" in verdict.reason


def test_busy_t4_scrape_is_power_capped() -> None:
    """The T4 scrape as the catalog's t4 (70 W TDP, 1590 MHz boost): DCGM_FI_DEV_POWER_USAGE
    68.244 W = 97.5 % of 70 W (>= 90 %: at the limit; the scrape records no limit, so the TDP
    stands for it) with DCGM_FI_DEV_SM_CLOCK 660 MHz = 41.5 % of boost (< 85 %): GPU Boost is
    held far under its clock by the power limit. Throttling fires as power-capped from this one
    sample, with neither a reasons field nor a clock series."""
    name = DCGM_SCRAPES["t4"][0]
    power = _dcgm_value(name, "DCGM_FI_DEV_POWER_USAGE")
    clock_mhz = _dcgm_value(name, "DCGM_FI_DEV_SM_CLOCK")
    assert (power, clock_mhz) == (68.244, 660.0)
    verdict = _verdict(_dcgm_run("t4"), "throttling")
    assert verdict.status == "fired", verdict.reason
    finding = verdict.finding
    assert finding is not None and finding.severity == "warning"
    assert finding.summary == (
        "Power-capped: SM clock 660 MHz = 42% of the 1590 MHz boost clock at 68.2 W = 97% of "
        "the 70 W power limit (catalog TDP of t4)"
    )
    ev = finding.evidence
    assert ev["power_capped"] is True
    assert ev["sm_clock_hz_at_power_limit"] == clock_mhz * 1e6
    assert ev["boost_clock_hz"] == 1590e6
    assert ev["sm_clock_of_boost_at_power_limit"] == pytest.approx(round(660 / 1590, 3))  # 0.415
    assert ev["power_w_at_power_limit"] == pytest.approx(power)
    assert ev["power_limit_w"] == 70.0
    assert ev["power_limit_source"] == "catalog TDP of t4"
    assert ev["power_of_limit_busy"] == pytest.approx(round(68.244 / 70, 3))  # 0.975
    assert ev["at_power_limit_share"] == 1.0
    assert ev["throttled_sample_share"] is None and ev["sm_clock_drop_fraction"] is None
    assert "nvidia-smi -pl" in finding.action and "proportional to the clock" in finding.action
    assert "about 42% of what the boost clock gives" in finding.action


def test_busy_a100_scrape_at_its_tdp_keeps_86_percent_of_boost_not_capped() -> None:
    """The A100 scrape: DCGM_FI_DEV_POWER_USAGE 409.692 W = 102 % of the 400 W TDP (at the limit)
    but DCGM_FI_DEV_SM_CLOCK 1215 MHz = 86.2 % of the 1410 MHz boost, just above the 85 % mark:
    the check is made (clear, not skipped) and does not fire."""
    name = DCGM_SCRAPES["a100-mig"][0]
    clock_mhz = _dcgm_value(name, "DCGM_FI_DEV_SM_CLOCK")
    assert clock_mhz == 1215.0
    assert clock_mhz / 1410 >= CAPPED_CLOCK_OF_BOOST
    verdict = _verdict(_dcgm_run("a100-mig"), "throttling")
    assert verdict.status == "clear", verdict.reason
    assert verdict.reason == (
        "no throttle reasons, clock drop not judged; at >= 90% of the 400 W power limit (catalog "
        "TDP of a100-sxm-40gb) 100% of the busy time with SM clock 1215 MHz = 86% of the 1410 MHz "
        "boost clock"
    )


def test_busy_t4_scrape_is_power_capped_not_compute_bound() -> None:
    """The T4 scrape diagnosed as a run of the GPU its `modelName` label names ("Tesla T4", an
    alias of the catalog's t4: 70 W TDP, 1590 MHz boost). DCGM_FI_DEV_GPU_UTIL 91 >= 80 % and
    DCGM_FI_DEV_POWER_USAGE 68.244 W = 97.5 % of 70 W >= 80 % would make it compute-bound, but
    the board is power-capped (660 MHz of 1590 MHz at its limit): compute-bound stays clear and
    points at throttling, which is the one finding. Memory-bound stays clear although
    DCGM_FI_DEV_MEM_COPY_UTIL 73 is >= 50 %: 97.5 % of TDP is above its 75 % power ceiling. One
    GPU: communication-bound is clear. Idle waste is skipped (one power sample: no energy join),
    and the rules that need server metrics, host samples or requests skip.

    What the rules do not read agrees: the profiling counters of the same scrape show
    DCGM_FI_PROF_PIPE_TENSOR_ACTIVE 0.005822 and DCGM_FI_PROF_GR_ENGINE_ACTIVE 0.156205, so the
    tensor cores are not what limits this board; "the tensor cores are the limit" (compute-bound's
    finding before the power-cap check) was wrong for it."""
    text = (DATA / DCGM_SCRAPES["t4"][0]).read_text()
    (model,) = {m.labels["modelName"] for m in parse_exposition(text).metrics}
    assert get_gpu(model) is get_gpu("t4") and get_gpu("t4").tdp_w == 70.0
    assert _dcgm_value(DCGM_SCRAPES["t4"][0], "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE") == 0.005822
    run = Run(kind="imported", config={"gpu": model}, telemetry=gpu_samples(text, 0.0))
    result = diagnose(run)
    statuses = {v.rule: v.status for v in result.verdicts}
    assert statuses == {
        "memory-bandwidth-bound": "clear",
        "compute-bound": "clear",
        "kv-capacity-bound": "skipped",
        "cpu-bound": "skipped",
        "communication-bound": "clear",
        "bursty-arrivals": "skipped",
        "throttling": "fired",
        "idle-waste": "skipped",
        "slow-loading": "skipped",
    }
    (finding,) = result.findings
    assert finding.kind == "throttling" and finding.summary.startswith("Power-capped: ")
    assert all("tensor cores are the limit" not in f.summary for f in result.findings)
    compute = next(v for v in result.verdicts if v.rule == "compute-bound")
    assert compute.reason == (
        "util 91%, power 97% of TDP, but power-capped: SM clock 660 MHz = 42% of the 1590 MHz "
        "boost clock at 97% of the 70 W power limit (catalog TDP of t4); the power limit, not "
        "the tensor cores, sets the speed (see throttling)"
    )
    memory = next(v for v in result.verdicts if v.rule == "memory-bandwidth-bound")
    assert memory.reason == "util 91%, power 97% of TDP, memory 73%"


def test_a100_scrape_without_gpu_util_skips_boundness() -> None:
    """The dcgm-exporter scrape of the A100 (409.692 W) has DCGM_FI_PROF_GR_ENGINE_ACTIVE but no
    DCGM_FI_DEV_GPU_UTIL: compute- and memory-bound are skipped, not decided."""
    text = (DATA / "real_public_dcgm_exporter_a100_mig_busy.txt").read_text()
    run = Run(kind="imported", config={"gpu": "a100-sxm-40gb"}, telemetry=gpu_samples(text, 0.0))
    for rule in ("compute-bound", "memory-bandwidth-bound"):
        assert _verdict(run, rule).status == "skipped"


def test_sglang_queue_without_a_full_kv_cache_is_not_kv_bound() -> None:
    """The overloaded SGLang server has 2826 requests queued, but sglang:token_usage is 0.28,
    far under the 0.9 KV_FULL mark: the queue is real, the KV cache is not what holds it."""
    text = (DATA / "real_public_sglang_metrics_llama31_8b_overload.txt").read_text()
    run = Run(kind="imported", server=[server_sample(text, t_s=0.0)])
    verdict = _verdict(run, "kv-capacity-bound")
    assert verdict.status == "clear", verdict.reason
    assert "KV peak 28%" in verdict.reason


def test_idle_vllm_is_not_kv_bound() -> None:
    """The idle vLLM V1 server: vllm:kv_cache_usage_perc 0.0, nothing waiting, no preemption."""
    text = (DATA / "real_public_vllm_v1_metrics_qwen25_05b_idle.txt").read_text()
    run = Run(kind="imported", server=[server_sample(text, t_s=0.0)])
    verdict = _verdict(run, "kv-capacity-bound")
    assert verdict.status == "clear", verdict.reason
    assert "KV peak 0%" in verdict.reason
