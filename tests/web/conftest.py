"""A real `tokenprobe.web` server (uvicorn in a child process, free loopback port) over a runs
folder holding one small simulated run (one for all of tests/web), and a headless Chromium
(one per test module). `start_server` starts another over any runs folder.

The server's output goes to a log file; after every test that used a server, the log must hold
no Python traceback (an exception that reached uvicorn is a bug even when the answer was a 4xx).
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
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
    log: Path = field(default_factory=Path)

    def alive(self) -> bool:
        """The process runs and still answers a plain request."""
        if self.process.poll() is not None:
            return False
        return httpx.get(f"{self.url}/api/catalog", timeout=10).status_code == 200

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def raw_get(self, target: str) -> tuple[int, str]:
        """GET with the request target sent byte for byte (httpx would resolve dot segments)."""
        host, port = self.url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            conn.request("GET", target)
            response = conn.getresponse()
            return response.status, response.read().decode("utf-8", "replace")
        finally:
            conn.close()


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


def write_small_run(path: Path, num_requests: int = 200) -> None:
    simulate(
        "llama-3.1-8b",
        "h100-sxm",
        input_tokens=256,
        output_tokens=64,
        rate_per_s=10,
        num_requests=num_requests,
        seed=0,
    ).write(path)


_STARTED: list[Server] = []  # servers running now, whose logs every test checks


@contextlib.contextmanager
def start_server(runs_dir: Path, secret: Path) -> Iterator[Server]:
    """`tokenprobe.web.serve` in a child process on a free loopback port, until the block ends."""
    port = _free_port()
    code = (
        "from tokenprobe.web import serve; "
        f"serve(host='127.0.0.1', port={port}, runs_dir={str(runs_dir)!r})"
    )
    log = runs_dir.parent / f"server-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen([sys.executable, "-c", code], stdout=out, stderr=out)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_up(url, process)
        running = Server(url, process, runs_dir, secret, log)
        _STARTED.append(running)
        yield running
    finally:
        process.terminate()
        process.wait(timeout=10)
        _STARTED[:] = [s for s in _STARTED if s.process is not process]


@pytest.fixture(scope="package")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    base = tmp_path_factory.mktemp("web")
    runs_dir = base / "runs"
    runs_dir.mkdir()
    secret = base / "secret.txt"  # beside the runs folder: must never be served
    secret.write_text("top secret\n")
    write_small_run(runs_dir / RUN_NAME)
    with start_server(runs_dir, secret) as running:
        yield running


@pytest.fixture(autouse=True)
def _no_traceback_in_server_logs() -> Iterator[None]:
    """Fail a test during which a server has logged a traceback."""
    seen = {id(s): s.log.stat().st_size for s in _STARTED}
    yield
    for s in _STARTED:
        with s.log.open("rb") as f:
            f.seek(seen.get(id(s), 0))
            new = f.read().decode("utf-8", "replace")
        assert "Traceback" not in new, new[-3000:]
