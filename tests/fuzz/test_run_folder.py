"""Run folders (records.read_run / read_summary): a valid Run or ConfigError, whatever any one
of its files holds; what loads can be summarised."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from tokenprobe.cli import app
from tokenprobe.metrics import summarize
from tokenprobe.records import (
    CONFIG_FILE,
    HOST_FILE,
    NOTES_FILE,
    RECORDS_FILE,
    SERVER_FILE,
    SUMMARY_FILE,
    TELEMETRY_FILE,
    TIMELINE_FILE,
    HostSample,
    RequestRecord,
    Run,
    ServerSample,
    TelemetrySample,
    TimelinePoint,
    read_run,
    read_summary,
    write_run,
)

from .conftest import (
    FUZZ,
    NOT_FILE_KINDS,
    assert_schema_error_naming,
    file_contents,
    mutated_docs,
    not_a_file,
    parse_or_config_error,
)

FILES = (CONFIG_FILE, RECORDS_FILE, TELEMETRY_FILE, TIMELINE_FILE, HOST_FILE, SERVER_FILE)
FILES += (NOTES_FILE, SUMMARY_FILE)


def _run() -> Run:
    records = [
        RequestRecord(str(i), i * 0.5, i * 0.5, i * 0.5 + 0.1, i * 0.5 + 0.4, 32, 4,
                      [i * 0.5 + 0.1 * k for k in range(1, 5)], queue_s=0.01,
                      extra={"server_ttft_s": 0.05})
        for i in range(3)
    ]  # fmt: skip
    records.append(RequestRecord("x", 2.0, 2.0, None, 2.1, 32, 0, error_kind="http_500"))
    return Run(
        kind="measured",
        config={"model": "llama-3.1-8b", "gpu": "h100-sxm", "seed": 1},
        wall_start_s=1.7e9,
        records=records,
        telemetry=[TelemetrySample(t_s=0.1 * k, gpu_index=0, power_w=300.0) for k in range(5)],
        timeline=[TimelinePoint(0.0, 1, 2, 0, 300.0)],
        host=[HostSample(t_s=0.0, cpu_util_per_core=(0.5, 0.25), rapl_energy_j={"pkg": 1.0})],
        server=[ServerSample(t_s=0.0, requests_running=1.0, source="vllm")],
        telemetry_notes={"period_s": 0.1},
    )


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = _run()
    return write_run(run, tmp_path_factory.mktemp("template") / "run", summarize(run))


def _fresh(template: Path, tmp_path: Path) -> Path:
    root = tmp_path / "run"
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(template, root)
    return root


def _check(run: Run | None) -> None:
    if run is None:
        return
    summary = summarize(run)  # what loads is usable downstream
    for key in ("ttft_s", "tpot_s", "e2e_s"):
        assert all(v is None or math.isfinite(v) for v in summary[key].values())


def _first_line(path: Path) -> dict[str, Any]:
    doc = json.loads(path.read_text().splitlines()[0])
    assert isinstance(doc, dict)
    return doc


@FUZZ
@given(name=st.sampled_from(FILES), data=st.data())
def test_one_file_mutated_bytewise(
    template: Path, tmp_path: Path, name: str, data: st.DataObject
) -> None:
    root = _fresh(template, tmp_path)
    original = (root / name).read_bytes()
    (root / name).write_bytes(data.draw(file_contents(original)))
    _check(parse_or_config_error(read_run, root))
    parse_or_config_error(read_summary, root)


@FUZZ
@given(name=st.sampled_from(FILES), data=st.data())
def test_one_line_with_hostile_values(
    template: Path, tmp_path: Path, name: str, data: st.DataObject
) -> None:
    root = _fresh(template, tmp_path)
    path = root / name
    lines = path.read_text().splitlines()
    if name.endswith(".jsonl"):
        doc = data.draw(mutated_docs(_first_line(path)))
        lines[0] = json.dumps(doc)  # NaN and Infinity as Python writes them, 1e999 too
        lines[0] = lines[0].replace("Infinity", data.draw(st.sampled_from(["Infinity", "1e999"])))
        path.write_text("\n".join(lines) + "\n")
    else:
        path.write_text(json.dumps(data.draw(mutated_docs(json.loads(path.read_text())))))
    _check(parse_or_config_error(read_run, root))
    parse_or_config_error(read_summary, root)


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"first_token_s": float("nan")}, "NaN"),
        ({"first_token_s": "1e999"}, "first_token_s"),
        ({"sent_s": -1.0, "scheduled_s": -1.0}, "negative"),
        ({"finish_s": 0.05}, "finish_s"),
        ({"output_tokens": 10**30}, "output_tokens"),
        ({"input_tokens": True}, "input_tokens"),
        ({"request_id": None}, "request_id"),
    ],
)
def test_bad_records_are_refused_naming_file_line_and_field(
    template: Path, tmp_path: Path, change: dict[str, Any], needle: str
) -> None:
    root = _fresh(template, tmp_path)
    path = root / RECORDS_FILE
    lines = path.read_text().splitlines()
    doc = {**json.loads(lines[1]), **change}
    lines[1] = json.dumps(doc).replace('"1e999"', "1e999")
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(Exception) as info:
        read_run(root)
    assert info.type.__name__ == "SchemaError"
    assert f"{RECORDS_FILE}:2" in str(info.value) and needle in str(info.value)


def test_a_record_missing_fields_is_refused(template: Path, tmp_path: Path) -> None:
    root = _fresh(template, tmp_path)
    path = root / RECORDS_FILE
    path.write_text('{"request_id": "a", "sent_s": 0.0}\n')
    with pytest.raises(Exception, match=RECORDS_FILE) as info:
        read_run(root)
    assert info.type.__name__ == "SchemaError"


@pytest.mark.parametrize("kind", NOT_FILE_KINDS)
@pytest.mark.parametrize("name", FILES)
def test_each_file_may_be_no_file(template: Path, tmp_path: Path, kind: str, name: str) -> None:
    root = _fresh(template, tmp_path)
    (root / name).unlink()
    bad = not_a_file(root, kind, name)
    if name == NOTES_FILE:  # the notes are not the run: a warning, not an error
        with_warning = parse_or_config_error(read_run, root)
        assert with_warning is not None and any(NOTES_FILE in w for w in with_warning.warnings)
        return
    assert_schema_error_naming(lambda: read_run(root), bad)


@pytest.mark.parametrize("kind", ["fifo", "folder", "binary"])
def test_cli_diagnose_of_a_run_with_a_bad_file_exits_2(
    template: Path, tmp_path: Path, kind: str
) -> None:
    root = _fresh(template, tmp_path)
    (root / RECORDS_FILE).unlink()
    not_a_file(root, kind, RECORDS_FILE)
    result = CliRunner().invoke(app, ["diagnose", str(root)])
    assert result.exit_code == 2, result.output
    assert RECORDS_FILE in "".join(result.output.split())


def test_cli_diagnose_of_a_fifo_as_the_run_exits_2(tmp_path: Path) -> None:
    path = not_a_file(tmp_path, "fifo", "run")
    result = CliRunner().invoke(app, ["diagnose", str(path)])
    assert result.exit_code == 2, result.output
