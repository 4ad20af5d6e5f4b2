"""`bench --telemetry-file LOG` against the real llama.cpp server: the nvidia-smi log recorded
beside the run is joined to it on its clock at the end (tokenprobe.cli.import_telemetry)."""

from __future__ import annotations

import time
from pathlib import Path

from typer.testing import CliRunner

from loadgen.conftest import LlamaServer
from telemetry.test_join_telemetry import WIDE, _flat, _log
from tokenprobe.cli import app
from tokenprobe.cli.import_telemetry import JOIN_MARGIN_S
from tokenprobe.records import read_run

runner = CliRunner()


def test_bench_joins_the_log_recorded_beside_it(llama: LlamaServer, tmp_path: Path) -> None:
    """The log covers the next two minutes (as `nvidia-smi -l 1` started before bench would
    by the end); bench joins the part beside its requests and leaves the rest out."""
    log = _log(tmp_path / "gpu.csv", time.time() - 10, range(0, 130))
    out = tmp_path / "b"
    args = ["bench", "--url", llama.url, "--model", "smollm2", "--input-tokens", "16"]
    args += ["--output-tokens", "2", "--concurrency", "1", "--num-requests", "2"]
    result = runner.invoke(app, [*args, "--telemetry-file", str(log), "--out", str(out)], env=WIDE)
    assert result.exit_code == 0, result.output
    run = read_run(out)
    assert run.telemetry and run.config["telemetry_file"] == "gpu.csv"
    end = max(r.finish_s for r in run.records if r.finish_s is not None)
    assert all(-JOIN_MARGIN_S - 10 <= s.t_s <= end + JOIN_MARGIN_S for s in run.telemetry)
    assert "samplesofgpu.csvjoined" in _flat(result.output).replace(str(log), "gpu.csv")
