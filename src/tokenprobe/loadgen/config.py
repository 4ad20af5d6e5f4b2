"""BenchConfig: one measured run's settings, validated where they enter.

Exactly one load mode: `concurrency` (closed loop: C requests in flight, the next sent when one
ends) or `rate_per_s` (open loop: arrivals with gamma-distributed gaps of mean 1/rate; shape
`burstiness` = 1 is Poisson, < 1 burstier, > 1 more regular; vLLM's `--burstiness`). Exactly one
stop rule: `num_requests` or `duration_s`. Prompts: synthetic ones of exactly `input_tokens`
tokens, or a `dataset` (ShareGPT, OpenAI messages, prompt JSONL or CSV: `tokenprobe.workload`).
These flags build a `Workload` (`workload()`, with `workload.build_workload`, the function
`simulate`'s flags go through); `workload_file` instead runs a workload file (TOML/JSON, as
`simulate --workload`: arrivals, lengths, shared prefixes, a dataset) and replaces them all.
With a dataset, `output_tokens` is every request's length (vLLM's `--sharegpt-output-len`),
`max_output_tokens` clips the dataset's reply lengths and `max_input_tokens` skips longer
prompts. The API key is `api_key` (held in memory, never written) or read at
run time from the environment variable named by `api_key_env` (only that name is written); a
key in the URL's userinfo or query works too (`loadgen.credentials`), and `to_dict` writes the
URL with it masked. `seed` None draws a fresh one per run (recorded in the run's config); give
it to replay the arrival schedule and the prompts' words.

Fresh prompts: unless `allow_prefix_reuse`, every synthetic prompt starts with a tag unique to
the run, the sweep point and the request (`loadgen.prompts`), so no request of a run, of a sweep
or of a rerun with the same seed is answered from the server's prefix cache. With
`allow_prefix_reuse` the prompts are exactly those of the seed (a replay, cache hits included).

`model` "" asks the server: the first model id of GET {url}/models (`loadgen.models`).
`slo_ttft_s` / `slo_tpot_s` are kept in the run's config, and its summary's goodput counts the
requests meeting them (`metrics.summarize`). Sampling: `temperature`, `top_p`, `top_k` and
`sampling_seed` (the server's sampler seed; `seed` is the workload's) are sent in every body
when given; `extra_body` (a JSON object) is merged into every body last, so it can override
any field but the prompt. `gpu` and `catalog_model` (catalog names: the GPU the server runs on,
and the model when the served name is not a catalog name) price the run's deployment in its
config, so that `diagnose --predict` can estimate and replay it.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tokenprobe.errors import ConfigError
from tokenprobe.hardware import get_gpu
from tokenprobe.loadgen.client import ENDPOINTS, Endpoint
from tokenprobe.loadgen.credentials import credentials, parse_url
from tokenprobe.model import get_model
from tokenprobe.workload import (
    MAX_LENGTH_TOKENS,
    MAX_REQUESTS,
    DatasetOptions,
    Workload,
    build_workload,
    load_dataset_lengths,
    load_workload,
)

# one asyncio task and one socket per request in flight: far above any server's batch (vLLM
# caps at 1024 sequences by default), below what the open-file limit and memory allow
MAX_CONCURRENCY = 100_000

DEFAULT_OUTPUT_TOKENS = 256  # as estimate, simulate, plan and compare assume


@dataclass(frozen=True, slots=True)
class BenchConfig:
    """Settings of one measured run (units in the names; see the module docstring)."""

    url: str
    model: str
    concurrency: int | None = None
    rate_per_s: float | None = None
    burstiness: float = 1.0
    max_concurrency: int | None = None
    num_requests: int | None = None
    duration_s: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    dataset: str | None = None
    workload_file: str | None = None
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    endpoint: Endpoint = "completions"
    warmup: int = 0
    timeout_s: float = 600.0
    api_key_env: str | None = None
    out: str | None = None
    seed: int | None = None
    ignore_eos: bool = True
    verify_input_tokens: bool = True
    allow_prefix_reuse: bool = False
    sweep_point: int = 0  # which point of a sweep (0 for a single run): part of the prompt tag
    slo_ttft_s: float | None = None
    slo_tpot_s: float | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    sampling_seed: int | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)
    gpu: str | None = None  # catalog names that price the run (records.RunConfig), checked
    catalog_model: str | None = None  # when given: the GPU served on, the model served
    api_key_value: str | None = field(default=None, repr=False)  # --api-key; never written

    def __post_init__(self) -> None:
        parse_url(self.url)
        if not isinstance(self.model, str):
            raise ConfigError("model", self.model, "the served model name ('' = ask the server)")
        if self.workload_file is not None:
            _check_workload_file(self)
        else:
            _check_mode(self)
            _check_stop(self)
            _check_prompts(self)
        if self.endpoint not in ENDPOINTS:
            raise ConfigError("endpoint", self.endpoint, f"one of {', '.join(ENDPOINTS)}")
        _positive_int("warmup", self.warmup, allow_zero=True)
        _positive_float("timeout_s", self.timeout_s)
        if self.seed is not None:
            _positive_int("seed", self.seed, allow_zero=True)
        if self.api_key_env is not None and not self.api_key_env:
            raise ConfigError("api_key_env", self.api_key_env, "the name of an env variable")
        if self.api_key_value is not None and self.api_key_env is not None:
            raise ConfigError("api_key", "***", "give --api-key or --api-key-env, not both")
        if self.api_key_value is not None and not self.api_key_value.strip():
            raise ConfigError("api_key", "", "an empty key")
        credentials(self.url, self.api_key_value)  # a key given twice is refused here
        _check_request_options(self)
        if self.gpu is not None:
            get_gpu(self.gpu)  # an unknown name is refused here, with the closest known names
        if self.catalog_model is not None:
            get_model(self.catalog_model)

    def workload(self, pool_requests: int = 1) -> Workload:
        """The Workload this run sends: the workload file's, or the flags' (`pool_requests`
        stands in for the request count of a run stopped by `duration_s`). A dataset's lengths
        are estimated here; the runner recounts them with the server's tokenizer."""
        if self.workload_file is not None:
            return load_workload(self.workload_file)
        options = DatasetOptions(self.output_tokens, self.max_input_tokens, self.max_output_tokens)
        dataset = None if self.dataset is None else load_dataset_lengths(self.dataset, options)
        return build_workload(
            input_tokens=self.input_tokens,
            output_tokens=(self.output_tokens or DEFAULT_OUTPUT_TOKENS)
            if dataset is None
            else None,
            rate_per_s=self.rate_per_s,
            burstiness=self.burstiness,
            concurrency=self.concurrency,
            num_requests=self.num_requests or pool_requests,
            dataset=dataset,
        )

    def request_fields(self) -> dict[str, Any]:
        """What every request body gets besides the prompt: the sampling flags that were given,
        then `extra_body` (merged last)."""
        sampling = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "seed": self.sampling_seed,
        }
        return {**{k: v for k, v in sampling.items() if v is not None}, **self.extra_body}

    def api_key(self) -> str | None:
        """The API key, given or from the environment (never stored in the config or on disk)."""
        if self.api_key_value is not None:
            return self.api_key_value
        if self.api_key_env is None:
            return None
        value = os.environ.get(self.api_key_env)
        if not value:
            raise ConfigError("api_key_env", self.api_key_env, "that variable is unset or empty")
        return value

    def secrets(self) -> tuple[str, ...]:
        """Every secret of this run (the key, the URL's userinfo and key-like query values)."""
        return credentials(self.url, self.api_key()).secrets

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready settings for the run folder: the URL masked, the key's variable name but
        never the key."""
        doc = asdict(self)
        del doc["api_key_value"]
        doc["url"] = credentials(self.url, None).shown_url
        return doc


def _check_workload_file(cfg: BenchConfig) -> None:
    """A workload file gives the arrivals, the lengths and the request count: no flag may too."""
    flags: tuple[str, ...] = ("concurrency", "rate_per_s", "num_requests", "duration_s")
    flags += ("input_tokens", "output_tokens", "dataset", "max_input_tokens", "max_output_tokens")
    given = [name for name in flags if getattr(cfg, name) is not None]
    if given:
        why = "not with --workload: the workload file sets the load and lengths"
        raise ConfigError(given[0], getattr(cfg, given[0]), why)
    if not Path(cfg.workload_file or "").is_file():
        raise ConfigError("workload", cfg.workload_file, "no such file")


def _check_mode(cfg: BenchConfig) -> None:
    if (cfg.concurrency is None) == (cfg.rate_per_s is None):
        raise ConfigError(
            "mode", (cfg.concurrency, cfg.rate_per_s), "give exactly one of concurrency, rate"
        )
    if cfg.concurrency is not None:
        _positive_int("concurrency", cfg.concurrency, hi=MAX_CONCURRENCY)
    if cfg.rate_per_s is not None:
        _positive_float("rate_per_s", cfg.rate_per_s)
    if not (math.isfinite(cfg.burstiness) and cfg.burstiness > 0):
        raise ConfigError("burstiness", cfg.burstiness, "a positive number (1 = Poisson)")
    if cfg.max_concurrency is not None:
        _positive_int("max_concurrency", cfg.max_concurrency, hi=MAX_CONCURRENCY)


def _check_stop(cfg: BenchConfig) -> None:
    if (cfg.num_requests is None) == (cfg.duration_s is None):
        raise ConfigError(
            "stop",
            (cfg.num_requests, cfg.duration_s),
            "give exactly one of num_requests, duration_s",
        )
    if cfg.num_requests is not None:
        _positive_int("num_requests", cfg.num_requests, hi=MAX_REQUESTS)
    if cfg.duration_s is not None:
        _positive_float("duration_s", cfg.duration_s)


def _check_prompts(cfg: BenchConfig) -> None:
    if cfg.dataset is not None and cfg.input_tokens is not None:
        raise ConfigError("input_tokens", cfg.input_tokens, "not with a dataset (it has prompts)")
    if cfg.dataset is None and cfg.input_tokens is None:
        raise ConfigError("input_tokens", None, "give input_tokens (synthetic prompts) or dataset")
    if cfg.input_tokens is not None:
        _positive_int("input_tokens", cfg.input_tokens, hi=MAX_LENGTH_TOKENS)
    for name in ("output_tokens", "max_input_tokens", "max_output_tokens"):
        if getattr(cfg, name) is not None:
            _positive_int(name, getattr(cfg, name), hi=MAX_LENGTH_TOKENS)
    for name in ("max_input_tokens", "max_output_tokens"):
        if cfg.dataset is None and getattr(cfg, name) is not None:
            raise ConfigError(
                name, getattr(cfg, name), "only with a dataset (it clips its lengths)"
            )
    if cfg.dataset is not None and not Path(cfg.dataset).is_file():
        raise ConfigError("dataset", cfg.dataset, "no such file")


def _check_request_options(cfg: BenchConfig) -> None:
    for name in ("slo_ttft_s", "slo_tpot_s"):
        value = getattr(cfg, name)
        if value is not None:
            _positive_float(name, value)
    if cfg.temperature is not None:
        _number_in("temperature", cfg.temperature, 0.0, 100.0)
    if cfg.top_p is not None:
        _number_in("top_p", cfg.top_p, 0.0, 1.0)
    if cfg.top_k is not None:
        _positive_int("top_k", cfg.top_k, allow_zero=True)
    if cfg.sampling_seed is not None:
        _positive_int("sampling_seed", cfg.sampling_seed, allow_zero=True)
    if not isinstance(cfg.extra_body, dict):
        raise ConfigError("extra_body", cfg.extra_body, "a JSON object")
    for key in ("prompt", "messages", "stream"):
        if key in cfg.extra_body:
            raise ConfigError(
                "extra_body", {key: "..."}, f"'{key}' is the load generator's own; drop it"
            )
    if cfg.sweep_point < 0:
        raise ConfigError("sweep_point", cfg.sweep_point, "an integer >= 0")


def _number_in(name: str, value: float, lo: float, hi: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= value <= hi:
        raise ConfigError(name, value, f"a number in [{lo:g}, {hi:g}]")


def _positive_int(name: str, value: int, allow_zero: bool = False, hi: int | None = None) -> None:
    low = 0 if allow_zero else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(name, value, f"an integer >= {low}")
    if hi is not None and value > hi:
        raise ConfigError(name, value, f"an integer in [{low}, {hi:,}] ")


def _positive_float(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(name, value, "a positive number")
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(name, value, "a positive finite number")
