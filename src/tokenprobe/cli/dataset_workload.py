"""`simulate --dataset`: the Workload of a dataset file and simulate's arrival flags, the same one
`bench --dataset` builds (`loadgen.BenchConfig.workload`), so both run the same requests.

Token counts: the 4-characters-per-token estimate (`tokenprobe.workload.datasets`), or with
`--tokenizer-url` the server's /tokenize, as bench counts them against that server; the run's
config names which (`workload.dataset.counted_by`).
"""

from __future__ import annotations

from pathlib import Path

from tokenprobe.errors import ConfigError
from tokenprobe.workload import DatasetOptions, Workload, build_workload, load_dataset_lengths

DATASET_HELP = "Dataset: ShareGPT JSON/JSONL, OpenAI messages JSONL, prompt JSONL or CSV"
TOKENIZER_URL_HELP = "Count the dataset's tokens with this server's /tokenize (e.g. …/v1)"
MAX_INPUT_HELP = "With --dataset: skip prompts longer than this (tokens)"
MAX_OUTPUT_HELP = "With --dataset: clip reply lengths to this (tokens)"


def dataset_workload(
    dataset: Path | None,
    *,
    input_tokens: int | None,
    output_tokens: int | None,
    max_input_tokens: int | None,
    max_output_tokens: int | None,
    tokenizer_url: str | None,
    rate_per_s: float | None,
    burstiness: float,
    concurrency: int | None,
    offline: bool,
    num_requests: int,
) -> Workload | None:
    """The dataset's workload (None without `dataset`, whose own flags are then refused);
    `--output-tokens` is every request's length (vLLM's `--sharegpt-output-len`)."""
    if dataset is None:
        own: dict[str, object] = {"max_input_tokens": max_input_tokens}
        own |= {"max_output_tokens": max_output_tokens, "tokenizer_url": tokenizer_url}
        given = [k for k, v in own.items() if v is not None]
        if given:
            raise ConfigError(given[0], own[given[0]], "only with --dataset")
        return None
    if input_tokens is not None:
        raise ConfigError("input_tokens", input_tokens, "not with a dataset (it has prompts)")
    options = DatasetOptions(output_tokens, max_input_tokens, max_output_tokens)
    lengths = load_dataset_lengths(dataset, options)
    if tokenizer_url is not None:
        from tokenprobe.loadgen import count_dataset  # aiohttp: only when asked for

        lengths = count_dataset(tokenizer_url, lengths, num_requests)
    return build_workload(
        rate_per_s=rate_per_s,
        burstiness=burstiness,
        concurrency=concurrency,
        offline=offline,
        num_requests=num_requests,
        dataset=lengths,
    )
