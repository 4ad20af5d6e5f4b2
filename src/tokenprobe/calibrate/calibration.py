"""Calibrate: split rows by run or source, fit on one part, report error before/after on both.

Hold-out is by source table or by run (one measured configuration series), never by row: rows of
one run share their deployment and most of their error, so a row-level split would grade the fit
on rows it has in effect seen. `--holdout PATTERN` holds back every row whose source or run key
matches (fnmatch, or equality); with no pattern every third run (in sorted order) is held back,
so a calibration always shows an out-of-sample figure when there is more than one run.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tokenprobe.calibrate.fit import (
    DEFAULT_PARAMETERS,
    FitResult,
    GroupError,
    Params,
    ProgressFn,
    fit_staged,
    subsample,
    summarize,
)
from tokenprobe.calibrate.observations import Row, observe
from tokenprobe.calibrate.profile import FitError, Profile
from tokenprobe.errors import ConfigError

DEFAULT_FIT_ROWS_PER_SOURCE = 120
DEFAULT_FIT_ROWS_PER_SOURCE_SIMULATED = 24  # fit.subsample's default
ERROR_PASSES = 4  # fitted and held-out rows, each before and after the fit


LABEL_PATTERN = "label:"  # a hold-out pattern naming rows of a run by their label


def _matches(row: Row, pattern: str) -> bool:
    """A source or run (name or glob), or with `label:` a glob on the row's label: a series
    inside one run (e.g. dstack's output-length sweep within its closed-loop runs)."""
    if pattern.startswith(LABEL_PATTERN):
        return fnmatch.fnmatchcase(row.label, pattern.removeprefix(LABEL_PATTERN))
    return any(key == pattern or fnmatch.fnmatchcase(key, pattern) for key in (row.source, row.run))


def split(rows: Sequence[Row], holdout: Sequence[str] = ()) -> tuple[list[Row], list[Row]]:
    """(fitted, held_out) by source/run patterns; default: every third run held back."""
    if holdout:
        held = [r for r in rows if any(_matches(r, p) for p in holdout)]
    else:
        runs = sorted({r.run for r in rows})
        held_runs = {run for i, run in enumerate(runs) if i % 3 == 2}
        held = [r for r in rows if r.run in held_runs]
    held_ids = {id(r) for r in held}
    return [r for r in rows if id(r) not in held_ids], held


def engines(rows: Sequence[Row]) -> list[str]:
    return sorted({r.engine for r in rows})


def select_engine(rows: Sequence[Row], engine: str | None) -> tuple[str, list[Row]]:
    """The rows of one engine: `engine`, or the only one present."""
    found = engines(rows)
    if engine is None:
        if len(found) != 1:
            raise ConfigError(
                "engine", None, f"the inputs hold several engines, pick one of: {', '.join(found)}"
            )
        engine = found[0]
    chosen = [r for r in rows if r.engine == engine]
    if not chosen:
        raise ConfigError("engine", engine, f"no usable rows; engines present: {', '.join(found)}")
    return engine, chosen


@dataclass
class Calibration:
    engine: str
    fit: FitResult
    fitted_before: list[GroupError]
    fitted_after: list[GroupError]
    held_before: list[GroupError]
    held_after: list[GroupError]
    fitted_rows: int
    held_rows: int

    def errors(self) -> list[FitError]:
        return [
            *fit_errors("fitted", self.fitted_before, self.fitted_after),
            *fit_errors("held_out", self.held_before, self.held_after),
        ]

    def profile(self, name: str | None = None, version: str = "", notes: str = "") -> Profile:
        sources = sorted({e.source for e in self.errors() if e.set == "fitted"})
        return Profile(
            name=name or self.engine,
            version=version,
            fitted_on=tuple(sources),
            notes=notes,
            efficiency=self.fit.params.efficiency,
            power=self.fit.params.power,
            parameters=tuple(self.fit.fitted),
            errors=tuple(self.errors()),
        )

    def to_dict(self) -> dict[str, Any]:
        f = self.fit
        return {
            "engine": self.engine,
            "fitted_rows": self.fitted_rows,
            "held_out_rows": self.held_rows,
            "parameters": {k: {"start": f.start.get(k), "fitted": v} for k, v in f.values.items()},
            "not_identifiable": f.not_identifiable,
            "objective": {"start": f.objective_start, "end": f.objective_end},
            "iterations": f.iterations,
            "evaluations": f.evaluations,
            "method": f.method,
            "errors": [e.__dict__ for e in self.errors()],
        }


def calibrate(
    rows: Sequence[Row],
    *,
    holdout: Sequence[str] = (),
    parameters: Sequence[str] = DEFAULT_PARAMETERS,
    start: Params | None = None,
    engine: str | None = None,
    fit_rows_per_source: int = DEFAULT_FIT_ROWS_PER_SOURCE,
    fit_rows_per_source_simulated: int = DEFAULT_FIT_ROWS_PER_SOURCE_SIMULATED,
    progress: ProgressFn | None = None,
    method: str = "auto",
) -> Calibration:
    """Fit one engine's parameters on the non-held-out rows; errors on both sets, before/after.
    The fit sees at most `fit_rows_per_source` rows of each source
    (`fit_rows_per_source_simulated` where each prediction is a simulation; `fit.subsample`);
    the errors are reported on every row. `method`: the minimiser (`fit.method_for`; "auto"
    picks the compass search where a row is simulated).
    `progress(done, total)`: the fit's iterations, then the four error passes."""
    name, chosen = select_engine(rows, engine)
    fitted, held = split(chosen, holdout)
    if not fitted:
        raise ConfigError("holdout", list(holdout), "holds back every row: nothing left to fit")
    start = start or Params()
    fit_total = [0]  # the fit's iteration budget, known at its first report

    def fit_progress(done: int, total: int) -> None:
        fit_total[0] = total
        if progress is not None:
            progress(done, total + ERROR_PASSES)

    fit_rows = subsample(fitted, fit_rows_per_source, fit_rows_per_source_simulated)
    result = fit_staged(fit_rows, parameters, start, fit_progress, method=method)
    p = result.params
    passes = [(fitted, start), (fitted, p), (held, start), (held, p)]
    errors = []
    for i, (rs, q) in enumerate(passes, start=1):
        errors.append(summarize(observe(rs, q.efficiency, q.power)))
        if progress is not None:
            progress(fit_total[0] + i, fit_total[0] + ERROR_PASSES)
    return Calibration(
        engine=name,
        fit=result,
        fitted_before=errors[0],
        fitted_after=errors[1],
        held_before=errors[2],
        held_after=errors[3],
        fitted_rows=len(fitted),
        held_rows=len(held),
    )


def fit_errors(
    set_name: str, before: Sequence[GroupError], after: Sequence[GroupError]
) -> list[FitError]:
    """A profile's error records of one set ("fitted", "held_out"): each (source, metric)'s
    MdAPE before and after, in percent; `before` and `after` summarize the same rows."""
    return [
        FitError(
            set_name, b.source, b.metric, b.rows, round(100 * b.mdape, 2), round(100 * a.mdape, 2)
        )
        for b, a in zip(before, after, strict=True)
    ]


def _pct(fraction: float) -> float:
    return round(100 * fraction, 2)
