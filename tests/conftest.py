"""Suite-wide fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tokenprobe import hardware

# Debian's Chromium, driven by playwright without a browser download (report and web tests).
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip("no /usr/bin/chromium: run scripts/install-browser.sh (CI does)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture(autouse=True)
def _forget_user_hardware() -> Iterator[None]:
    """GPUs loaded from user TOML files are process-global; a test that loads one must not
    change what later tests see in `gpu_names()`."""
    gpus, keys = dict(hardware._USER_GPUS), dict(hardware._USER_KEYS)
    yield
    hardware._USER_GPUS.clear()
    hardware._USER_GPUS.update(gpus)
    hardware._USER_KEYS.clear()
    hardware._USER_KEYS.update(keys)
