"""Datasets (workload/datasets.py): formats detected, one clear error per bad file, lengths taken
and clipped as documented, and a Workload that runs them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tokenprobe.cli import app
from tokenprobe.errors import ConfigError, SchemaError
from tokenprobe.workload import (
    Arrival,
    DatasetOptions,
    Workload,
    estimate_tokens,
    estimated_lengths,
    load_dataset_lengths,
    load_workload,
    read_dataset,
)

SAMPLE = Path(__file__).parent / "data" / "datasets" / "sharegpt_sample.json"


def test_the_sharegpt_sample_reads_first_human_turn_and_its_reply() -> None:
    ds = read_dataset(SAMPLE)
    raw = json.loads(SAMPLE.read_text())
    assert ds.format == "sharegpt" and len(ds.rows) == len(raw) - 1 and ds.skipped == 1
    first = raw[0]["conversations"]
    assert ds.rows[0].prompt == first[0]["value"] and ds.rows[0].reply == first[1]["value"]
    # a multi-turn conversation: the first exchange only (vLLM's ShareGPT sampler does the same)
    assert ds.rows[2].reply == raw[2]["conversations"][1]["value"]


def test_estimate_is_ceil_of_characters_over_four() -> None:
    # "Tell a short story about my garden." is 35 characters: ceil(35 / 4) = 9 tokens
    assert estimate_tokens("Tell a short story about my garden.") == 9
    assert (
        estimate_tokens("") == 1 and estimate_tokens("abcd") == 1 and estimate_tokens("abcde") == 2
    )


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_every_format_is_detected(tmp_path: Path) -> None:
    turns = [{"role": "user", "content": "hi there"}, {"role": "assistant", "content": "hello"}]
    files = {
        "sharegpt": _write(tmp_path, "a.jsonl", json.dumps({"conversations": turns}) + "\n"),
        "openai-messages": _write(tmp_path, "b.jsonl", json.dumps({"messages": turns}) + "\n"),
        "prompt-jsonl": _write(tmp_path, "c.jsonl", '{"prompt": "hi there", "output_tokens": 5}\n'),
        "csv": _write(tmp_path, "d.csv", 'prompt,output_tokens\n"hi there",5\n'),
    }
    for fmt, path in files.items():
        ds = read_dataset(path)
        assert ds.format == fmt and ds.rows[0].prompt == "hi there", fmt
    assert read_dataset(files["openai-messages"]).rows[0].reply == "hello"
    assert read_dataset(files["csv"]).rows[0].output_tokens == 5


@pytest.mark.parametrize(
    ("name", "text", "where", "needle"),
    [
        ("x.jsonl", '{"prompt": "a"}\n{"messages": []}\n', ":2", "openai-messages row"),
        (
            "x.jsonl",
            '{"prompt": "a"}\n\n{"prompt": "b", "output_tokens": 0}\n',
            ":3",
            "output_tokens",
        ),
        ("x.jsonl", '{"prompt": "a"}\n{"prompt": \n', ":2", "json"),
        ("x.json", '[{"conversations": [{"from": "alien", "value": "a"}]}]', "item 1", "from"),
        ("x.json", '[{"messages": [{"role": "user", "content": 3}]}]', "item 1", "content"),
        ("x.csv", "text,output_tokens\na,3\n", ":1", "prompt"),
        ("x.csv", "prompt,output_tokens\na,many\n", ":2", "output_tokens"),
        ("x.txt", "hello\n", "x.txt", "not a dataset"),
        ("x.jsonl", '{"question": "a"}\n', ":1", "expected ShareGPT"),
    ],
)
def test_a_bad_file_is_one_schema_error_naming_file_line_and_field(
    tmp_path: Path, name: str, text: str, where: str, needle: str
) -> None:
    path = _write(tmp_path, name, text)
    with pytest.raises(SchemaError) as info:
        read_dataset(path)
    message = str(info.value)
    assert f"{path}{where}" in message or (where in message and str(path) in message)
    assert needle.lower() in message.lower()


def test_lengths_override_clip_and_skip(tmp_path: Path) -> None:
    rows = [
        {"prompt": "a" * 40, "output_tokens": 50},  # 10 tokens estimated
        {"prompt": "b" * 400},  # 100 tokens, no output length: the default 256
    ]
    path = _write(tmp_path, "d.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    plain = load_dataset_lengths(path)
    assert plain.input_tokens == (10, 100) and plain.output_tokens == (50, 256)
    clipped = load_dataset_lengths(path, DatasetOptions(max_output_tokens=60, max_input_tokens=99))
    assert clipped.rows == (0,) and clipped.output_tokens == (50,) and clipped.skipped_long == 1
    fixed_out = load_dataset_lengths(path, DatasetOptions(output_tokens=7))
    assert fixed_out.output_tokens == (7, 7)
    with pytest.raises(ConfigError, match="max_input_tokens"):
        load_dataset_lengths(path, DatasetOptions(max_input_tokens=5))


def test_a_dataset_workload_cycles_rows_in_file_order_with_its_prefix() -> None:
    lengths = estimated_lengths(read_dataset(SAMPLE), DatasetOptions())
    wl = Workload(Arrival("poisson", rate_per_s=2.0), num_requests=25, dataset=lengths)
    wl_prefixed = Workload(
        Arrival("poisson", rate_per_s=2.0), num_requests=25, dataset=lengths, shared_prefix_tokens=6
    )
    reqs, prefixed = (
        wl.generate(np.random.default_rng(3)),
        wl_prefixed.generate(np.random.default_rng(3)),
    )
    n = len(lengths.rows)
    for i, (r, p) in enumerate(zip(reqs, prefixed, strict=True)):
        assert r.item == lengths.rows[i % n] and r.input_tokens == lengths.input_tokens[i % n]
        assert p.input_tokens == r.input_tokens + 6 and p.prefix_tokens == 6
        assert p.arrival_s == r.arrival_s


def test_prefix_groups_keep_one_group_draws_and_spread_requests() -> None:
    base = Workload(Arrival("gamma", rate_per_s=3.0, burstiness=0.5), num_requests=400)
    one = base.generate(np.random.default_rng(5))
    many = Workload(
        base.arrival, num_requests=400, shared_prefix_tokens=64, prefix_groups=4
    ).generate(np.random.default_rng(5))
    assert [r.arrival_s for r in one] == [r.arrival_s for r in many]
    assert {r.prefix_group for r in one} == {0} and {r.prefix_group for r in many} == {0, 1, 2, 3}
    assert all(r.prefix_tokens == 64 for r in many)


def test_a_workload_file_with_a_dataset_and_prefix_groups(tmp_path: Path) -> None:
    (tmp_path / "sample.json").write_text(SAMPLE.read_text())
    wf = _write(
        tmp_path,
        "w.toml",
        "num_requests = 5\nshared_prefix_tokens = 8\nprefix_groups = 2\n"
        '[arrival]\nkind = "offline"\n[dataset]\nfile = "sample.json"\nmax_output_tokens = 6\n',
    )
    wl = load_workload(wf)
    assert wl.dataset is not None and wl.prefix_groups == 2
    assert max(wl.dataset.output_tokens) == 6
    bad = _write(
        tmp_path,
        "bad.toml",
        '[arrival]\nkind = "offline"\n[dataset]\nfile = "x"\n'
        '[input_tokens]\nkind = "fixed"\nvalue = 3\n',
    )
    with pytest.raises(SchemaError, match="keep one"):
        load_workload(bad)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('[{"conversations": [{"from": "human", "value": "a"}, {"from": 7}]}]', "item 1"),
        ('{"prompt": "a"}\n{"conversations": []}\n', "bad.jsonl:2"),
    ],
)
def test_simulate_refuses_a_bad_dataset_in_one_line_exit_2(
    tmp_path: Path, text: str, where: str
) -> None:
    bad = _write(tmp_path, "bad.jsonl" if "\n" in text else "bad.json", text)
    args = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--concurrency", "2"]
    result = CliRunner().invoke(app, [*args, "--dataset", str(bad)], env={"COLUMNS": "400"})
    assert result.exit_code == 2, result.output
    flat = "".join(result.output.split())
    assert flat.startswith("error:") and "".join(where.split()) in flat
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) <= 3


def test_a_sharegpt_conversation_replays_its_own_later_turns() -> None:
    from tokenprobe.workload import Conversation

    raw = json.loads(SAMPLE.read_text())[2]["conversations"]  # four turns: human, gpt, human, gpt
    ds = read_dataset(SAMPLE)
    assert ds.rows[2].followups == ((raw[2]["value"], raw[3]["value"]),)
    lengths = estimated_lengths(ds, DatasetOptions(max_output_tokens=6))
    wl = Workload(
        Arrival("offline"), num_requests=4, dataset=lengths, conversation=Conversation(3, 0.2)
    )
    specs = wl.generate(np.random.default_rng(0))
    # rows 0 and 1 have one exchange (one-turn conversations); row 2 has two, so its
    # conversation has two turns although three are allowed; the fourth request opens row 3
    assert [(s.item, s.turn) for s in specs] == [(0, 0), (1, 0), (2, 0), (2, 1)]
    first, follow = specs[2], specs[3]
    # "And what happened next?" is 23 characters: ceil(23 / 4) = 6 tokens after the history
    assert follow.input_tokens == first.input_tokens + first.output_tokens + 6
    assert follow.output_tokens == 6 and follow.think_s == 0.2
