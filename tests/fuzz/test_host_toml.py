"""Host TOML files (hardware.load_host_file / get_host with a path): valid HostSpec or
ConfigError."""

from __future__ import annotations

import dataclasses
import math
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given

from tokenprobe.cost import estimate
from tokenprobe.hardware import HostSpec, get_host, load_host_file

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

CATALOG = resources.files("tokenprobe").joinpath("catalog", "hosts.toml").read_text("utf-8")
DOC: dict[str, Any] = {"my-host": tomllib.loads(CATALOG)["default"]}


def _check(hosts: list[HostSpec] | None) -> None:
    for host in hosts or []:
        figures = [host.dram_bytes, host.dram_bytes_per_s, host.nvme_bytes_per_s]
        assert all(math.isfinite(x) and x > 0 for x in [*figures, host.nic_bytes_per_s])
        assert isinstance(host.cpu_cores, int) and host.cpu_cores >= 1


def _load(tmp_path: Path, data: bytes) -> list[HostSpec] | None:
    path = tmp_path / "host.toml"
    path.write_bytes(data)
    return parse_or_config_error(load_host_file, path)


@FUZZ
@given(data=file_contents(dumps_toml(DOC).encode()))
def test_random_and_mutated_bytes(tmp_path: Path, data: bytes) -> None:
    _check(_load(tmp_path, data))


@FUZZ
@given(doc=mutated_docs(DOC))
def test_hostile_values(tmp_path: Path, doc: dict[str, Any]) -> None:
    hosts = _load(tmp_path, dumps_toml(doc).encode())
    _check(hosts)
    if hosts and len(hosts) == 1:  # the host prices the stages outside the GPU
        path = tmp_path / "host.toml"
        est = parse_or_config_error(
            estimate, "llama-3.1-8b", "h100-sxm", input_tokens=256, output_tokens=64, host=str(path)
        )
        assert est is None or math.isfinite(est.e2e_s)


def test_a_host_file_by_path(tmp_path: Path) -> None:
    path = tmp_path / "host.toml"
    path.write_text(dumps_toml(DOC))
    assert get_host(str(path)) == dataclasses.replace(get_host("default"), name="my-host")


@pytest.mark.parametrize("kind", NOT_FILE_KINDS)
def test_paths_that_are_not_files(tmp_path: Path, kind: str) -> None:
    path = not_a_file(tmp_path, kind, "host.toml")
    assert_schema_error_naming(lambda: get_host(str(path)), path)
