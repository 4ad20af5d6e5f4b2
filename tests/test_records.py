"""The run record format: derived properties, JSON round trip, append-only writer, truncation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenprobe.errors import SchemaError
from tokenprobe.records import (
    RequestRecord,
    Run,
    RunWriter,
    TelemetrySample,
    TimelinePoint,
    read_run,
    write_run,
)


def _record(rid: str = "r0", **kw: object) -> RequestRecord:
    base: dict[str, object] = {
        "request_id": rid,
        "scheduled_s": 1.0,
        "sent_s": 1.5,
        "first_token_s": 2.0,
        "finish_s": 3.0,
        "input_tokens": 10,
        "output_tokens": 5,
        "token_times_s": [2.0, 2.25, 2.5, 2.75, 3.0],
        "queue_s": 0.1,
        "token_count_source": "sim",
    }
    base.update(kw)
    return RequestRecord(**base)  # type: ignore[arg-type]


def test_derived_latencies() -> None:
    r = _record()
    assert r.ttft_s == pytest.approx(0.5)
    assert r.e2e_s == pytest.approx(1.5)
    assert r.tpot_s == pytest.approx((3.0 - 2.0) / 4)
    assert r.itl_s == pytest.approx([0.25, 0.25, 0.25, 0.25])


def test_chunked_tokens_count_as_one_arrival() -> None:
    # 2 tokens at 2.0, 3 tokens at 2.6: one chunk-to-chunk gap
    r = _record(token_times_s=[2.0, 2.0, 2.6, 2.6, 2.6], finish_s=2.6)
    assert r.itl_s == pytest.approx([0.6])
    assert r.tpot_s == pytest.approx(0.6 / 4)


def test_missing_times_give_none() -> None:
    r = _record(first_token_s=None, finish_s=None, token_times_s=[], error_kind="timeout")
    assert not r.ok
    assert r.ttft_s is None and r.e2e_s is None and r.tpot_s is None
    assert _record(output_tokens=1).tpot_s is None


def _run() -> Run:
    return Run(
        kind="simulated",
        config={"model": "llama-3.1-8b", "rate_per_s": 2.0},
        wall_start_s=1.7e9,
        records=[
            _record("a"),
            _record("b", error_kind="http_500", error_message="boom", first_token_s=None),
        ],
        telemetry=[TelemetrySample(t_s=0.5, gpu_index=0, power_w=300.0, gpu_util=0.9)],
        timeline=[TimelinePoint(t_s=0.0, batch_size=2, kv_blocks_used=7, queue_len=1, power_w=1)],
    )


def test_write_read_round_trip(tmp_path: Path) -> None:
    run = _run()
    write_run(run, tmp_path, summary={"duration_s": 4.0, "completed": 1})
    back = read_run(tmp_path)
    assert back.kind == "simulated"
    assert back.config == run.config
    assert back.wall_start_s == run.wall_start_s
    assert back.records == run.records
    assert back.telemetry == run.telemetry
    assert back.timeline == run.timeline
    assert back.duration_s == 4.0
    assert back.warnings == []


def test_writer_flushes_each_line_before_close(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path, "measured", {"url": "http://x"}, wall_start_s=0.0)
    writer.add_record(_record("a"))
    # read while the writer is still open: the finished request is already on disk
    lines = (tmp_path / "records.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["request_id"] == "a"
    back = read_run(tmp_path)
    assert [r.request_id for r in back.records] == ["a"]
    assert any("summary.json" in w for w in back.warnings)
    writer.close({"duration_s": 1.0})
    assert read_run(tmp_path).duration_s == 1.0


def test_truncated_last_line_is_skipped_and_reported(tmp_path: Path) -> None:
    write_run(_run(), tmp_path)
    path = tmp_path / "records.jsonl"
    text = path.read_text()
    path.write_text(text[: len(text) - 20])  # cut the last record mid-line
    back = read_run(tmp_path)
    assert [r.request_id for r in back.records] == ["a"]
    assert any("records.jsonl:2" in w and "truncated" in w for w in back.warnings)


def test_bad_middle_line_names_file_and_line(tmp_path: Path) -> None:
    write_run(_run(), tmp_path)
    path = tmp_path / "records.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], "{not json", lines[1]]) + "\n")
    with pytest.raises(SchemaError, match=r"records.jsonl:2"):
        read_run(tmp_path)


def test_unknown_key_and_bad_type_rejected() -> None:
    good = _record().to_dict()
    with pytest.raises(SchemaError, match="unknown keys"):
        RequestRecord.from_dict({**good, "ttft": 1.0})
    with pytest.raises(SchemaError, match="input_tokens"):
        RequestRecord.from_dict({**good, "input_tokens": "10"})
    with pytest.raises(SchemaError, match="token_times_s"):
        RequestRecord.from_dict({**good, "token_times_s": [1.0, "x"]})
    missing = {k: v for k, v in good.items() if k != "sent_s"}
    with pytest.raises(SchemaError):
        RequestRecord.from_dict(missing)


def test_not_a_run_folder(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match=r"config\.json"):
        read_run(tmp_path)
    with pytest.raises(SchemaError):
        Run(kind="guessed")  # type: ignore[arg-type]
