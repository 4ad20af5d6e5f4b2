"""Arrival schedules, synthetic prompts fitted to a tokenizer, datasets and config validation."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from tokenprobe.errors import ConfigError, SchemaError
from tokenprobe.loadgen import BenchConfig, load_dataset
from tokenprobe.loadgen.arrivals import arrival_times_s
from tokenprobe.loadgen.prompts import fit_prompt, synthetic_prompts, synthetic_text


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_gamma_gaps_have_mean_one_over_rate_and_cv_one_over_sqrt_k(burstiness: float):
    times = arrival_times_s(50.0, burstiness, np.random.default_rng(3), count=40_001)
    gaps = np.diff(times)
    assert times[0] == 0.0 and np.all(gaps >= 0)
    assert gaps.mean() == pytest.approx(1 / 50.0, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(burstiness**-0.5, rel=0.05)


def test_arrivals_until_a_duration_and_replay_by_seed():
    a = arrival_times_s(100.0, 1.0, np.random.default_rng(1), until_s=5.0)
    b = arrival_times_s(100.0, 1.0, np.random.default_rng(1), until_s=5.0)
    assert np.array_equal(a, b) and a[-1] < 5.0 and 400 < a.size < 600


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


def test_dataset_reads_prompts_and_rejects_bad_lines(tmp_path: Path):
    good = tmp_path / "good.jsonl"
    good.write_text('{"prompt": "a"}\n\n{"prompt": "b", "output_tokens": 7}\n')
    assert [(i.prompt, i.output_tokens) for i in load_dataset(good)] == [("a", None), ("b", 7)]
    for text, needle in [
        ('{"prompt": ""}\n', "non-empty"),
        ('{"prompt": "a", "output_tokens": 0}\n', "output_tokens"),
        ("[1]\n", "JSON object"),
    ]:
        bad = tmp_path / "bad.jsonl"
        bad.write_text(text)
        with pytest.raises(SchemaError, match=needle):
            load_dataset(bad)


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
