"""Levenberg-Marquardt (Marquardt 1963) for the fit's smooth objectives (`calibrate.fit`).

For rows whose predictions are analytic (the cost model's step times, static batches): the
objective is smooth in the logit coordinates z, so a forward-difference Jacobian at
`DIFF_STEP` is exact to that step. A step is taken only if it lowers the cost; the damping μ
grows x4 on a refused step and shrinks /3 on a taken one; the search stops after
`max_iterations`, when the relative gain falls below `tolerance`, or when no damping finds a
lower cost. Where a row is simulated the objective jumps at the 1e-3 scale: `fit` then runs
this with differences at the objective's resolution (`COARSE_DIFF_STEP`), an evaluation budget
and no damped retry below `pattern.STEP_MIN`, and polishes with `pattern.pattern_search`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from tokenprobe.calibrate.pattern import (
    SENSITIVITY_FLOOR,
    STEP_MIN,
    Z_LIMIT,
    FloatArray,
    ResidualFn,
    SearchResult,
    pattern_search,
)

DIFF_STEP = 1e-3  # forward-difference step in logit units, analytic rows
# simulated rows: a difference over 0.2 logit (~5 % of a mid-range parameter's range) sees the
# trend, where a median TTFT's jumps (~0.005 in log, calibrate.pattern) shift a slope by ~0.025
COARSE_DIFF_STEP = 0.2


def _jacobian(
    fn: ResidualFn, z: FloatArray, r: FloatArray, active: FloatArray, h: float
) -> FloatArray:
    jac = np.zeros((r.size, z.size))
    for k in np.flatnonzero(active):
        dz = z.copy()
        # a step against the clip goes the other way (a backward difference)
        step = h if z[k] + h <= Z_LIMIT else -h
        dz[k] += step
        jac[:, k] = (fn(dz) - r) / step
    return jac


def _lm_step(jac: FloatArray, r: FloatArray, mu: float, active: FloatArray) -> FloatArray:
    a = jac.T @ jac
    g = jac.T @ r
    damp = mu * (np.diag(a) + 1e-12)
    a = a + np.diag(damp)
    step = np.zeros_like(g)
    idx = np.flatnonzero(active)
    step[idx] = np.linalg.solve(a[np.ix_(idx, idx)], -g[idx])
    return step


def levenberg_marquardt(
    residuals: ResidualFn,
    z0: FloatArray,
    data_rows: int,
    *,
    max_iterations: int,
    tolerance: float,
    diff_step: float = DIFF_STEP,
    max_evaluations: int | None = None,
    min_step: float = 0.0,
    progress: Callable[[int, int], None] | None = None,
) -> SearchResult:
    """Minimise ‖residuals(z)‖² from z0; the first `data_rows` residuals are the data terms,
    whose Jacobian columns tell which coordinates are identifiable (the same result type as
    `pattern_search`; `sweeps` counts iterations). `diff_step`: the finite-difference step;
    `max_evaluations`: the budget (default none: iterations bound it); `min_step`: the
    smallest damped retry (largest coordinate) worth trying, below it the search stops."""
    evaluations = 0

    def fn(z: FloatArray) -> FloatArray:
        nonlocal evaluations
        evaluations += 1
        return residuals(z)

    z = np.asarray(z0, dtype=np.float64).copy()
    r = fn(z)
    cost0 = cost = float(r @ r)
    jac = _jacobian(fn, z, r, np.ones(z.size, dtype=bool), diff_step)
    active = np.abs(jac[:data_rows]).max(axis=0) > SENSITIVITY_FLOOR
    mu, iterations = 1e-2, 0
    budget = max_evaluations if max_evaluations is not None else np.inf
    while iterations < max_iterations and active.any() and evaluations < budget:
        iterations += 1
        improved, trials = False, 0
        while mu < 1e10 and evaluations < budget:
            step = _lm_step(jac, r, mu, active)
            if trials and np.abs(step).max() < min_step:
                # a refused step damped below the resolution: its cost would measure the jumps
                # (an undamped small step is the trend's, near a minimum, and is tried)
                break
            trials += 1
            z_new = np.clip(z + step, -Z_LIMIT, Z_LIMIT)
            r_new = fn(z_new)
            cost_new = float(r_new @ r_new)
            if cost_new < cost:
                improved = True
                break
            mu *= 4.0
        if not improved:
            break
        gain = (cost - cost_new) / max(cost, 1e-300)
        z, r, cost, mu = z_new, r_new, cost_new, max(mu / 3.0, 1e-9)
        if gain < tolerance or evaluations + active.sum() > budget:
            break  # converged, or no budget left for the next Jacobian
        jac = _jacobian(fn, z, r, active, diff_step)
        if progress is not None:
            progress(iterations, max_iterations)
    return SearchResult(z, cost0, cost, active, iterations, evaluations)


def robust_search(
    residuals: ResidualFn,
    z0: FloatArray,
    data_rows: int,
    *,
    max_iterations: int,
    tolerance: float,
    polish_evaluations: int,
    progress: Callable[[int, int], None] | None = None,
) -> SearchResult:
    """For simulated rows (calibrate.pattern): LM with differences over `COARSE_DIFF_STEP`, no
    damped retry below `pattern.STEP_MIN` and at most `max_iterations` x (n + 1) + 1
    evaluations for n coordinates, then the compass polish from its point with
    `polish_evaluations`."""
    coarse = levenberg_marquardt(
        residuals,
        z0,
        data_rows,
        max_iterations=max_iterations,
        tolerance=tolerance,
        diff_step=COARSE_DIFF_STEP,
        max_evaluations=max_iterations * (np.asarray(z0).size + 1) + 1,
        min_step=STEP_MIN,
        progress=progress,
    )
    polish = pattern_search(
        residuals,
        coarse.z,
        coarse.active,
        max_evaluations=polish_evaluations,
        max_sweeps=max_iterations,
        cost_start=coarse.cost,  # one point, one cost: the simulator runs one seed
    )
    return replace(
        polish,
        cost_start=coarse.cost_start,
        sweeps=coarse.sweeps + polish.sweeps,
        evaluations=coarse.evaluations + polish.evaluations,
    )
