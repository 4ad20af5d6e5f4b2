"""Suite-wide fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tokenprobe import hardware


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
