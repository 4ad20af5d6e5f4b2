"""One reader of engine release strings (cost/release.py) for every rule that keys on one."""

from __future__ import annotations

import pytest

from tokenprobe.cost import engine_release, is_release, vllm_mla_rule
from tokenprobe.sim import engine_preset, runs_v0


@pytest.mark.parametrize(
    ("text", "release"),
    [
        ("0.7.4.dev181+gf35f8e22", (0, 7, 4)),  # setuptools-scm dev build
        ("v0.7.0", (0, 7, 0)),
        ("0.4.3.post2", (0, 4, 3)),  # SGLang's post releases
        ("0.7.3 (ROCm)", (0, 7, 3)),  # a note after the version, as AMD's tables write it
        ("1.0.0rc2", (1, 0, 0)),  # TensorRT-LLM's release candidates
        ("0.9", (0, 9, 0)),
        ("not pinned (2024)", None),
        ("", None),
    ],
)
def test_release_strings_read_as_engines_print_them(
    text: str, release: tuple[int, int, int] | None
) -> None:
    assert engine_release(text) == release


def test_every_version_rule_reads_the_same_release() -> None:
    # a dev build of 0.7.4 is V0, under 0.7's MLA rule and in the vllm-2025h1 era; 0.8.0 is none
    for text in ("0.7.4.dev181+gf35f8e22", "0.7.3 (ROCm)"):
        assert runs_v0(text)
        assert vllm_mla_rule(text) == "vllm-0.7-mla"
        assert engine_preset("vllm").era_of(text) == "vllm-2025h1"
    assert not runs_v0("0.8.0") and vllm_mla_rule("0.8.0") is None
    assert engine_preset("vllm").era_of("0.10.1") is None
    assert engine_preset("sglang").era_of("v0.4.3.post2") == "sglang-2025h1"


def test_the_cli_takes_one_release_alone() -> None:
    assert is_release("0.7.3") and is_release("v0.8.5.post1") and is_release("0.7.4.dev181+g1")
    assert not is_release("0.7.3 (ROCm)") and not is_release("seven") and not is_release("7")


def test_the_cli_refuses_release_look_alikes() -> None:
    for text in ("0.7abc", "1.2-", "0.7.3..", "0.7.3-foo"):
        assert not is_release(text), text
    assert is_release("1.0.0rc2") and is_release("0.4.3.post2") and is_release("v0.7.0")
