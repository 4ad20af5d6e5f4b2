"""Every rule of the diagnosis on a run that shows it and on one where it must not fire.

Where each run comes from is in tests/diagnose/runs.py: SIM = simulated by tokenprobe.simulate,
REAL = recorded from the real llama.cpp server (CPU only), LOG = a handwritten nvidia-smi CSV
(imported), COMPOSED = a real run's requests and host samples with a handwritten GPU log, PUBLIC =
a real GPU recording from a public repository (tests/data/telemetry/real_public_*).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from diagnose.runs import (
    gpu_log,
    public_dcgm_run,
    public_smi_moment,
    real_run,
    sim_run,
    with_gpu_log,
)
from tokenprobe.diagnose import RULES, diagnose
from tokenprobe.records import Run

Case = tuple[str, Callable[[], Run], str, bool]

CASES: list[Case] = [
    # memory-bandwidth-bound: busy GPU, power well under TDP, memory busy
    ("SIM decode-heavy, 8 in flight", lambda: sim_run("decode"), "memory-bandwidth-bound", True),
    (
        "LOG H100 98% util, 52% TDP, mem 76%",
        lambda: gpu_log("membound"),
        "memory-bandwidth-bound",
        True,
    ),
    (
        "SIM 4k-token prompts, 64 in flight",
        lambda: sim_run("prefill"),
        "memory-bandwidth-bound",
        False,
    ),
    ("LOG H100 at its power cap", lambda: gpu_log("throttled"), "memory-bandwidth-bound", False),
    # compute-bound
    ("SIM 4k-token prompts, 64 in flight", lambda: sim_run("prefill"), "compute-bound", True),
    ("LOG H100 at its power cap", lambda: gpu_log("throttled"), "compute-bound", True),
    (
        "PUBLIC H100 gpu-burn, 90% of 700 W at its 1980 MHz max",
        lambda: public_smi_moment("h100_gpuburn", 1),
        "compute-bound",
        True,
    ),
    ("SIM decode-heavy, 8 in flight", lambda: sim_run("decode"), "compute-bound", False),
    ("LOG H100 98% util, 52% TDP", lambda: gpu_log("membound"), "compute-bound", False),
    (
        "PUBLIC T4 91% util, power-capped at 660 of 1590 MHz",
        lambda: public_dcgm_run("t4_busy", "t4"),
        "compute-bound",
        False,
    ),
    # KV-capacity-bound
    (
        "SIM KV for ~30k tokens, 64 x 1.5k in flight",
        lambda: sim_run("tiny_kv"),
        "kv-capacity-bound",
        True,
    ),
    ("SIM Poisson 4 req/s, KV 1% used", lambda: sim_run("poisson"), "kv-capacity-bound", False),
    # CPU-bound
    ("REAL llama.cpp on 1 CPU thread, no GPU", lambda: real_run("pid"), "cpu-bound", True),
    (
        "COMPOSED real llama.cpp + idle GPU log",
        lambda: with_gpu_log(real_run("pid"), "starved"),
        "cpu-bound",
        True,
    ),
    (
        "COMPOSED real llama.cpp + busy GPU log",
        lambda: with_gpu_log(real_run("pid"), "membound"),
        "cpu-bound",
        False,
    ),
    # communication-bound
    (
        "SIM llama-3.1-70b over 8 PCIe L40S",
        lambda: sim_run("tp8_pcie"),
        "communication-bound",
        True,
    ),
    ("SIM one H100", lambda: sim_run("decode"), "communication-bound", False),
    # bursty arrivals
    ("SIM gamma arrivals, shape 0.05", lambda: sim_run("bursty"), "bursty-arrivals", True),
    ("SIM Poisson arrivals, same rate", lambda: sim_run("poisson"), "bursty-arrivals", False),
    ("SIM overloaded Poisson, long drain", lambda: sim_run("overloaded"), "bursty-arrivals", False),
    ("SIM closed loop", lambda: sim_run("decode"), "bursty-arrivals", False),
    # throttling
    (
        "LOG clocks 1980 -> 1590 MHz, power-cap/thermal bits",
        lambda: gpu_log("throttled"),
        "throttling",
        True,
    ),
    (
        "PUBLIC T4 one scrape, 97% of 70 W at 660 of 1590 MHz",
        lambda: public_dcgm_run("t4_busy", "t4"),
        "throttling",
        True,
    ),
    ("LOG steady 1980 MHz, no reasons", lambda: gpu_log("membound"), "throttling", False),
    (
        "PUBLIC H100 gpu-burn, 90% of 700 W at its 1980 MHz max",
        lambda: public_smi_moment("h100_gpuburn", 1),
        "throttling",
        False,
    ),
    (
        "PUBLIC H100 idle, 345 MHz at 10% of 700 W",
        lambda: public_smi_moment("h100_gpuburn", 0),
        "throttling",
        False,
    ),
    ("LOG GPU at 14% util, 118 W", lambda: gpu_log("starved"), "throttling", False),
    # idle waste
    ("SIM 0.2 req/s of short requests", lambda: sim_run("sparse"), "idle-waste", True),
    ("LOG GPU at 14% util, 118 W", lambda: gpu_log("starved"), "idle-waste", True),
    ("SIM saturated closed loop", lambda: sim_run("decode"), "idle-waste", False),
    ("LOG busy GPU", lambda: gpu_log("membound"), "idle-waste", False),
    # loading vs generation (the fire case on a real server is in tests/test_bench_telemetry.py)
    ("REAL llama.cpp, uniform TTFT", lambda: real_run("pid"), "slow-loading", False),
    ("SIM Poisson", lambda: sim_run("poisson"), "slow-loading", False),
]


@pytest.mark.parametrize(
    ("what", "make", "rule", "fires"), CASES, ids=[f"{c[2]}:{c[0]}" for c in CASES]
)
def test_rule_fires_exactly_where_the_run_shows_it(
    what: str, make: Callable[[], Run], rule: str, fires: bool
) -> None:
    result = diagnose(make())
    verdict = next(v for v in result.verdicts if v.rule == rule)
    assert (verdict.status == "fired") is fires, f"{what}: {verdict.status}: {verdict.reason}"
    if fires:
        assert verdict.finding is not None and verdict.finding.kind == rule
        assert verdict.finding.action and verdict.finding.evidence
    else:
        assert verdict.status in ("clear", "skipped")


def test_every_rule_has_a_firing_and_a_clear_case() -> None:
    fired = {rule for _, _, rule, fires in CASES if fires}
    clear = {rule for _, _, rule, fires in CASES if not fires}
    assert clear == set(RULES)
    assert fired == set(RULES) - {"slow-loading"}  # fires on the real server: test_bench_telemetry


def test_memory_bound_evidence_holds_the_numbers_it_decided_on() -> None:
    """LOG membound: NVML's memory utilization is the evidence, with util and power/TDP."""
    finding = next(
        f for f in diagnose(gpu_log("membound")).findings if f.kind == "memory-bandwidth-bound"
    )
    ev = finding.evidence
    assert ev["memory_figure_source"] == "memory utilization (telemetry)"
    assert 0.74 <= float(ev["memory_figure"] or 0) <= 0.80
    assert 0.50 <= float(ev["power_of_tdp_busy"] or 0) <= 0.55  # ~365 W of 700 W
    assert ev["tdp_w"] == 700.0


def test_kv_bound_counts_the_simulators_preemptions() -> None:
    """SIM tiny KV: the preemption count is the simulator's own, and severity is critical."""
    run = sim_run("tiny_kv")
    finding = next(f for f in diagnose(run).findings if f.kind == "kv-capacity-bound")
    expected = sum(int(r.extra["preemptions"]) for r in run.records)
    assert expected > 0 and finding.evidence["preemptions"] == expected
    assert finding.severity == "critical"


def test_bursty_power_follows_the_arrival_waves() -> None:
    """SIM gamma 0.05: the dispersion index is far from Poisson's 1 and power tracks arrivals."""
    bursty = next(f for f in diagnose(sim_run("bursty")).findings if f.kind == "bursty-arrivals")
    assert float(bursty.evidence["arrivals_dispersion_index"] or 0) > 10
    assert float(bursty.evidence["arrivals_power_correlation"] or 0) >= 0.5
    poisson = next(v for v in diagnose(sim_run("poisson")).verdicts if v.rule == "bursty-arrivals")
    assert 0.5 < float(poisson.reason.split()[2]) < 2.0, poisson.reason  # Poisson: ~1


def test_a_run_with_nothing_but_records_skips_rules_instead_of_guessing() -> None:
    """REAL llama.cpp without GPU: GPU rules are skipped (not clear) and NVML's absence is said."""
    result = diagnose(real_run("nopid"))
    status = {v.rule: v.status for v in result.verdicts}
    assert status["memory-bandwidth-bound"] == status["compute-bound"] == "skipped"
    assert status["throttling"] == status["idle-waste"] == "skipped"
    assert any("NVML" in n for n in result.notes)


def test_bursty_arrivals_is_judged_over_the_arrival_span_not_the_drain() -> None:
    """An overloaded Poisson run: counted over the whole run (drain included) the windows after
    the last arrival are empty and the dispersion index looks bursty; over the arrivals it is ~1."""
    from tokenprobe.diagnose.rules_load import ARRIVAL_WINDOWS, BURSTY_DISPERSION

    run = sim_run("overloaded")
    arrivals = np.sort([r.scheduled_s for r in run.records])
    end_s = max(r.finish_s or 0.0 for r in run.records)
    assert end_s > 3 * arrivals[-1]  # the drain is most of the run
    whole = np.histogram(arrivals, bins=np.linspace(0.0, end_s, ARRIVAL_WINDOWS + 1))[0]
    assert whole.var() / whole.mean() > BURSTY_DISPERSION  # what the old window read
    verdict = next(v for v in diagnose(run).verdicts if v.rule == "bursty-arrivals")
    assert verdict.status == "clear", verdict.reason
    assert "dispersion index" in verdict.reason and float(verdict.reason.split()[2]) < 3
