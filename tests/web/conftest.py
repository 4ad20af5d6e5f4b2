"""A real `tokenprobe.web` server (uvicorn in a child process, free loopback port) over a runs
folder holding one small simulated run (one for all of tests/web), and a headless Chromium
(one per test module)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tokenprobe.sim import simulate

RUN_NAME = "sim-small"


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]
    runs_dir: Path
    secret: Path

    def alive(self) -> bool:
        """The process runs and still answers a plain request."""
        if self.process.poll() is not None:
            return False
        return httpx.get(f"{self.url}/api/catalog", timeout=10).status_code == 200


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_up(url: str, process: subprocess.Popen[bytes], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        try:
            if httpx.get(f"{url}/api/catalog", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.2)
    raise RuntimeError("server did not come up")


@pytest.fixture(scope="package")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    base = tmp_path_factory.mktemp("web")
    runs_dir = base / "runs"
    runs_dir.mkdir()
    secret = base / "secret.txt"  # beside the runs folder: must never be served
    secret.write_text("top secret\n")
    simulate(
        "llama-3.1-8b",
        "h100-sxm",
        input_tokens=256,
        output_tokens=64,
        rate_per_s=10,
        num_requests=200,
        seed=0,
    ).write(runs_dir / RUN_NAME)
    port = _free_port()
    code = (
        "from tokenprobe.web import serve; "
        f"serve(host='127.0.0.1', port={port}, runs_dir={str(runs_dir)!r})"
    )
    process = subprocess.Popen([sys.executable, "-c", code])
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_up(url, process)
        yield Server(url, process, runs_dir, secret)
    finally:
        process.terminate()
        process.wait(timeout=10)
