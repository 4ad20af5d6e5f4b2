"""Fit the cost model's efficiency and power parameters to measured rows (requirement M5).

What is fitted is physics, a handful of named parameters (`Efficiency` and `PowerModel` fields,
each within bounds), never a per-row correction. The objective, over the rows' observations i:

    minimise  Σ_i w_i · ρ(log(predicted_i / measured_i))  +  λ² · Σ_k (z_k − z_k,start)²

- log ratio: a 20 % overshoot and a 1/1.2 undershoot cost the same, and metrics of any unit mix;
- ρ is the soft-L1 (pseudo-Huber) loss with scale 10 %, so a few rows the model cannot represent
  (an unmodelled kernel, a mislabelled GPU) do not drag the parameters: quadratic below ~10 %,
  linear above (Charbonnier et al. 1994; scipy.optimize.least_squares' `soft_l1`);
- w_i = 1 / (rows of its (source, metric) group): each measured table and metric counts once,
  whatever its row count; energy per token is a product of fitted quantities (power x time) and
  is reported, not fitted (DERIVED_METRICS);
- z_k is parameter k mapped to the real line by a logit between its bounds; the small ridge λ
  keeps parameters the data barely sees at their start values (no drift into a bound on noise).

The minimiser (`method_for`) is Levenberg-Marquardt (calibrate.lm: forward-difference Jacobian
in z) where every prediction is analytic; where any row is simulated, whose objective is
piecewise smooth with jumps that a fine difference mistakes for slopes, LM with differences at
the objective's resolution and then a compass search (calibrate.pattern; one seed for every
evaluation). Either takes a point only if it lowers the objective, so
the fitted error can never end above where it started (the data term starts with a zero ridge
term). Parameters to which no observation is sensitive are left at their start value and
reported as not identifiable.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from tokenprobe.calibrate.lm import levenberg_marquardt, robust_search
from tokenprobe.calibrate.observations import Observation, Row, observe
from tokenprobe.cost import DEFAULT_EFFICIENCY, DEFAULT_POWER, Efficiency, PowerModel
from tokenprobe.errors import ConfigError
from tokenprobe.units import MICRO, MILLI

FloatArray = npt.NDArray[np.float64]

POWER_PREFIX = "power."
BOUNDS: dict[str, tuple[float, float]] = {
    "compute_prefill": (0.3, 1.0),
    "compute_decode": (0.25, 1.0),
    "memory": (0.3, 0.98),
    "attention_memory": (0.2, 1.0),
    "moe_memory": (0.2, 1.0),
    "quantized_moe": (0.2, 1.0),
    "fp8_moe": (0.2, 1.0),
    "moe_compute": (0.1, 1.0),
    "mla_attention": (0.05, 1.0),
    # the absorbed-form MLA prefill kernel's rate (SGLang 0.4's Triton extend over the 576-wide
    # latent): a few % of the dense rate is where sglang-2025h1's DP-attention rows put it
    "mla_latent_prefill": (0.01, 1.0),
    "routing_skew": (0.0, 2.0),
    "link": (0.2, 1.0),
    # RCCL's fixed cost per TP all-reduce beyond the link's latency (sglang-rocm): rccl-tests
    # read ~25 us on small messages; 500 us would add 61 ms to a 61-layer model's step
    "allreduce_extra_latency_s": (0.0, 500 * MICRO),
    "kernel_overhead_s": (0.0, 40 * MICRO),
    "step_overhead_s": (0.0, 30 * MILLI),
    "seq_overhead_s": (0.0, 200 * MICRO),
    "mixed_step_overhead_s": (0.0, 100 * MILLI),
    "request_overhead_s": (0.0, 200 * MILLI),
    "power.chip_flop_per_byte": (1.0, 1000.0),
    "power.busy_power_fraction": (0.0, 0.9),
}
"""Fittable parameters and their bounds (physically plausible ranges, not data-driven)."""

# (done, total) of a long loop, for a progress display; the library never prints
ProgressFn = Callable[[int, int], None]

# fitted only when named (an era profile's kernels, `mla_attention` on MLA rows): every other
# row is blind to it, and a default fit would pay one more evaluation per iteration for nothing
NAMED_ONLY = frozenset(
    {"mla_attention", "mixed_step_overhead_s", "mla_latent_prefill", "allreduce_extra_latency_s"}
)
DEFAULT_PARAMETERS = tuple(k for k in BOUNDS if k not in NAMED_ONLY)
DERIVED_METRICS = frozenset({"energy_per_output_token"})
POWER_METRICS = frozenset({"power_per_gpu", "power_total"})
"""Metrics that are a product of fitted ones (J/token = power x step time / tokens): reported,
not fitted, so time parameters are not bent to absorb an energy error (and vice versa)."""
LOSS_SCALE = 0.10  # soft-L1 turns linear beyond ~10 % log error
RIDGE = 0.03  # λ: pull towards the start value, in logit units


@dataclass(frozen=True)
class Params:
    """A point in parameter space: the two objects the cost model takes."""

    efficiency: Efficiency = DEFAULT_EFFICIENCY
    power: PowerModel = DEFAULT_POWER

    def get(self, name: str) -> float:
        if name.startswith(POWER_PREFIX):
            return float(getattr(self.power, name.removeprefix(POWER_PREFIX)))
        return float(getattr(self.efficiency, name))

    def with_values(self, values: Mapping[str, float]) -> Params:
        eff = {k: v for k, v in values.items() if not k.startswith(POWER_PREFIX)}
        pw = {k.removeprefix(POWER_PREFIX): v for k, v in values.items() if k not in eff}
        return Params(self.efficiency.with_overrides(eff), replace(self.power, **pw))

    def as_dict(self) -> dict[str, float]:
        out = {f.name: float(getattr(self.efficiency, f.name)) for f in fields(self.efficiency)}
        out.update({POWER_PREFIX + f.name: getattr(self.power, f.name) for f in fields(self.power)})
        return out


def check_parameters(names: Iterable[str]) -> list[str]:
    out = []
    for name in names:
        if name not in BOUNDS:
            raise ConfigError("parameter", name, f"one of {', '.join(BOUNDS)}")
        out.append(name)
    return out


# ------------------------------------------------------------------------------ error summary


@dataclass(frozen=True)
class GroupError:
    source: str
    metric: str
    rows: int
    mdape: float  # median |error|, a fraction
    bias: float  # median signed error

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "metric": self.metric,
            "rows": self.rows,
            "mdape_pct": round(100 * self.mdape, 2),
            "median_signed_pct": round(100 * self.bias, 2),
        }


def summarize(observations: Iterable[Observation]) -> list[GroupError]:
    """MdAPE and median signed error per (source, metric), sorted."""
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for o in observations:
        groups[(o.source, o.metric)].append(o.error)
    return [
        GroupError(s, m, len(e), statistics.median(abs(x) for x in e), statistics.median(e))
        for (s, m), e in sorted(groups.items())
    ]


def summarize_by_metric(observations: Iterable[Observation]) -> dict[str, float]:
    """MdAPE per metric over all sources."""
    groups: dict[str, list[float]] = defaultdict(list)
    for o in observations:
        groups[o.metric].append(abs(o.error))
    return {m: statistics.median(e) for m, e in sorted(groups.items())}


# ------------------------------------------------------------------------------ the objective


# Parameters whose start on their lower bound is a stationary point of the model: the fit
# starts them this far into their range instead. routing_skew: a log-normal spread of expert
# popularity changes the expected distinct experts only in second order around σ = 0 (the mean
# pick rate is fixed), so from 0 the gradient is zero and the fit never moves it; start σ = 0.5.
INTERIOR_START_U = {"routing_skew": 0.25}
START_FLOOR_U = 0.02  # the least a start sits above its lower bound (_to_z)


def _to_z(value: float, lo: float, hi: float, floor_u: float = START_FLOOR_U) -> float:
    # a start on a bound begins inside it: at the bound itself the logistic is flat and the fit
    # could not move the parameter. 2 % above a lower bound (request_overhead_s 0 -> 4 ms), 10 %
    # below an upper one (quantized_moe 1.0 -> 0.92): the slope there, u(1 - u), must be large
    # enough for a parameter the data pull far down (FP8 MoE kernels run at ~0.4)
    u = min(max((value - lo) / (hi - lo), floor_u), 0.9)
    return math.log(u / (1 - u))


def _from_z(z: float, lo: float, hi: float) -> float:
    return lo + (hi - lo) / (1.0 + math.exp(-min(max(z, -30.0), 30.0)))


def _soft_l1(r: FloatArray) -> FloatArray:
    c = LOSS_SCALE
    return np.asarray(2 * c * c * (np.sqrt(1 + (r / c) ** 2) - 1), dtype=np.float64)


class Objective:
    """Residual vector of the fit for a logit vector z (data terms, then ridge terms)."""

    def __init__(
        self,
        rows: Sequence[Row],
        names: Sequence[str],
        start: Params,
        ridge: float = RIDGE,
        metrics: Collection[str] | None = None,
    ) -> None:
        self.rows, self.names, self.ridge = list(rows), list(names), ridge
        self.bounds = [BOUNDS[n] for n in names]
        self.z0 = np.array(
            [
                _to_z(start.get(n), *b, INTERIOR_START_U.get(n, START_FLOOR_U))
                for n, b in zip(names, self.bounds, strict=True)
            ]
        )
        # the point z0 stands for: a start on a bound moves inside it (_to_z), and every
        # evaluation must see that moved value, or the objective jumps between z0 and z0 + dz
        self.start = start.with_values(
            {n: _from_z(float(v), *b) for n, v, b in zip(names, self.z0, self.bounds, strict=True)}
        )
        obs = observe(self.rows, start.efficiency, start.power)
        counts: dict[tuple[str, str], int] = defaultdict(int)
        for o in obs:
            counts[(o.source, o.metric)] += 1
        self.weights = np.array(
            [
                0.0
                if o.metric in DERIVED_METRICS or (metrics is not None and o.metric not in metrics)
                else 1.0 / counts[(o.source, o.metric)]
                for o in obs
            ]
        )
        if not self.weights.any():
            raise ConfigError("metrics", sorted({o.metric for o in obs}), "no fittable metric")
        self.evaluations = 0

    def params(self, z: FloatArray) -> Params:
        values = {
            n: _from_z(float(v), *b)
            for n, v, v0, b in zip(self.names, z, self.z0, self.bounds, strict=True)
            if v != v0  # untouched parameters keep their start value exactly
        }
        return self.start.with_values(values)

    def log_errors(self, z: FloatArray) -> FloatArray:
        p = self.params(z)
        self.evaluations += 1
        obs = observe(self.rows, p.efficiency, p.power)
        return np.array([math.log(o.predicted / o.measured) for o in obs])

    def residuals(self, z: FloatArray) -> FloatArray:
        r = self.log_errors(z)
        data = np.sign(r) * np.sqrt(self.weights * _soft_l1(r))
        return np.concatenate([data, self.ridge * (z - self.z0)])


# ------------------------------------------------------------------------------ the minimiser


@dataclass
class FitResult:
    params: Params
    start: Params
    fitted: list[str]  # parameters moved by the fit
    not_identifiable: list[str]  # asked for, but no observation depends on them
    objective_start: float
    objective_end: float
    iterations: int
    evaluations: int
    rows: int
    values: dict[str, float] = field(default_factory=dict)
    method: str = "lm"  # the minimiser that ran (method_for)


METHODS = ("auto", "lm", "robust")
POLISH_EVALUATIONS_PER_PARAMETER = 12  # the compass polish's budget: 12 x n + 1 evaluations


def method_for(rows: Sequence[Row], method: str = "auto") -> str:
    """The minimiser a fit of these rows runs: "lm" where every prediction is analytic (smooth:
    finite differences are exact to their step), "robust" where any is a simulation (coarse
    LM, then a compass search: calibrate.pattern says why), or the one `method` names."""
    if method not in METHODS:
        raise ConfigError("method", method, f"one of {', '.join(METHODS)}")
    if method != "auto":
        return method
    return "robust" if any(r.simulated for r in rows) else "lm"


def fit(
    rows: Sequence[Row],
    parameters: Sequence[str] = DEFAULT_PARAMETERS,
    start: Params | None = None,
    *,
    max_iterations: int = 25,
    tolerance: float = 1e-7,
    ridge: float = RIDGE,
    metrics: Collection[str] | None = None,
    progress: ProgressFn | None = None,
    method: str = "auto",
) -> FitResult:
    """Fit `parameters` (names from BOUNDS) to the rows' measurements, starting from `start`;
    `metrics` limits which measured metrics the objective counts (default: all but derived).
    `method` (`method_for`): Levenberg-Marquardt on analytic rows, coarse LM then a compass
    search where a row is simulated. Budget, n parameters: LM at most `max_iterations`
    iterations (each one Jacobian of n evaluations and its damped trials); "robust" at most
    `max_iterations` x (n + 1) + 1 evaluations for its LM (LM's iterations when each takes its
    first trial) and `POLISH_EVALUATIONS_PER_PARAMETER` x n + 1 for its polish, i.e. for the
    default 25 iterations and 4 parameters at most 126 + 49 simulations of the rows.
    `progress(done, max_iterations)` is called after each iteration (sweep) and once at the end
    with done = max_iterations (a fit that converges early finishes its budget at once)."""
    names = check_parameters(parameters)
    if not rows:
        raise ConfigError("rows", 0, "at least one measured row to fit")
    chosen = method_for(rows, method)
    start = start or Params()
    obj = Objective(rows, names, start, ridge, metrics)
    if chosen == "robust":
        found = robust_search(
            obj.residuals,
            obj.z0,
            obj.weights.size,
            max_iterations=max_iterations,
            tolerance=tolerance,
            polish_evaluations=POLISH_EVALUATIONS_PER_PARAMETER * len(names) + 1,
            progress=progress,
        )
    else:
        found = levenberg_marquardt(
            obj.residuals,
            obj.z0,
            obj.weights.size,
            max_iterations=max_iterations,
            tolerance=tolerance,
            progress=progress,
        )
    z, cost0, cost, active = found.z, found.cost_start, found.cost, found.active
    if progress is not None:
        progress(max_iterations, max_iterations)
    # a parameter nothing depends on keeps its given start (not the moved-inside one)
    params = obj.params(z).with_values(
        {n: start.get(n) for n, a in zip(names, active, strict=True) if not a}
    )
    return FitResult(
        params=params,
        start=start,
        fitted=[n for n, a in zip(names, active, strict=True) if a],
        not_identifiable=[n for n, a in zip(names, active, strict=True) if not a],
        objective_start=cost0,
        objective_end=cost,
        iterations=found.sweeps,
        evaluations=obj.evaluations,
        rows=len(rows),
        values={n: params.get(n) for n in names},
        method=chosen,
    )


def fit_staged(
    rows: Sequence[Row],
    parameters: Sequence[str] = DEFAULT_PARAMETERS,
    start: Params | None = None,
    progress: ProgressFn | None = None,
    **kw: Any,
) -> FitResult:
    """Time first, then power: the efficiency parameters on the time metrics (TTFT, ITL, step
    times, throughput), then the power-model coefficients on the power metrics with the times
    fixed. Power (cost.energy: idle + busy share + energies of the FLOPs and bytes over the step
    time) depends on the step times, so a joint fit could bend an efficiency to absorb a power
    error; staged, each measurement informs the physics it measures. Each stage never ends
    above its own start. `progress(done, total)` counts iterations over the stages that run
    (see `fit`)."""
    names = check_parameters(parameters)
    start = start or Params()
    present = {m for r in rows for m in r.measured}
    time_metrics = present - POWER_METRICS - DERIVED_METRICS
    stages = [
        ([n for n in names if not n.startswith(POWER_PREFIX)], time_metrics),
        ([n for n in names if n.startswith(POWER_PREFIX)], present & POWER_METRICS),
    ]
    stages = [(n, m) for n, m in stages if n and m]
    params, results = start, []
    for k, (stage_names, stage_metrics) in enumerate(stages):
        report = None if progress is None else _stage_progress(progress, k, len(stages))
        results.append(fit(rows, stage_names, params, metrics=stage_metrics, progress=report, **kw))
        params = results[-1].params
    if not results:
        raise ConfigError("metrics", sorted(present), "nothing the given parameters can fit")
    fitted = [n for r in results for n in r.fitted]
    return FitResult(
        params=params,
        start=start,
        fitted=fitted,
        not_identifiable=[n for n in names if n not in fitted],
        objective_start=sum(r.objective_start for r in results),
        objective_end=sum(r.objective_end for r in results),
        iterations=sum(r.iterations for r in results),
        evaluations=sum(r.evaluations for r in results),
        rows=len(rows),
        values={n: params.get(n) for n in names},
        method="+".join(dict.fromkeys(r.method for r in results)),  # each stage's, in order
    )


def _stage_progress(progress: ProgressFn, stage: int, stages: int) -> ProgressFn:
    """Stage `stage` of `stages`'s (done, total) as a share of the whole fit's."""
    return lambda done, total: progress(stage * total + done, stages * total)


def subsample(rows: Sequence[Row], per_source: int, per_source_simulated: int = 24) -> list[Row]:
    """At most `per_source` rows of each source (`per_source_simulated` where each prediction is
    a simulation), evenly spread over its runs (deterministic): fitting on a spread subset is
    fast and loses little; errors are then reported on all rows."""
    by_source: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        by_source[row.source].append(row)
    out: list[Row] = []
    for group in by_source.values():
        group = sorted(group, key=lambda r: (r.run, r.label))
        cap = per_source_simulated if group[0].simulated else per_source
        if len(group) <= cap:
            out.extend(group)
            continue
        step = len(group) / cap
        out.extend(group[int(i * step)] for i in range(cap))
    return out
