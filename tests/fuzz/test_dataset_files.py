"""Dataset files (workload/datasets.py): hostile ShareGPT, OpenAI-messages and prompt rows, and
arbitrary bytes, give a Dataset or one ConfigError (SchemaError), never another exception."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tokenprobe.workload import DatasetOptions, estimated_lengths, read_dataset

from .conftest import FUZZ, mutated_docs, parse_or_config_error

ROWS: list[dict[str, Any]] = [
    {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]},
    {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]},
    {"prompt": "hi", "output_tokens": 3},
]


@FUZZ
@given(st.data(), st.sampled_from(ROWS), st.sampled_from(["list", "jsonl"]))
def test_a_mutated_row_reads_or_is_one_config_error(
    tmp_path_factory: Any, data: st.DataObject, row: dict[str, Any], shape: str
) -> None:
    doc = data.draw(mutated_docs({"row": row}))
    rows = [doc.get("row", doc), row]
    path: Path = tmp_path_factory.mktemp("ds") / ("d.json" if shape == "list" else "d.jsonl")
    text = json.dumps(rows) if shape == "list" else "".join(json.dumps(r) + "\n" for r in rows)
    path.write_text(text, encoding="utf-8")
    ds = parse_or_config_error(read_dataset, path)
    if ds is not None:
        lengths = parse_or_config_error(estimated_lengths, ds, DatasetOptions())
        assert lengths is None or min(lengths.input_tokens) >= 1


@FUZZ
@given(st.binary(max_size=300), st.sampled_from(["d.json", "d.jsonl", "d.csv"]))
def test_arbitrary_bytes_read_or_are_one_config_error(
    tmp_path_factory: Any, content: bytes, name: str
) -> None:
    path: Path = tmp_path_factory.mktemp("raw") / name
    path.write_bytes(content)
    parse_or_config_error(read_dataset, path)
