"""The CLI's front door: --version, one name per concept with the old names as hidden aliases,
help text on every option, finite numbers only, and errors that are one line at any width."""

from __future__ import annotations

import json
from importlib.metadata import version

import pytest
import typer
from typer.testing import CliRunner

from tokenprobe.cli import app
from tokenprobe.cli.app import ALIASES, rewrite_aliases

runner = CliRunner()
COMMAND = typer.main.get_command(app)


def test_version_prints_the_installed_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"tokenprobe {version('tokenprobe')}"


@pytest.mark.parametrize("name", sorted(COMMAND.commands))  # type: ignore[attr-defined]
def test_every_option_and_argument_has_help(name: str) -> None:
    sub = COMMAND.commands[name]  # type: ignore[attr-defined]
    assert sub.help, name
    missing = [p.name for p in sub.params if not getattr(p, "help", None)]
    assert missing == [], f"{name}: {missing} have no help text"


def test_aliases_point_at_options_that_exist_and_stay_hidden() -> None:
    for command, table in ALIASES.items():
        sub = COMMAND.commands[command]  # type: ignore[attr-defined]
        flags = {opt for p in sub.params for opt in (*p.opts, *p.secondary_opts)}
        for old, new in table.items():
            assert new in flags, (command, new)
            assert old not in flags, (command, old)  # hidden: --help lists one name


def test_rewrite_keeps_values_and_stops_at_double_dash() -> None:
    args = ["--gpus=h100-sxm", "--dtypes", "fp8", "--", "--gpus"]
    assert rewrite_aliases("compare", args) == ["--gpu=h100-sxm", "--weight-dtype", "fp8",
                                                "--", "--gpus"]  # fmt: skip


def test_old_and_new_names_give_the_same_comparison() -> None:
    new = ["compare", "--gpu", "h100-sxm,h200", "--weight-dtype", "bf16,fp8", "--json"]
    old = ["compare", "--gpus", "h100-sxm,h200", "--dtypes", "bf16,fp8", "--json"]
    a, b = runner.invoke(app, new), runner.invoke(app, old)
    assert a.exit_code == b.exit_code == 0, (a.output, b.output)
    assert json.loads(a.stdout) == json.loads(b.stdout)
    assert len(json.loads(a.stdout)["rows"]) == 4


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN"])
def test_non_finite_numbers_are_refused_with_the_flag_named(value: str) -> None:
    result = runner.invoke(
        app, ["estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--pue", value]
    )
    assert result.exit_code == 2
    assert "pue" in result.output and "finite" in result.output and "Traceback" not in result.output


def test_an_error_is_one_line_whatever_the_width(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    long = tmp_path / ("x" * 120) / "config.json"
    result = runner.invoke(app, ["estimate", "--model", str(long), "--gpu", "h100-sxm"])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and str(long) in lines[0], result.output
