"""Fixtures for the telemetry tests: the fake pynvml installed at the vendor seam."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType

import pytest

from telemetry.fake_nvml import FakeGpu, make_fake_pynvml


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> Callable[..., ModuleType]:
    """Install a fake `pynvml` in sys.modules: what `import pynvml` then finds."""

    def install(gpus: list[FakeGpu] | None = None, init_error: int | None = None) -> ModuleType:
        module = make_fake_pynvml(gpus if gpus is not None else [FakeGpu()], init_error)
        monkeypatch.setitem(sys.modules, "pynvml", module)
        return module

    return install
