"""Record the REAL llama.cpp run folders under tests/data/runs/ (not a test; run it by hand).

    .venv/bin/python tests/diagnose/record_llamacpp_runs.py

Starts the test suite's llama.cpp server (xllamacpp + SmolLM2-135M, 1 thread, CPU only; see
tests/loadgen/conftest.py) and runs `tokenprobe bench --telemetry` twice:
- llamacpp_cpu_pid: closed loop, 2 in flight, with --server-pid (the server process's CPU share);
- llamacpp_cpu_nopid: open loop at 2 req/s (Poisson), host CPU only, no process figure.
There is no NVIDIA GPU on the machine that recorded them: the runs hold host and /metrics samples
and a note that NVML is missing.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from typer.testing import CliRunner  # noqa: E402

import tokenprobe.cli  # noqa: E402,F401
from loadgen.conftest import start_llama_server  # noqa: E402
from tokenprobe.cli.app import app  # noqa: E402

DATA = HERE.parent / "data" / "runs"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = start_llama_server(Path(tmp) / "server.log", parallel=2)
        try:
            common = ["bench", "--url", server.url, "--model", "smollm2", "--input-tokens", "32"]
            common += ["--output-tokens", "48", "--telemetry", "--telemetry-period-s", "0.1"]
            common += ["--seed", "7", "--json"]
            runs = {
                "llamacpp_cpu_pid": [
                    *("--concurrency", "2", "--num-requests", "12"),
                    *("--server-pid", str(server.proc.pid)),
                ],
                "llamacpp_cpu_nopid": ["--rate", "2", "--num-requests", "12"],
            }
            for name, extra in runs.items():
                out = DATA / name
                shutil.rmtree(out, ignore_errors=True)
                result = CliRunner().invoke(app, [*common, *extra, "--out", str(out)])
                print(name, result.exit_code, result.output[-300:] if result.exit_code else "")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
