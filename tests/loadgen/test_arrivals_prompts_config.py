"""Synthetic prompts fitted to a tokenizer, shared prefixes, and config validation (arrivals and
datasets: tests/test_workload.py, tests/test_datasets.py)."""

from __future__ import annotations

import asyncio

import pytest

from tokenprobe.errors import ConfigError
from tokenprobe.loadgen import BenchConfig
from tokenprobe.loadgen.prompts import fit_prompt, synthetic_prompts, synthetic_text


def _word_tokenizer(extra: int):
    """A tokenizer that counts words plus `extra` special tokens, and the prefix as 2 tokens."""

    async def count(text: str) -> int | None:
        return len(text.split()) + 1 + extra

    return count


def test_fit_prompt_corrects_the_word_count_until_the_tokenizer_agrees():
    item = asyncio.run(fit_prompt(7, 20, seed=1, tokenize=_word_tokenizer(extra=3)))
    assert item.input_tokens == 20
    assert item.prompt.startswith("7:") and len(item.prompt.split()) == 20 - 4


def test_synthetic_prompts_are_distinct_and_seeded():
    items, verified = asyncio.run(synthetic_prompts(5, 12, 0, _word_tokenizer(0)))
    assert verified and len({i.prompt for i in items}) == 5
    assert synthetic_text(3, 8, seed=0) == synthetic_text(3, 8, seed=0) != synthetic_text(3, 8, 1)


def test_without_a_tokenizer_prompts_are_marked_unverified():
    async def none(text: str) -> int | None:
        return None

    items, verified = asyncio.run(synthetic_prompts(3, 12, 0, none))
    assert not verified and all(i.input_tokens is None for i in items)


def test_too_short_input_is_a_config_error():
    with pytest.raises(ConfigError, match="input_tokens"):
        asyncio.run(fit_prompt(12345, 1, 0, _word_tokenizer(0)))


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"concurrency": None}, "mode"),
        ({"rate_per_s": 2.0}, "mode"),
        ({"concurrency": 0}, "concurrency"),
        ({"num_requests": None}, "stop"),
        ({"duration_s": 1.0}, "stop"),
        ({"input_tokens": None}, "input_tokens"),
        ({"dataset": "/nonexistent.jsonl", "input_tokens": None}, "dataset"),
        ({"endpoint": "embeddings"}, "endpoint"),
        ({"timeout_s": 0.0}, "timeout_s"),
        ({"burstiness": 0.0}, "burstiness"),
        ({"url": "localhost:8000"}, "url"),
        ({"max_input_tokens": 5}, "max_input_tokens"),  # only with a dataset
        ({"max_output_tokens": 5}, "max_output_tokens"),
        ({"workload_file": "/nonexistent.toml", "input_tokens": None}, "concurrency"),
        (
            {
                "workload_file": "/nonexistent.toml",
                "concurrency": None,
                "num_requests": None,
                "input_tokens": None,
            },
            "workload",
        ),
    ],
)
def test_config_rejects_bad_values_naming_the_field(changes: dict[str, object], field: str):
    base: dict[str, object] = {"url": "http://h/v1", "model": "m", "concurrency": 1}
    base.update(num_requests=1, input_tokens=8)
    base.update(changes)
    with pytest.raises(ConfigError) as info:
        BenchConfig(**base)  # type: ignore[arg-type]
    assert info.value.field == field


def test_api_key_comes_from_the_environment_only(monkeypatch: pytest.MonkeyPatch):
    config = BenchConfig(
        url="http://h/v1",
        model="m",
        concurrency=1,
        num_requests=1,
        input_tokens=8,
        api_key_env="TP_KEY",
    )
    monkeypatch.delenv("TP_KEY", raising=False)
    with pytest.raises(ConfigError, match="unset"):
        config.api_key()
    monkeypatch.setenv("TP_KEY", "k-1")
    assert config.api_key() == "k-1" and "k-1" not in str(config.to_dict())
