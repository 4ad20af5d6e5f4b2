"""Progress of the long commands: the library reports (done, total) through a callback and never
prints; the CLI draws a bar with an ETA on stderr only when stderr is a terminal."""

from __future__ import annotations

import io
import json

from rich.console import Console
from typer.testing import CliRunner

from tokenprobe.calibrate import calibrate, load_rows
from tokenprobe.cli import app
from tokenprobe.cli.render import progress
from tokenprobe.plan import PlanRequest, candidates, fixed_lengths, plan

from .test_output_width import PLAN, calibration_lines


def _recorder() -> tuple[list[tuple[int, int]], object]:
    calls: list[tuple[int, int]] = []
    return calls, lambda done, total: calls.append((done, total))


def _check_monotone_to_total(calls: list[tuple[int, int]]) -> None:
    assert calls, "the callback was never called"
    dones = [d for d, _ in calls]
    totals = {t for _, t in calls}
    assert len(totals) == 1, f"the total changed: {sorted(totals)}"
    assert dones == sorted(dones), dones
    assert dones[0] > 0 and dones[-1] == totals.pop()


def test_plan_reports_each_candidate(capsys) -> None:
    in_len, out_len = fixed_lengths(256, 32)
    cands = candidates(["h100-sxm", "a100-sxm-80gb", "l40s"], ["bf16"], [1], [256])
    req = PlanRequest("llama-3.1-8b", 1.0, in_len, out_len, None, 0.1, cands, num_requests=30)
    calls, report = _recorder()
    plan(req, workers=1, progress=report)  # type: ignore[arg-type]
    _check_monotone_to_total(calls)
    assert calls[-1][1] == len(cands)
    assert capsys.readouterr() == ("", "")  # the library prints nothing


def test_calibrate_reports_the_fit_then_the_error_passes(capsys) -> None:
    rows = load_rows(calibration_lines()).rows
    calls, report = _recorder()
    calibrate(rows, progress=report)  # type: ignore[arg-type]
    _check_monotone_to_total(calls)
    assert len(calls) > 4  # fit iterations, then the four error passes
    assert capsys.readouterr() == ("", "")


def test_the_bar_draws_on_a_terminal_and_not_elsewhere() -> None:
    tty = io.StringIO()
    with progress("fitting", out=Console(file=tty, force_terminal=True, width=80)) as report:
        assert report is not None
        report(1, 2)
        report(2, 2)
    assert "fitting" in tty.getvalue() and "ETA" in tty.getvalue()
    piped = io.StringIO()
    with progress("fitting", out=Console(file=piped, width=80)) as report:
        assert report is None
    with progress("x", enabled=False, out=Console(file=tty, force_terminal=True)) as report:
        assert report is None  # --json
    assert piped.getvalue() == ""


def test_plan_not_on_a_terminal_prints_only_its_result() -> None:
    result = CliRunner().invoke(app, PLAN, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert result.stdout.splitlines()[0].startswith("Deployments for")
    as_json = CliRunner().invoke(app, [*PLAN, "--json"], env={"COLUMNS": "200"})
    assert as_json.stderr == "" and json.loads(as_json.stdout)["feasible"]
