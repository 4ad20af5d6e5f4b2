"""`tokenprobe diagnose`: rules over a Run (+ the cost model's prediction) -> findings with
evidence and an action (requirement D1; seed 000's troubleshooting tree, seed 003 §6).

    from tokenprobe.diagnose import diagnose
    result = diagnose(read_run("runs/x"), predict=True)
    for finding in result.findings: print(finding.kind, finding.evidence, finding.action)

signals.py   the run's time series, weighted by time, marked busy while requests are in flight
costview.py  the cost model's share of compute / memory / communication for the run's steps
rules.py     `RULES`, the list of rules and their criteria (adding a rule: one function + one entry)
context.py   what a rule receives, the thresholds
rules_gpu.py / rules_load.py   the rules about the GPU / about load and host
predict.py   measured vs predicted TTFT, TPOT, J/token
replay.py    the run's own arrivals and lengths through the simulator, measured vs simulated
"""

from __future__ import annotations

from typing import Any

from tokenprobe.diagnose.costview import CostView, cost_view
from tokenprobe.diagnose.findings import Diagnosis, Finding, Verdict
from tokenprobe.diagnose.predict import compare, mismatch_finding
from tokenprobe.diagnose.replay import REPLAY_FACTOR, replay_comparison, replay_finding
from tokenprobe.diagnose.rules import RULES, Context
from tokenprobe.diagnose.signals import Signals, signals_of
from tokenprobe.energy_join import EnergyReport, join_energy
from tokenprobe.errors import TokenprobeError
from tokenprobe.records import Run


def _energy(run: Run, notes: list[str]) -> EnergyReport | None:
    if not run.telemetry and not run.timeline:
        return None
    try:
        return join_energy(run)
    except TokenprobeError as exc:
        notes.append(f"no energy join: {exc}")
        return None


def _mismatch_verdict(comparison: dict[str, Any]) -> Verdict:
    name = "prediction-mismatch"
    if not comparison["rows"]:
        return Verdict(name, "skipped", "; ".join(comparison["notes"]))
    finding = mismatch_finding(comparison)
    if finding is None:
        return Verdict(name, "clear", "every measured figure within 2x of its prediction")
    return Verdict.fired(finding)


def _replay_verdict(replayed: dict[str, Any]) -> Verdict:
    name = "replay-mismatch"
    if not replayed["rows"]:
        return Verdict(name, "skipped", "; ".join(replayed["notes"]))
    finding = replay_finding(replayed)
    if finding is None:
        return Verdict(name, "clear", f"TTFT, TPOT, ITL, throughput within {REPLAY_FACTOR:g}x")
    return Verdict.fired(finding)


def diagnose(
    run: Run, predict: bool = False, *, replay_run: bool = False, engine: str | None = None
) -> Diagnosis:
    """Every rule of `RULES` over `run`; with `predict`, measured vs predicted too: the cost
    model's estimate at the run's mean load (predict.py) and, with `replay_run` (a simulation
    of the whole run: `diagnose --predict` and a report ask for it), the run replayed
    through the simulator on engine preset `engine` (default: the run config's; replay.py)."""
    sig = signals_of(run)
    notes = list(sig.notes)
    energy = _energy(run, notes)
    cost = cost_view(run, sig.window_s, notes)
    ctx = Context(run, sig, cost, energy)
    result = Diagnosis(verdicts=[rule(ctx) for rule in RULES.values()], notes=notes)
    if sig.gpu_source == "none":
        result.notes.append("no GPU samples in the run (no NVML / imported GPU log)")
    result.notes.extend(str(n) for n in run.telemetry_notes.get("notes", []))
    if predict:
        result.comparison = compare(run, sig.window_s, energy)
        result.verdicts.append(_mismatch_verdict(result.comparison))
    if predict and replay_run:
        result.replay = replay_comparison(run, energy, engine)
        result.verdicts.append(_replay_verdict(result.replay))
    return result


__all__ = [
    "RULES",
    "CostView",
    "Diagnosis",
    "Finding",
    "Signals",
    "Verdict",
    "diagnose",
    "signals_of",
]
