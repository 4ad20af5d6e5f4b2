"""Calibration (requirements M4, M5): fit the cost model's efficiency parameters to measurements.

- `observations`: measured rows and their predicted metrics; field parsers;
- `sources`: validation-schema CSVs (and the profiler's CSV) -> rows, one mapper per source;
- `runs`: rows from run folders (`tokenprobe profile`, simulated/measured serving runs);
- `fit`: a bounded, robust fit of named `Efficiency`/`PowerModel` fields: Levenberg-Marquardt
  (`lm`) on analytic rows, coarse LM then a compass search (`pattern`) where rows are simulated;
- `calibration`: hold-out split by run/source and error before/after on both sets;
- `profile`: the TOML profile format and the shipped engine profiles (`load_profile`);
- `profiler`: the PyTorch GPU profiler behind `tokenprobe profile` (torch optional).
"""

from __future__ import annotations

from tokenprobe.calibrate.calibration import (
    Calibration,
    calibrate,
    engines,
    fit_errors,
    split,
)
from tokenprobe.calibrate.few_runs import (
    CALIBRATION_RUNS,
    few_runs,
    pick,
    profile_of,
    shipped_params,
)
from tokenprobe.calibrate.fit import (
    BOUNDS,
    DEFAULT_PARAMETERS,
    FitResult,
    GroupError,
    Params,
    check_parameters,
    fit,
    summarize,
)
from tokenprobe.calibrate.inferencemax import group_key, group_of
from tokenprobe.calibrate.observations import (
    LoadResult,
    Observation,
    Row,
    engine_name,
    observe,
)
from tokenprobe.calibrate.profile import (
    FitError,
    Profile,
    dumps_profile,
    load_profile,
    parse_profile,
    profile_name_for,
    save_profile,
    select_profile,
    shipped_profiles,
)
from tokenprobe.calibrate.profiler import (
    ProfileSpec,
    gpu_unavailable_reason,
    profile_gpu,
    write_profile_run,
)
from tokenprobe.calibrate.runs import load_inputs, rows_from_run
from tokenprobe.calibrate.sources import load_csv, load_rows

__all__ = [
    "BOUNDS",
    "CALIBRATION_RUNS",
    "DEFAULT_PARAMETERS",
    "Calibration",
    "FitError",
    "FitResult",
    "GroupError",
    "LoadResult",
    "Observation",
    "Params",
    "Profile",
    "ProfileSpec",
    "Row",
    "calibrate",
    "check_parameters",
    "dumps_profile",
    "engine_name",
    "engines",
    "few_runs",
    "fit",
    "fit_errors",
    "gpu_unavailable_reason",
    "group_key",
    "group_of",
    "load_csv",
    "load_inputs",
    "load_profile",
    "load_rows",
    "observe",
    "parse_profile",
    "pick",
    "profile_gpu",
    "profile_name_for",
    "profile_of",
    "rows_from_run",
    "save_profile",
    "select_profile",
    "shipped_params",
    "shipped_profiles",
    "split",
    "summarize",
    "write_profile_run",
]
