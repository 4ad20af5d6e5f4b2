"""The fit's minimiser for objectives the serving simulator computes (`calibrate.fit`).

Why not Levenberg-Marquardt as on analytic rows: a simulated row's prediction is the outcome of
a discrete-event run. Its step times move smoothly with the parameters, but which request joins
which batch, and so a median TTFT or TPOT, changes in jumps whenever a step boundary crosses an
arrival. On the `sglang-2025h1` fit rows (DeepSeek-V3 Poisson runs and DeepSeek-R1 offline
runs, SGLang's prefill-first scheduler) a forward difference of 1e-3 logit on `fp8_moe` gave
the objective a slope of -0.58, against +0.14 at 1e-2 and +0.11 at 0.1 (one Poisson row's log
TTFT: +40.6, then +0.60, then -0.09): at that step the Jacobian is the jumps', the step LM
proposes does not lower the objective, the damping grows until it gives up, and the fit stops a
few iterations in near its start (the 5-iteration stall of that refit, docs/accuracy.md).

Method, for a fit with any simulated row (`fit.method_for`, "robust"):
1. Levenberg-Marquardt (calibrate.lm) with forward differences over `lm.COARSE_DIFF_STEP`
   logit, no damped retry below `STEP_MIN`, and an evaluation budget: it follows the trend
   through valleys (two parameters that trade off, as a prefill rate and a per-request
   overhead do in TTFT) where a coordinate search crawls;
2. then this compass search with a pattern move (Hooke & Jeeves, J. ACM 8(2), 1961; Kolda,
   Lewis & Torczon, SIAM Review 45(3), 2003, section 3) from LM's point, which needs no
   derivative: each coordinate k has its own step Δ_k (from `STEP_START`); a sweep polls
   z + Δ_k e_k, then z − Δ_k e_k, keeping the first point that lowers the cost; a kept step
   doubles Δ_k (at most `STEP_MAX`), a coordinate with neither direction kept halves it; after
   a sweep that moved, the pattern move z + (z − z_before) is tried once; a coordinate stops at
   Δ_k < `STEP_MIN`, the objective's resolution (1/16 logit: 1.6 % of a mid-range parameter's
   range, ~6 % of its value near a bound): a smaller step measures the jumps, not the trend.
Only a point that lowers the cost is ever kept, so the fit never ends above its start.

Deterministic: the polls come in a fixed order, and the simulator runs one seed at every
evaluation (common random numbers: serving-benchmark rows simulate seed 0, run-folder rows their
run's own seed), so one point always has one cost and a plateau is flat, not noisy.
Bounded: each stage has an evaluation budget (`fit` states them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
ResidualFn = Callable[[FloatArray], FloatArray]

STEP_START = 0.25  # logit: after the coarse LM, a parameter in mid-range moves ~6 % of its range
STEP_MAX = 2.0  # logit: the largest step a run of successes grows to
STEP_MIN = 1.0 / 16  # logit: the objective's resolution on simulated rows (module docstring)
Z_LIMIT = 12.0  # |z| beyond this the logistic is flat (the fit's own clip)
SENSITIVITY_FLOOR = 1e-9


@dataclass
class SearchResult:
    z: FloatArray
    cost_start: float
    cost: float
    active: npt.NDArray[np.bool_]  # coordinates some data residual depends on
    sweeps: int  # iterations (LM) or sweeps (compass search)
    evaluations: int


def pattern_search(
    residuals: ResidualFn,
    z0: FloatArray,
    active: npt.NDArray[np.bool_],
    *,
    max_evaluations: int,
    max_sweeps: int,
    step_start: float = STEP_START,
    cost_start: float | None = None,
) -> SearchResult:
    """Minimise ‖residuals(z)‖² from z0 over the `active` coordinates (module docstring);
    `cost_start`: the cost at z0 where the caller has it (one simulation of the rows saved)."""
    evaluations = 0

    def cost_of(z: FloatArray) -> float:
        nonlocal evaluations
        evaluations += 1
        r = residuals(z)
        return float(r @ r)

    z = np.clip(np.asarray(z0, dtype=np.float64).copy(), -Z_LIMIT, Z_LIMIT)
    cost = cost_start = cost_of(z) if cost_start is None else cost_start
    steps = np.where(active, step_start, 0.0)
    sweeps = 0
    while sweeps < max_sweeps and evaluations < max_evaluations and (steps >= STEP_MIN).any():
        sweeps += 1
        z_before = z.copy()
        for k in np.flatnonzero(steps >= STEP_MIN):
            moved = False
            for sign in (1.0, -1.0):
                if evaluations >= max_evaluations:
                    break
                trial = z.copy()
                trial[k] = np.clip(trial[k] + sign * steps[k], -Z_LIMIT, Z_LIMIT)
                if trial[k] == z[k]:  # against the clip: nothing to try this way
                    continue
                c = cost_of(trial)
                if c < cost:
                    z, cost, moved = trial, c, True
                    break
            steps[k] = min(2 * steps[k], STEP_MAX) if moved else steps[k] / 2
        # the pattern move: the sweep's direction once more (kept only if it lowers the cost)
        if not np.array_equal(z, z_before) and evaluations < max_evaluations:
            trial = np.clip(2 * z - z_before, -Z_LIMIT, Z_LIMIT)
            c = cost_of(trial)
            if c < cost:
                z, cost = trial, c
    return SearchResult(z, cost_start, cost, active.copy(), sweeps, evaluations)
