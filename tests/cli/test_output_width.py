"""Every tabular command at 60, 80 and 200 columns, piped and on a (simulated) terminal: the
names it lists appear whole, no line is wider than the width, no ANSI codes when piped, and
`--json` is one JSON document.

The expected names come from the library (catalog lists) or from the command's own `--json`
output, never from hard-coded strings. The width is set explicitly on the consoles and in
COLUMNS, so nothing depends on the terminal running the tests or the temp path's length (run
folders are passed as short relative paths from a chdir into tmp_path).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len
from rich.console import Console
from typer.testing import CliRunner

from tokenprobe.calibrate.profiler import CSV_COLUMNS, write_csv
from tokenprobe.cli import app
from tokenprobe.cli.app import console, err_console
from tokenprobe.hardware import gpu_names
from tokenprobe.model import catalog_names, get_model

DATA = Path(__file__).resolve().parents[1] / "data"
GUIDELLM = Path(__file__).resolve().parents[1] / "loadgen" / "data" / "guidellm_0.8.1_report.json"
WIDTHS = (60, 80, 200)
ANSI = "\x1b["


@pytest.fixture
def at_width(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], None]:
    """Set the consoles' width (and COLUMNS, which rich reads when the console is made). The
    private `_width` is what the public setter writes; patching it (not the property) restores
    the console to following the terminal afterwards, not to a fixed width."""

    def set_width(width: int) -> None:
        monkeypatch.setenv("COLUMNS", str(width))
        for c in (console, err_console):
            monkeypatch.setattr(c, "_width", width)

    return set_width


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the consoles say they write to a terminal (the boxed layout); rich chose no colour
    system at start-up (stdout was not a terminal), so there are still no ANSI codes to strip."""
    monkeypatch.setattr(Console, "is_terminal", property(lambda self: True))


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def invoke(args: list[str], width: int) -> str:
    result = CliRunner().invoke(app, args, env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    return result.stdout


def whole(name: str, text: str) -> bool:
    """`name` appears as one piece, not as part of a longer name (mistral-7b vs -v0.3)."""
    return re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w.-])", text) is not None


def check_layout(text: str, width: int) -> None:
    assert text.strip(), "no output"
    assert ANSI not in text
    too_wide = [line for line in text.splitlines() if cell_len(line) > width]
    assert not too_wide, f"{len(too_wide)} lines wider than {width}: {too_wide[:3]}"


def check_names(names: list[str], text: str) -> None:
    missing = [n for n in names if not whole(n, text)]
    assert not missing, f"not whole in the output: {missing}"


# ---------------------------------------------------------------- the commands and their names


def calibration_lines() -> list[dict[str, str]]:
    """Profiler-schema rows: three models' prefill and decode steps (three runs, so the default
    hold-out keeps one back)."""
    lines = []
    for model, scale in (("llama-3.1-8b", 1.0), ("qwen3-14b", 1.8), ("llama-2-7b", 0.9)):
        for kind, batch, tokens, ms in (
            ("prefill_step", 1, 1024, 60.0),
            ("prefill_step", 1, 4096, 250.0),
            ("decode_step", 1, 1024, 9.0),
            ("decode_step", 64, 2048, 14.0),
        ):
            row = dict.fromkeys(CSV_COLUMNS, "")
            row.update(
                source_id="tokenprobe_profile", engine="pytorch-eager", model=model,
                model_hf_id=model, gpu="h100-sxm", weight_precision="bf16",
                kv_cache_precision="bf16", tp="1", workload_type=kind, batch_size=str(batch),
                isl=str(tokens), notes=model, power_W_total="400",
            )  # fmt: skip
            row["ttft_ms_mean" if kind == "prefill_step" else "itl_ms_mean"] = f"{ms * scale}"
            lines.append(row)
    return lines


PLAN = [
    "plan", "--model", "llama-3.1-8b", "--rate", "1", "--slo-tpot-p90", "0.1",
    "--gpus", "h100-sxm,a100-sxm-80gb", "--tp", "1", "--dtypes", "bf16",
    "--num-requests", "30", "--workers", "1",
    "--price-per-gpu-hour", "h100-sxm=2.5,a100-sxm-80gb=1.6",
]  # fmt: skip
ESTIMATE = ["estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--ops"]
SIMULATE = [
    "simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--rate", "2",
    "--num-requests", "30", "--input-tokens", "256", "--output-tokens", "32",
]  # fmt: skip
COMPARE = ["compare", "--model", "llama-3.1-70b", "--gpus", "h100-sxm,a100-sxm-80gb,l40s,h200",
           "--weight-dtypes", "bf16,fp8"]  # fmt: skip


def _models(doc: dict[str, Any]) -> list[str]:
    return [m["name"] for m in doc["models"]]


def _gpus(doc: dict[str, Any]) -> list[str]:
    return [g["name"] for g in doc["gpus"]]


def _plan(doc: dict[str, Any]) -> list[str]:
    return [o["candidate"] for o in doc["feasible"]] + [doc["model"]]


def _whatif(doc: dict[str, Any]) -> list[str]:
    return [r["resource"] for r in doc["ranking"]]


def _diagnose(doc: dict[str, Any]) -> list[str]:
    return [r["rule"] for r in doc["rules"]] + [f["kind"] for f in doc["findings"]]


def _estimate(doc: dict[str, Any]) -> list[str]:
    ops = [o["name"] for stage in ("prefill", "decode") for o in doc[stage]["ops"]]
    return [doc["model"], doc["gpu"], doc["weight_dtype"], *ops]


def _simulate(doc: dict[str, Any]) -> list[str]:
    return [doc["config"]["model"], doc["config"]["gpu"]]


def _compare(doc: dict[str, Any]) -> list[str]:
    return [r["label"] for r in doc["rows"]]


def _calibrate(doc: dict[str, Any]) -> list[str]:
    return [*doc["parameters"], *{e["metric"] for e in doc["errors"]}, doc["engine"]]


def _bench_import(doc: dict[str, Any]) -> list[str]:
    return ["TTFT", "TPOT", "send lag"]


def _setup(name: str, workdir: Path) -> list[str]:
    """The command line of `name`, with any input it needs made under workdir."""
    if name == "diagnose":
        shutil.copytree(DATA / "runs" / "llamacpp_cpu_pid", workdir / "run")
        return ["diagnose", "run", "--predict"]
    if name == "calibrate":
        write_csv(calibration_lines(), workdir / "p.csv")
        return ["calibrate", "p.csv"]
    if name == "bench-import":
        shutil.copy(GUIDELLM, workdir / "g.json")
        return ["bench-import", "g.json", "--from", "guidellm", "--out", "imported", "--overwrite"]
    return {
        "models": ["models"],
        "gpus": ["gpus"],
        "plan": PLAN,
        "whatif": ["whatif", "--model", "llama-3.1-8b", "--gpu", "h100-sxm"],
        "estimate": ESTIMATE,
        "simulate": SIMULATE,
        "compare": COMPARE,
    }[name]


NAMES: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "models": _models,
    "gpus": _gpus,
    "plan": _plan,
    "whatif": _whatif,
    "diagnose": _diagnose,
    "estimate": _estimate,
    "simulate": _simulate,
    "compare": _compare,
    "calibrate": _calibrate,
    "bench-import": _bench_import,
}


def _json(args: list[str]) -> dict[str, Any]:
    result = CliRunner().invoke(app, [*args, "--json"], env={"COLUMNS": "60"})
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)  # one document, nothing else on stdout
    assert isinstance(doc, dict)
    return doc


@pytest.mark.parametrize("command", list(NAMES))
def test_json_is_one_document_and_the_text_keeps_every_name_whole(
    command: str, workdir: Path, at_width: Callable[[int], None]
) -> None:
    args = _setup(command, workdir)
    doc = _json(args)
    if command == "bench-import":
        doc = doc["runs"][0]
    names = NAMES[command](doc)
    assert names, "the command listed nothing to check"
    for width in WIDTHS:
        at_width(width)
        text = invoke(args, width)
        check_layout(text, width)
        check_names(names, text)


@pytest.mark.parametrize("command", list(NAMES))
@pytest.mark.parametrize("width", [60, 80])
def test_on_a_terminal_too(
    command: str, width: int, workdir: Path, at_width: Callable[[int], None], terminal: None
) -> None:
    args = _setup(command, workdir)
    names = NAMES[command](_json(args))
    at_width(width)
    text = invoke(args, width)
    check_layout(text, width)
    check_names(names, text)


def test_catalog_names_and_hf_ids_from_the_library(at_width: Callable[[int], None]) -> None:
    for width in WIDTHS:
        at_width(width)
        models = invoke(["models"], width)
        check_names(list(catalog_names()), models)
        flat = " ".join(models.split())
        hf_ids = [get_model(n).hf_id for n in catalog_names()]
        # the HF id column is the first to go on a narrow terminal, and the output says so
        assert all(whole(h, models) for h in hf_ids) or "left out at this width: HF id" in flat
        check_names(list(gpu_names()), invoke(["gpus"], width))
    assert all(whole(get_model(n).hf_id, models) for n in catalog_names())  # at 200


@pytest.mark.parametrize("width", [60, 80])
def test_piped_through_a_real_pipe(width: int) -> None:
    """The installed entry point with stdout a pipe: the process decides it is not a terminal."""
    env = {**os.environ, "COLUMNS": str(width), "PYTHONPATH": os.pathsep.join(sys.path)}
    for command, names in (("gpus", gpu_names()), ("models", catalog_names())):
        out = subprocess.run(
            [sys.executable, "-c", "from tokenprobe.cli import main; main()", command],
            capture_output=True, text=True, env=env, check=True, timeout=120,
        ).stdout  # fmt: skip
        check_layout(out, width)
        check_names(list(names), out)
        assert not set(out) & set("┏┃━│┗"), "box drawing in piped output"


def test_json_help_on_every_tabular_command() -> None:
    for command in NAMES:
        result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"})
        line = next(x for x in result.output.splitlines() if "--json" in x)
        text = re.sub(r"<\w+>|[\s│|]", "", line.split("--json", 1)[1])  # metavar, box, space
        assert text, f"{command}: --json has no help"
