"""GPU TOML files (hardware.load_hardware_file / get_gpu): valid GpuSpec or ConfigError."""

from __future__ import annotations

import math
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from tokenprobe import hardware
from tokenprobe.cli import app
from tokenprobe.hardware import GpuSpec, get_gpu, load_hardware_file

from .conftest import (
    FUZZ,
    NOT_FILE_KINDS,
    assert_schema_error_naming,
    dumps_toml,
    file_contents,
    mutated_docs,
    not_a_file,
    parse_or_config_error,
)

EXAMPLE = Path(__file__).parents[1] / "data" / "hardware" / "my_gpu.toml"
DOC: dict[str, Any] = tomllib.loads(EXAMPLE.read_text())


@pytest.fixture(autouse=True)
def _forget_user_gpus() -> Iterator[None]:
    """load_hardware_file registers GPUs for the process; leave none behind for other tests."""
    gpus, keys = dict(hardware._USER_GPUS), dict(hardware._USER_KEYS)
    yield
    hardware._USER_GPUS.clear()
    hardware._USER_GPUS.update(gpus)
    hardware._USER_KEYS.clear()
    hardware._USER_KEYS.update(keys)


def _check(gpus: list[GpuSpec] | None) -> None:
    for gpu in gpus or []:
        figures = [gpu.hbm_bytes, gpu.hbm_bytes_per_s, gpu.tdp_w, gpu.idle_w, gpu.link.bytes_per_s]
        figures += [gpu.link.latency_s, gpu.pcie_bytes_per_s, *gpu.peak_flop_per_s.values()]
        assert all(math.isfinite(x) and x > 0 for x in figures), gpu
        assert gpu.idle_w < gpu.tdp_w


def _load(tmp_path: Path, data: bytes) -> list[GpuSpec] | None:
    path = tmp_path / "gpu.toml"
    path.write_bytes(data)
    return parse_or_config_error(load_hardware_file, path)


@FUZZ
@given(data=file_contents(EXAMPLE.read_bytes()))
def test_random_and_mutated_bytes(tmp_path: Path, data: bytes) -> None:
    _check(_load(tmp_path, data))


@FUZZ
@given(doc=mutated_docs(DOC))
def test_hostile_values(tmp_path: Path, doc: dict[str, Any]) -> None:
    gpus = _load(tmp_path, dumps_toml(doc).encode())
    _check(gpus)
    if gpus:  # what loads can be priced: the estimate returns or says why not
        from tokenprobe.cost import estimate

        parse_or_config_error(
            estimate, "llama-3.1-8b", gpus[0], input_tokens=512, output_tokens=128
        )


@FUZZ
@given(value=st.sampled_from([math.nan, math.inf, -1.0, 0, 1e300, "500", True, [500], {"a": 1}]))
def test_each_figure_rejects_hostile_values_naming_it(tmp_path: Path, value: object) -> None:
    for key in ("tdp_w", "idle_w", "hbm_gib", "hbm_gb_per_s", "pcie_lanes"):
        doc = {"test-accel-1": {**DOC["test-accel-1"], key: value}}
        path = tmp_path / "gpu.toml"
        path.write_text(dumps_toml(doc))
        with pytest.raises(hardware.SchemaError) as info:
            load_hardware_file(path)
        assert "gpu.toml" in str(info.value) and key in str(info.value)


def test_idle_at_or_above_tdp_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "gpu.toml"
    path.write_text(dumps_toml({"test-accel-1": {**DOC["test-accel-1"], "idle_w": 500}}))
    with pytest.raises(hardware.SchemaError, match="idle_w"):
        load_hardware_file(path)


@pytest.mark.parametrize("kind", NOT_FILE_KINDS)
def test_paths_that_are_not_files(tmp_path: Path, kind: str) -> None:
    path = not_a_file(tmp_path, kind, "gpu.toml")
    assert_schema_error_naming(lambda: get_gpu(str(path)), path)


@pytest.mark.parametrize("kind", ["fifo", "folder", "binary"])
def test_cli_estimate_with_a_bad_gpu_file_exits_2(tmp_path: Path, kind: str) -> None:
    path = not_a_file(tmp_path, kind, "my.toml")
    result = CliRunner().invoke(app, ["estimate", "--model", "llama-3.1-8b", "--gpu", str(path)])
    assert result.exit_code == 2, result.output
    assert "my.toml" in "".join(result.output.split())
    assert "Traceback" not in result.output
