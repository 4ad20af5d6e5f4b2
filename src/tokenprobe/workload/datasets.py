"""Datasets users have: ShareGPT, OpenAI chat `messages`, our prompt JSONL, CSV; format detected.

One reader for `simulate --dataset` and `bench --dataset` (and a workload file's `[dataset]`):

- ShareGPT: a JSON list (or JSONL) of `{"conversations": [{"from": "human", "value": ...},
  {"from": "gpt", "value": ...}, ...]}`; `role`/`content` turns are read too. The prompt is the
  first human turn (after any system turns), the reply the turn after it, as vLLM's ShareGPT
  sampler takes conversations[0] and [1] (vllm-project/vllm: vllm/benchmarks/datasets.py,
  ShareGPTDataset); conversations without a human turn followed by a reply are skipped and counted.
  The later human/gpt exchanges are kept (`followups`): a multi-turn workload replays them.
- OpenAI chat: JSONL (or a JSON list) of `{"messages": [{"role": ..., "content": ...}, ...]}`;
  a last `assistant` message is the reply, the messages before it the prompt.
- ours: JSONL of `{"prompt": str, "output_tokens": int (optional)}`.
- CSV with a header: a `prompt` column and an optional `output_tokens` column.

The first row fixes the format; a row of another shape, a bad field or a file of none of these
raises one SchemaError naming the file, the line (JSONL, CSV) or item (JSON list) and the field.

Token counts (`dataset_lengths`): a counter given by the caller. bench passes the server's
tokenizer (`/tokenize`, special tokens included for prompts, as `usage.prompt_tokens` counts
them); without one, and in the simulator, `estimate_tokens`: ceil(characters / 4), OpenAI's rule
of thumb for English ("one token generally corresponds to ~4 characters of text",
help.openai.com/en/articles/4936856). The run's config names which was used (`counted_by`).
Output length: `output_tokens` when given (every request asks that many: vLLM's
`--sharegpt-output-len`), else the row's own `output_tokens`, else its reply's token count, else
DEFAULT_OUTPUT_TOKENS; then clipped to `max_output_tokens`. Rows whose prompt is longer than
`max_input_tokens` are skipped (vLLM prunes ShareGPT prompts over 1024 tokens; here the bound is
the caller's).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenprobe.errors import ConfigError, SchemaError
from tokenprobe.files import parse_json, read_text
from tokenprobe.units import GiB
from tokenprobe.workload.checks import MAX_LENGTH_TOKENS, MAX_REQUESTS, is_count

CHARS_PER_TOKEN = 4  # help.openai.com/en/articles/4936856 (module docstring); cost.network too
ESTIMATE = f"estimate: {CHARS_PER_TOKEN} characters per token"
DEFAULT_OUTPUT_TOKENS = 256  # as bench, estimate, simulate and plan assume
MAX_DATASET_BYTES = 1 * GiB  # json parses a file into several times its size in memory
DATASET_FORMATS = ("sharegpt", "openai-messages", "prompt-jsonl", "csv")
_USER = {"human", "user"}
_ASSISTANT = {"gpt", "assistant", "chatgpt", "bard", "bing", "model"}
_SHAPES = (
    'ShareGPT {"conversations": [{"from": "human", "value": ...}, ...]}, OpenAI '
    '{"messages": [{"role": "user", "content": ...}]}, {"prompt": ...} JSONL, or CSV with a '
    "prompt column"
)

Message = tuple[str, str]  # (role, content)


@dataclass(frozen=True, slots=True)
class DatasetRow:
    """One request of a dataset: the prompt's messages (the last a user's), the reference reply
    when the file has one, and the output length when the file gives it."""

    messages: tuple[Message, ...]
    reply: str | None = None
    output_tokens: int | None = None
    followups: tuple[tuple[str, str], ...] = ()  # a ShareGPT conversation's later (user, reply)

    @property
    def prompt(self) -> str:
        """The prompt as one text (the completions endpoint): the contents, one per paragraph."""
        return "\n\n".join(content for _, content in self.messages)


@dataclass(frozen=True, slots=True)
class Dataset:
    path: str
    format: str
    rows: tuple[DatasetRow, ...]
    skipped: int = 0  # ShareGPT conversations with no human turn followed by a reply


@dataclass(frozen=True, slots=True)
class DatasetLengths:
    """A dataset's requests as token counts: row `rows[i]` has `input_tokens[i]` prompt tokens
    and asks for `output_tokens[i]`; requests cycle through them in file order."""

    dataset: Dataset
    rows: tuple[int, ...]
    input_tokens: tuple[int, ...]
    output_tokens: tuple[int, ...]
    counted_by: str
    skipped_long: int = 0
    options: DatasetOptions | None = None
    # per kept row: its later turns' (message tokens, output tokens), for multi-turn workloads
    followups: tuple[tuple[tuple[int, int], ...], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        n = len(self.rows)
        return {
            "path": self.dataset.path,
            "format": self.dataset.format,
            "rows": len(self.dataset.rows),
            "used_rows": n,
            "skipped_no_reply": self.dataset.skipped,
            "skipped_long": self.skipped_long,
            "counted_by": self.counted_by,
            **{k: v for k, v in _options_dict(self.options).items() if v is not None},
            "mean_input_tokens": sum(self.input_tokens) / n,
            "mean_output_tokens": sum(self.output_tokens) / n,
        }


def _options_dict(options: DatasetOptions | None) -> dict[str, int | None]:
    if options is None:
        return {}
    return {
        "output_tokens_override": options.output_tokens,
        "max_input_tokens": options.max_input_tokens,
        "max_output_tokens": options.max_output_tokens,
    }


def estimate_tokens(text: str) -> int:
    """ceil(characters / CHARS_PER_TOKEN), at least 1 (module docstring)."""
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


# ---------------------------------------------------------------- reading


def read_dataset(path: str | Path) -> Dataset:
    """The dataset in `path`, its format detected (module docstring); SchemaError otherwise."""
    p = Path(path)
    text = read_text(p, max_bytes=MAX_DATASET_BYTES)
    head = text.lstrip()[:1]
    if not head:
        raise SchemaError(str(p), "has no requests (the file is empty)")
    if p.suffix.lower() == ".csv":
        items = _csv_items(text, p)
    elif head == "[":
        items = _json_list_items(text, p)
    elif head == "{":
        items = _jsonl_items(text, p)
    else:
        raise SchemaError(str(p), f"not a dataset; expected {_SHAPES}")
    fmt, rows, skipped = _rows(items, p)
    if not rows:
        why = f" ({skipped} conversations without a reply)" if skipped else ""
        raise SchemaError(str(p), f"holds no request{why}")
    return Dataset(str(p), fmt, tuple(rows), skipped)


def _json_list_items(text: str, p: Path) -> Iterator[tuple[str, object]]:
    doc = parse_json(text, str(p))
    if not isinstance(doc, list):
        raise SchemaError(str(p), f"expected a JSON list of objects; expected {_SHAPES}")
    for i, item in enumerate(doc, start=1):
        yield f"{p}: item {i}", item


def _jsonl_items(text: str, p: Path) -> Iterator[tuple[str, object]]:
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            yield f"{p}:{number}", parse_json(line, f"{p}:{number}")


def _csv_items(text: str, p: Path) -> Iterator[tuple[str, object]]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        names = reader.fieldnames or []
        if "prompt" not in names:
            raise SchemaError(f"{p}:1", f"the CSV header {names[:6]} names no 'prompt' column")
        unknown = sorted(set(names) - {"prompt", "output_tokens"})
        if unknown:
            raise SchemaError(f"{p}:1", f"unknown columns {unknown}; known: prompt, output_tokens")
        for row in reader:
            out = row.get("output_tokens")
            yield f"{p}:{reader.line_num}", {"prompt": row["prompt"], "output_tokens": out or None}
    except csv.Error as exc:
        raise SchemaError(f"{p}:{reader.line_num}", f"not valid CSV: {exc}") from None


def _kind(item: object, where: str) -> str:
    if isinstance(item, Mapping):
        for key, fmt in (("conversations", "sharegpt"), ("messages", "openai-messages")):
            if key in item:
                return fmt
        if "prompt" in item:
            return "prompt-jsonl"
    raise SchemaError(where, f"expected {_SHAPES}, not {str(item)[:60]!r}")


def _rows(items: Iterator[tuple[str, object]], p: Path) -> tuple[str, list[DatasetRow], int]:
    fmt = ""
    rows: list[DatasetRow] = []
    skipped = 0
    for where, item in items:
        kind = _kind(item, where)
        fmt = fmt or ("csv" if p.suffix.lower() == ".csv" else kind)
        expected = "prompt-jsonl" if fmt == "csv" else fmt
        if kind != expected:
            raise SchemaError(where, f"a {kind} row in a {fmt} file (its first row decided)")
        assert isinstance(item, Mapping)
        row = _PARSERS[kind](item, where)
        if row is None:
            skipped += 1
            continue
        rows.append(row)
        if len(rows) > MAX_REQUESTS:
            raise SchemaError(str(p), f"holds more than {MAX_REQUESTS:,} requests")
    return fmt, rows, skipped


def _text(value: object, where: str, field: str) -> str:
    """A message's text: a string, or OpenAI's list of {"type": "text", "text": ...} parts."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(
        isinstance(part, Mapping)
        and part.get("type") == "text"
        and isinstance(part.get("text"), str)
        for part in value
    ):
        return "".join(str(part["text"]) for part in value)
    raise SchemaError(where, f"{field}={str(value)[:60]!r} is not text")


def _is_text_part(part: object) -> bool:
    return (
        isinstance(part, Mapping)
        and part.get("type") == "text"
        and isinstance(part.get("text"), str)
    )


def _turn(turn: object, where: str, n: int) -> Message:
    field = f"conversations[{n}]"
    if not isinstance(turn, Mapping):
        raise SchemaError(where, f"{field} is not an object")
    speaker = turn.get("from", turn.get("role"))
    body = turn.get("value", turn.get("content"))
    if not isinstance(speaker, str):
        raise SchemaError(where, f"{field} has no 'from' (or 'role')")
    role = speaker.lower()
    role = "user" if role in _USER else "assistant" if role in _ASSISTANT else role
    if role not in ("user", "assistant", "system"):
        raise SchemaError(where, f"{field}.from={speaker[:40]!r}: human, gpt or system")
    return role, _text(body, where, f"{field}.value")


def _sharegpt(item: Mapping[str, Any], where: str) -> DatasetRow | None:
    turns = item["conversations"]
    if not isinstance(turns, list):
        raise SchemaError(where, f"conversations={str(turns)[:60]!r} is not a list")
    messages = [_turn(t, where, n) for n, t in enumerate(turns)]
    first_user = next((i for i, (role, _) in enumerate(messages) if role == "user"), None)
    if first_user is None or first_user + 1 >= len(messages):
        return None
    if messages[first_user + 1][0] != "assistant" or not messages[first_user][1]:
        return None
    later = messages[first_user + 2 :]
    pairs = zip(later[::2], later[1::2], strict=False)
    followups = []
    for (role, text), (next_role, reply) in pairs:  # until the turns stop alternating
        if role != "user" or next_role != "assistant" or not text:
            break
        followups.append((text, reply))
    return DatasetRow(
        tuple(messages[: first_user + 1]),
        reply=messages[first_user + 1][1],
        followups=tuple(followups),
    )


def _openai(item: Mapping[str, Any], where: str) -> DatasetRow:
    raw = item["messages"]
    if not isinstance(raw, list) or not raw:
        raise SchemaError(where, f"messages={str(raw)[:60]!r} is not a non-empty list")
    messages: list[Message] = []
    for n, m in enumerate(raw):
        if not isinstance(m, Mapping) or not isinstance(m.get("role"), str):
            raise SchemaError(where, f"messages[{n}] has no 'role'")
        messages.append((m["role"], _text(m.get("content"), where, f"messages[{n}].content")))
    reply = messages.pop()[1] if messages[-1][0] == "assistant" and len(messages) > 1 else None
    if not any(role == "user" for role, _ in messages):
        raise SchemaError(where, "messages hold no 'user' message before the reply")
    return DatasetRow(tuple(messages), reply=reply, output_tokens=_output(item, where))


def _prompt(item: Mapping[str, Any], where: str) -> DatasetRow:
    unknown = sorted(set(item) - {"prompt", "output_tokens"})
    if unknown:
        raise SchemaError(where, f"unknown keys {unknown}; allowed: ['prompt', 'output_tokens']")
    prompt = item.get("prompt")
    if not isinstance(prompt, str) or not prompt:
        raise SchemaError(where, "'prompt' must be a non-empty string")
    return DatasetRow((("user", prompt),), output_tokens=_output(item, where))


def _output(item: Mapping[str, Any], where: str) -> int | None:
    out = item.get("output_tokens")
    if isinstance(out, str):  # a CSV cell
        out = int(out) if out.strip().isdigit() else out
    if out is None:
        return None
    if not is_count(out, 1, MAX_LENGTH_TOKENS):
        raise SchemaError(where, f"'output_tokens'={out!r} must be an integer in [1, 2^24]")
    assert isinstance(out, int)
    return out


_PARSERS: dict[str, Callable[[Mapping[str, Any], str], DatasetRow | None]] = {
    "sharegpt": _sharegpt,
    "openai-messages": _openai,
    "prompt-jsonl": _prompt,
}


# ---------------------------------------------------------------- lengths


@dataclass(frozen=True, slots=True)
class DatasetOptions:
    """How a dataset's lengths are taken (module docstring); None = not given."""

    output_tokens: int | None = None
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None

    def __post_init__(self) -> None:
        for name in ("output_tokens", "max_input_tokens", "max_output_tokens"):
            value = getattr(self, name)
            if value is not None and not is_count(value, 1, MAX_LENGTH_TOKENS):
                raise ConfigError(name, value, f"an integer in [1, {MAX_LENGTH_TOKENS}]")


FollowupCounts = Sequence[Sequence[tuple[int, int | None]]]


def dataset_lengths(
    dataset: Dataset,
    options: DatasetOptions,
    input_counts: Sequence[int],
    reply_counts: Sequence[int | None],
    counted_by: str,
    followup_counts: FollowupCounts = (),
) -> DatasetLengths:
    """The dataset's requests as token counts, from the counts of each row's prompt and reply
    (None: no reply), taken and clipped as the module docstring says; `followup_counts` (per
    row, its later turns' message and reply counts) when a multi-turn workload needs them."""
    rows: list[int] = []
    ins: list[int] = []
    outs: list[int] = []
    later: list[tuple[tuple[int, int], ...]] = []
    for i, (row, n_in, n_reply) in enumerate(
        zip(dataset.rows, input_counts, reply_counts, strict=True)
    ):
        if options.max_input_tokens is not None and n_in > options.max_input_tokens:
            continue
        out = options.output_tokens or row.output_tokens or n_reply or DEFAULT_OUTPUT_TOKENS
        if options.max_output_tokens is not None:
            out = min(out, options.max_output_tokens)
        rows.append(i)
        ins.append(_clip(n_in))
        outs.append(_clip(out))
        if followup_counts:
            later.append(tuple((_clip(m), _clip(_out(options, r))) for m, r in followup_counts[i]))
    if not rows:
        raise ConfigError(
            "max_input_tokens",
            options.max_input_tokens,
            f"every prompt of {dataset.path} is longer ({counted_by})",
        )
    skipped = len(dataset.rows) - len(rows)
    return DatasetLengths(
        dataset, tuple(rows), tuple(ins), tuple(outs), counted_by, skipped, options, tuple(later)
    )


def _clip(tokens: int) -> int:
    return min(max(tokens, 1), MAX_LENGTH_TOKENS)


def _out(options: DatasetOptions, reply: int | None) -> int:
    out = options.output_tokens or reply or DEFAULT_OUTPUT_TOKENS
    return out if options.max_output_tokens is None else min(out, options.max_output_tokens)


def estimated_lengths(dataset: Dataset, options: DatasetOptions) -> DatasetLengths:
    """`dataset_lengths` with the characters-per-token estimate (the simulator's counter)."""
    ins = [estimate_tokens(row.prompt) for row in dataset.rows]
    replies = [None if row.reply is None else estimate_tokens(row.reply) for row in dataset.rows]
    later = [
        [(estimate_tokens(m), estimate_tokens(r)) for m, r in row.followups] for row in dataset.rows
    ]
    return dataset_lengths(dataset, options, ins, replies, ESTIMATE, later)


def load_dataset_lengths(path: str | Path, options: DatasetOptions | None = None) -> DatasetLengths:
    """Read `path` and count its lengths with the estimate."""
    return estimated_lengths(read_dataset(path), options or DatasetOptions())
