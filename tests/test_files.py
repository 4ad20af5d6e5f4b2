"""The one reader of user files: every OS, decoding and parse error is a SchemaError naming it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tokenprobe.errors import ConfigError, SchemaError
from tokenprobe.files import finite, parse_json, read_json, read_text, read_toml


def test_text_json_and_toml_read(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text('{"x": 1}', encoding="utf-8")
    (tmp_path / "a.toml").write_text("x = 1\n", encoding="utf-8")
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbfhello")
    assert read_json(tmp_path / "a.json") == {"x": 1}
    assert read_toml(tmp_path / "a.toml") == {"x": 1}
    assert read_text(tmp_path / "bom.txt") == "hello"


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"\x00\x01\x02", "binary"),
        (b"caf\xe9", "not UTF-8"),
        (b'{"x": NaN}', "not valid JSON"),
        (b'{"x": ', "not valid JSON"),
        (b"[" * 100_000, "JSON"),
    ],
)
def test_bad_json_files_name_the_file(tmp_path: Path, content: bytes, needle: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(SchemaError, match=needle) as info:
        read_json(path)
    assert str(path) in str(info.value)


def test_folder_missing_and_fifo_are_schema_errors(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match="folder"):
        read_text(tmp_path)
    with pytest.raises(SchemaError, match="cannot read"):
        read_text(tmp_path / "missing.toml")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(SchemaError, match="regular file"):  # must not block on open()
        read_text(fifo)


def test_size_limit_and_bad_toml(tmp_path: Path) -> None:
    big = tmp_path / "big.toml"
    big.write_text("x = 1\n" * 100, encoding="utf-8")
    with pytest.raises(SchemaError, match="at most 10 "):
        read_text(big, max_bytes=10)
    bad = tmp_path / "bad.toml"
    bad.write_text("x = = 1", encoding="utf-8")
    with pytest.raises(SchemaError, match="not valid TOML"):
        read_toml(bad)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), "-inf", "abc", True, None, [1]])
def test_finite_refuses_what_is_not_a_finite_number(value: object) -> None:
    with pytest.raises(ConfigError, match="rate"):
        finite("rate", value)


def test_finite_bounds() -> None:
    assert finite("x", "2.5", lo=0) == 2.5
    assert finite("x", 0, lo=0) == 0.0
    with pytest.raises(ConfigError, match="> 0"):
        finite("x", 0, lo=0, lo_open=True)
    with pytest.raises(ConfigError, match="<= 1"):
        finite("x", 1.5, hi=1)
    assert parse_json("[1, 2]", "s") == [1, 2]
