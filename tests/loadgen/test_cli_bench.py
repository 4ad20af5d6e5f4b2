"""`tokenprobe bench` as a user runs it: exit codes, one-line errors, --json, the run folder, and
a kill of the client mid-run (a subprocess) that keeps every finished request."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import tokenprobe.cli.bench  # noqa: F401  (registers the commands on app)
from loadgen.conftest import LlamaServer
from tokenprobe.cli.app import app
from tokenprobe.records import read_run

runner = CliRunner()
CLI = "import tokenprobe.cli.bench; from tokenprobe.cli.app import app; app()"


def _bench(*args: str) -> list[str]:
    base = ["bench", "--model", "smollm2", "--input-tokens", "16", "--output-tokens", "4"]
    return [*base, *args]


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (
            ["--url", "http://127.0.0.1:9/v1", "--concurrency", "1", "--num-requests", "1"],
            1,
            "cannot reach",
        ),
        (
            ["--url", "http://x/v1", "--concurrency", "1", "--rate", "2", "--num-requests", "1"],
            2,
            "exactly one of concurrency, rate",
        ),
        (["--url", "http://x/v1", "--concurrency", "1"], 2, "exactly one of num_requests"),
        (["--url", "ftp://x", "--concurrency", "1", "--num-requests", "1"], 2, "url="),
        (["--url", "http://x/v1", "--sweep", "batch=1,2", "--num-requests", "1"], 2, "sweep="),
    ],
)
def test_bad_input_is_one_clear_line(tmp_path: Path, args: list[str], code: int, needle: str):
    result = runner.invoke(app, [*_bench(*args), "--out", str(tmp_path / "run")])
    assert result.exit_code == code, result.output
    assert needle in result.output.replace("\n", " ")
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("", "has no requests"),
        ('{"prompt": "hi"}\nthis is not json\n', "not valid JSON"),
        ('{"prompt": "hi", "max_tokens": 3}\n', "unknown keys ['max_tokens']"),
    ],
)
def test_bad_dataset_is_one_clear_line(tmp_path: Path, content: str, needle: str):
    data = tmp_path / "data.jsonl"
    data.write_text(content)
    args = ["bench", "--url", "http://127.0.0.1:9/v1", "--model", "m", "--concurrency", "1"]
    args += ["--num-requests", "1", "--dataset", str(data), "--out", str(tmp_path / "run")]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert needle in " ".join(result.output.split())
    assert "Traceback" not in result.output
    if "JSON" in needle:
        assert "data.jsonl:2" in result.output.replace("\n", "")  # names the bad line


def test_json_summary_and_run_folder_never_hold_the_api_key(
    llama: LlamaServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("TOKENPROBE_TEST_KEY", "sekrit-key-123")
    out = tmp_path / "run"
    args = _bench("--url", llama.url, "--concurrency", "2", "--num-requests", "3", "--json")
    args += ["--api-key-env", "TOKENPROBE_TEST_KEY", "--out", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    for key in ("completed", "errors", "ttft_s", "itl_s", "tpot_s", "e2e_s", "requests_per_s"):
        assert key in summary
    assert summary["completed"] == 3 and summary["output_tokens_per_s"] > 0
    assert set(summary["ttft_s"]) == {"mean", "p50", "p90", "p99"}
    assert summary["client"]["send_lag_s"]["p99"] >= 0
    config = json.loads((out / "config.json").read_text())["config"]
    assert config["api_key_env"] == "TOKENPROBE_TEST_KEY"
    for path in out.iterdir():
        assert "sekrit-key-123" not in path.read_text()


def test_dataset_and_sweep_write_one_folder_per_point(llama: LlamaServer, tmp_path: Path):
    data = tmp_path / "data.jsonl"
    lines = [
        {"prompt": f"Tell me about {w}.", "output_tokens": n} for w, n in [("cats", 3), ("dogs", 5)]
    ]
    data.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    args = ["bench", "--url", llama.url, "--model", "m", "--dataset", str(data), "--json"]
    args += ["--sweep", "concurrency=1,2", "--num-requests", "2", "--out", str(tmp_path / "sw")]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    points = json.loads(result.stdout)["points"]
    assert [p["completed"] for p in points] == [2, 2]
    for point in ("concurrency_1", "concurrency_2"):
        run = read_run(tmp_path / "sw" / point)
        assert sorted(r.output_tokens for r in run.records) == [3, 5]


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_for_records(path: Path, count: int, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().count("\n") >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"{path}: fewer than {count} records after {timeout_s} s")


def _eval_lines(log: str, tokens: int) -> int:
    """Requests llama.cpp finished generating `tokens` tokens for (its print_timing lines)."""
    return len(re.findall(rf"\|\s+eval time =.*/\s+{tokens} tokens", log))


def test_kill_of_the_client_keeps_every_finished_request(llama: LlamaServer, tmp_path: Path):
    out = tmp_path / "killed"
    log_start = len(llama.log())
    args = _bench("--url", llama.url, "--concurrency", "2", "--num-requests", "300", "--json")
    args[args.index("--output-tokens") + 1] = "5"
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, *args, "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _wait_for_records(out / "records.jsonl", 5)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    time.sleep(0.5)  # let the server log the requests that were in flight
    run = read_run(out)
    assert run.warnings == [f"{out / 'summary.json'}: missing (run not closed)"]
    finished = [r for r in run.records if r.ok]
    assert len(finished) == len(run.records) >= 5
    server_done = _eval_lines(llama.log()[log_start:], 5)
    # every request the server finished is on disk, except at most the 2 that were in flight
    assert len(finished) <= server_done <= len(finished) + 2, (len(finished), server_done)
    print(f"kill: {len(finished)} records on disk, {server_done} finished by the server")


def test_ctrl_c_stops_the_run_and_still_writes_the_summary(llama: LlamaServer, tmp_path: Path):
    out = tmp_path / "interrupted"
    args = _bench("--url", llama.url, "--concurrency", "2", "--num-requests", "300")
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, *args, "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        # a shell that starts a job in the background (as CI harnesses and `cmd &` do) hands it
        # SIGINT ignored, and Python then installs no KeyboardInterrupt handler: restore it so
        # the signal below is the user's Ctrl-C whatever started this test
        preexec_fn=_default_sigint,
    )
    _wait_for_records(out / "records.jsonl", 3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err
    run = read_run(out)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["completed"] + summary["failed"] == len(run.records) >= 3


def test_self_test_measures_the_client_against_the_trivial_stream_server():
    result = runner.invoke(app, ["bench", "--self-test", "--duration-s", "0.4", "--json"])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)
    assert figures["errors"] == {}
    assert figures["requests_per_s"] > 0 and figures["streamed_tokens_per_s"] > 0
    # the open-loop phase keeps its schedule: about 500 requests/s were really sent
    assert figures["lag_run_requests_per_s"] == pytest.approx(500, rel=0.3)
    assert 0 <= figures["send_lag_p50_s"] <= figures["send_lag_p99_s"]
