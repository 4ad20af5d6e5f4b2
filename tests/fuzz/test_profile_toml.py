"""Profile TOML files (calibrate.load_profile / parse_profile): valid Profile or ConfigError."""

from __future__ import annotations

import math
import tomllib
from dataclasses import fields
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from tokenprobe.calibrate import Profile, load_profile, parse_profile
from tokenprobe.cli import app
from tokenprobe.cost import BatchShape, make_deployment, step_cost

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

TEXT = (resources.files("tokenprobe.calibrate") / "profiles" / "vllm.toml").read_text("utf-8")
DOC: dict[str, Any] = tomllib.loads(TEXT)


def _check(profile: Profile | None) -> None:
    if profile is None:
        return
    for part in (profile.efficiency, profile.power):
        for f in fields(part):
            assert math.isfinite(getattr(part, f.name)), f.name
    # what loads can be priced, MoE routing included (routing_skew)
    dep = make_deployment("qwen3-30b-a3b", "h100-sxm", **profile.deployment_kwargs())
    for shape in (BatchShape.prefill(512, 1), BatchShape.decode(8, 1024)):
        cost = step_cost(dep, shape)
        assert math.isfinite(cost.time_s) and cost.time_s > 0
        assert math.isfinite(cost.energy_j)


@FUZZ
@given(data=file_contents(TEXT.encode()))
def test_random_and_mutated_bytes(data: bytes) -> None:
    text = data.decode("utf-8", errors="replace")
    _check(parse_or_config_error(parse_profile, text, "p.toml"))


@FUZZ
@given(doc=mutated_docs(DOC))
def test_hostile_values(tmp_path: Path, doc: dict[str, Any]) -> None:
    path = tmp_path / "p.toml"
    path.write_text(dumps_toml(doc))
    _check(parse_or_config_error(load_profile, path))


@FUZZ
@given(
    key=st.sampled_from(["memory", "compute_decode", "step_overhead_s", "routing_skew"]),
    value=st.sampled_from([math.nan, math.inf, -0.5, 1e300, "fast", True, [0.5]]),
)
def test_each_parameter_names_itself(key: str, value: object) -> None:
    doc = {**DOC, "efficiency": {**DOC["efficiency"], key: value}}
    with pytest.raises(Exception) as info:
        parse_profile(dumps_toml(doc), "p.toml")
    assert info.type.__name__ == "SchemaError"
    assert "p.toml" in str(info.value) and key in str(info.value)


@pytest.mark.parametrize("kind", NOT_FILE_KINDS)
def test_paths_that_are_not_files(tmp_path: Path, kind: str) -> None:
    path = not_a_file(tmp_path, kind, "p.toml")
    assert_schema_error_naming(lambda: load_profile(path), path)


@pytest.mark.parametrize("kind", ["fifo", "dangling"])
def test_cli_estimate_with_a_bad_profile_exits_2(tmp_path: Path, kind: str) -> None:
    path = not_a_file(tmp_path, kind, "p.toml")
    args = ["estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--profile", str(path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "p.toml" in "".join(result.output.split())
