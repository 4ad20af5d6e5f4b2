"""Where the validation scripts find the public measurements, and their progress line.

The validation CSVs (ML.ENERGY, TensorRT-LLM's performance docs, Argonne's LLM-Inference-Bench)
are not in this repository: they live in the project's `shared/validation` folder, which sits
beside a checkout (`../shared/validation` from the repository root) in development and in CI,
but not in every clone. docs/accuracy.md says what each file is and where it comes from.

The folder is found deterministically, never from the current directory: `--data-dir DIR`,
else the environment variable TOKENPROBE_VALIDATION_DIR, else `../shared/validation` relative to
the repository root (this file's grandparent). When none holds the files the scripts need,
`require()` prints one line saying where they were looked for and how to point at them, and the
script exits 2 (bad input, as the CLI does), never with a traceback.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from repo_paths import REPO_ROOT

ENV_VAR = "TOKENPROBE_VALIDATION_DIR"
BESIDE_REPO = REPO_ROOT.parent / "shared" / "validation"
EXIT_MISSING = 2


def candidates(cli_dir: Path | None) -> tuple[str, Path]:
    """(how it was chosen, folder): the first of --data-dir, $TOKENPROBE_VALIDATION_DIR, beside.

    An explicit choice is not second-guessed: a wrong --data-dir is an error, not a fallback.
    """
    if cli_dir is not None:
        return "--data-dir", cli_dir
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return f"${ENV_VAR}", Path(env)
    return "../shared/validation beside the repository", BESIDE_REPO


def require(cli_dir: Path | None, names: Sequence[str], need_all: bool) -> Path:
    """The validation folder holding `names` (all of them, or at least one); else exit 2."""
    how, folder = candidates(cli_dir)
    present = [n for n in names if (folder / n).is_file()]
    if folder.is_dir() and (len(present) == len(names) if need_all else present):
        return folder
    missing = [n for n in names if n not in present]
    what = ", ".join(missing) if need_all or len(names) == 1 else "any of " + ", ".join(names)
    print(
        f"validation data not found: {folder} ({how}) lacks {what}; these public CSVs are not "
        f"shipped in the repository (sources in docs/accuracy.md): copy the project's "
        f"shared/validation folder to {BESIDE_REPO}, or pass --data-dir DIR or set {ENV_VAR}=DIR",
        file=sys.stderr,
    )
    raise SystemExit(EXIT_MISSING)


class Progress:
    """`rows done/total, elapsed, ETA` on stderr, only when stderr is a terminal.

    stdout stays exactly what it was (tables and one JSON line), so pipes and logs are unchanged.
    Redraws at most every `period_s` with a carriage return; the ETA assumes the remaining rows
    cost what the finished ones did on average (the simulated rows make it an estimate).
    """

    def __init__(self, total: int, label: str, period_s: float = 0.5) -> None:
        self.total, self.label, self.period_s = total, label, period_s
        self.done = 0
        self.enabled = sys.stderr.isatty() and total > 0
        self.t0_s = self.last_s = time.perf_counter()

    def step(self, n: int = 1) -> None:
        self.done += n
        now_s = time.perf_counter()
        if not self.enabled or (now_s - self.last_s < self.period_s and self.done < self.total):
            return
        self.last_s = now_s
        elapsed_s = now_s - self.t0_s
        eta_s = elapsed_s / self.done * (self.total - self.done) if self.done else 0.0
        sys.stderr.write(
            f"\r{self.label}: {self.done}/{self.total} rows, {elapsed_s:.0f} s elapsed, "
            f"ETA {eta_s:.0f} s  "
        )
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()


def run_main(main: Callable[[], int | None]) -> None:
    """Exit with `main()`'s code; a reader that stops early (`| head`) ends it quietly, as the
    Python docs advise for SIGPIPE, instead of with a BrokenPipeError traceback."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 1
    raise SystemExit(code or 0)


def mdape_pct(errors: Sequence[float]) -> float | None:
    """Median absolute error in percent, one decimal (every table of these scripts); None for no
    rows."""
    return round(100 * statistics.median(abs(e) for e in errors), 1) if errors else None


def bias_pct(errors: Sequence[float]) -> float | None:
    """Median signed error in percent, one decimal (+: the prediction is high); None for none."""
    return round(100 * statistics.median(errors), 1) if errors else None


def add_metric_stats(
    row: dict[str, Any], errors: Sequence[Mapping[str, float]], metrics: Sequence[str]
) -> None:
    """`row[m_n]`, `row[m_mdape_pct]`, `row[m_median_signed_pct]` for each metric `m` over the
    rows' error maps (a row lacking `m` is left out of it): the replays' group tables."""
    for m in metrics:
        errs = [e[m] for e in errors if m in e]
        row[f"{m}_n"], row[f"{m}_mdape_pct"] = len(errs), mdape_pct(errs)
        row[f"{m}_median_signed_pct"] = bias_pct(errs)


def metric_cells(row: Mapping[str, Any], metrics: Sequence[str]) -> str:
    """The `n MdAPE bias` cells of one group row (add_metric_stats), '-' where it has none."""
    cells = []
    for m in metrics:
        if row[f"{m}_n"]:
            cells.append(f"{row[f'{m}_n']:5d} {row[f'{m}_mdape_pct']:6.1f}% "
                         f"{row[f'{m}_median_signed_pct']:+7.1f}%")  # fmt: skip
        else:
            cells.append(f"{'-':>22}")
    return "  ".join(cells)
