"""Stages outside the GPU: HTTP/JSON/TLS, tokenization, detokenization, SSE streaming (E5, E8).

Per request, the API server's CPU does (OpenAI-compatible servers such as vLLM's):

    cpu_s = http_request_s + request_bytes / json_bytes_per_s + tls_s
          + chat_template_s + messages x chat_template_s_per_message
            + prompt_chars x chat_template_s_per_char
          + input_tokens / tokenizer_tokens_per_s
          + output_tokens · (detokenize_s_per_token + sse_chunk_s)

split into what a request costs before it reaches the engine (`admission_cpu_s`: HTTP, JSON,
TLS, chat template, tokenizer) and what each streamed token costs after the engine produced it
(`token_cpu_s`: detokenize, SSE chunk, its TLS bytes). All of it runs in ONE API-server process:
vLLM V1's API server is a single asyncio (uvloop) process that parses the request, tokenizes it
(its input processor), hands it to the engine-core process over ZMQ, and runs AsyncLLM's
`output_handler` task, whose OutputProcessor detokenizes every new token before the request's
generator serialises its SSE chunk (vllm-project/vllm@00080ee1:vllm/v1/engine/async_llm.py,
`generate`, `_run_output_handler`; docs/design/arch_overview.md@03f97cce: "By default, there is
1 API server process ... configured with the `--api-server-count` flag"). The GIL keeps one
process on one core, so the front end saturates at

    max_requests_per_s = processes / cpu_s          (`host_stage`)

with `processes` = `--api-server-count` (vLLM's default 1; `DEFAULT_API_SERVER_PROCESSES`),
capped by the cores left over by the engine-core process and one worker per GPU (each a busy
loop on its own core, arch_overview.md's process table). All CPU seconds are on the reference core
the defaults below describe; a host's `cpu_core_speed` (hardware.HostSpec: relative single-thread
speed, 1.0 = that core) divides them. The engine core's own per-step CPU work (scheduling,
sampling) is not here: it is `Efficiency.step_overhead_s` / `seq_overhead_s` in every step's time
(cost/step.py `host_time_s`). Parameters and where their defaults come from (all are meant to be
replaced by measurements on the user's host: `benchmarks/host_costs.py` measures JSON parsing,
SSE chunk serialisation and a real BPE tokenizer (llama.cpp's, through its /tokenize endpoint)
on the machine it runs on; on this project's 2-core dev box: ~1 GB/s JSON of a plain-ASCII
prompt, 8.3 µs per chunk, 1.7e5 tokens/s for llama.cpp's tokenizer with its HTTP round trip,
a lower bound; pass it with `tokenprobe estimate --tokenizer-tokens-per-s`):
- tokenizer 1e6 tokens/s per core: Hugging Face `tokenizers` (Rust BPE) README, "less than 20
  seconds to tokenize a GB of text" ≈ 1.2e7 tokens/s on a many-core server, ~1e6 per core.
- detokenization 5 µs per token: incremental detokenization in vLLM's output processor
  (`detokenizer_utils.detokenize_incrementally`, Python, per token and per request).
- HTTP request handling 300 µs: uvicorn + FastAPI + pydantic request validation of an
  OpenAI-style body (uvicorn's own benchmarks reach 10-20k trivial requests/s per core;
  validation and routing of a completions request cost several times that).
- chat template 130 µs per request + 7 µs per message + 0.2 ns per character of message text
  (`messages_per_request` 1 by default; 4 characters a token, cost.network): vLLM's chat
  endpoint renders the model's Jinja template on every request (`apply_hf_chat_template`,
  transformers' sandboxed environment, compiled once) before tokenizing the result.
  `benchmarks/chat_template_cost.py` renders a Llama-3.1-style template with jinja2 3.1.6's
  sandboxed environment on 1-32 messages of 50-8,000 characters and fits the three terms; on
  this project's 2-core dev box, three runs: 118-152 µs per render, 5.3-9.0 µs per message,
  0.04-0.35 ns per character (the template's `trim` and concatenation are C string work). A
  model's own template with tools or a long system block costs more per render: measure it.
- SSE chunk 30 µs: serialising one `chat.completion.chunk` JSON object and writing it (vLLM's
  API server streams one chunk per token).
- JSON parsing 300 MB/s (CPython `json`; orjson is ~3x faster).
- TLS: one handshake per connection (ECDHE-P256 + RSA-2048 signature ~1 ms of CPU, OpenSSL
  `speed`), amortised over `requests_per_connection` keep-alive requests, and AES-GCM at
  2 GB/s per core for the bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from tokenprobe.cost.network import request_bytes, response_bytes
from tokenprobe.errors import ConfigError
from tokenprobe.files import finite
from tokenprobe.units import GIGA, MEGA, MICRO, MILLI, NANO
from tokenprobe.workload import CHARS_PER_TOKEN

DEFAULT_ENGINE_INIT_S = 20.0  # engine start-up after the weights are in: cost/io.py cites it
# vLLM's `--api-server-count` default (docs/design/arch_overview.md@03f97cce, process table)
DEFAULT_API_SERVER_PROCESSES = 1
MAX_API_SERVER_PROCESSES = 4096


@dataclass(frozen=True, slots=True)
class HostModel:
    tokenizer_tokens_per_s: float = 1.0 * MEGA
    detokenize_s_per_token: float = 5 * MICRO
    http_request_s: float = 300 * MICRO
    sse_chunk_s: float = 30 * MICRO
    json_bytes_per_s: float = 300 * MEGA
    chat_template_s: float = 130 * MICRO
    chat_template_s_per_message: float = 7 * MICRO
    chat_template_s_per_char: float = 0.2 * NANO
    messages_per_request: float = 1.0
    tls: bool = False
    tls_handshake_s: float = 1 * MILLI
    tls_bytes_per_s: float = 2 * GIGA
    requests_per_connection: float = 100.0
    network_rtt_s: float = 0.0
    # model loading (cost/io.py): None reads the checkpoint at the host's NVMe speed; network
    # or object storage is slower (give its bandwidth)
    storage_bytes_per_s: float | None = None
    engine_init_s: float = DEFAULT_ENGINE_INIT_S

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None and f.name == "storage_bytes_per_s":
                continue
            if f.name == "tls":
                if not isinstance(value, bool):
                    raise ConfigError("host.tls", value, "true or false")
                continue
            value = finite(f"host.{f.name}", value)
            object.__setattr__(self, f.name, value)
            if not value >= 0 or (f.name.endswith("_per_s") and value <= 0):
                raise ConfigError(f"host.{f.name}", value, "a positive number")
        if self.messages_per_request < 1:
            raise ConfigError("host.messages_per_request", self.messages_per_request, ">= 1")
        if self.requests_per_connection < 1:
            raise ConfigError("host.requests_per_connection", self.requests_per_connection, ">= 1")

    def tokenize_s(self, tokens: int) -> float:
        return tokens / self.tokenizer_tokens_per_s

    def chat_template_cpu_s(self, input_tokens: int) -> float:
        """Rendering the chat template of a request of `input_tokens` prompt tokens."""
        return (
            self.chat_template_s
            + self.messages_per_request * self.chat_template_s_per_message
            + CHARS_PER_TOKEN * input_tokens * self.chat_template_s_per_char
        )

    def network_s(self) -> float:
        return self.network_rtt_s

    def admission_cpu_s(self, input_tokens: int, model_name: str) -> float:
        """CPU seconds of a request before the engine sees it: HTTP + JSON + TLS + chat template
        + tokenizer."""
        req_bytes = request_bytes(input_tokens, model_name)
        return (
            self.http_request_s
            + req_bytes / self.json_bytes_per_s
            + self._tls_s(req_bytes + response_bytes(0, model_name), handshake=True)
            + self.chat_template_cpu_s(input_tokens)
            + self.tokenize_s(input_tokens)
        )

    def token_cpu_s(self, model_name: str) -> float:
        """CPU seconds of one streamed output token: detokenize + its SSE chunk (+ TLS bytes)."""
        chunk = response_bytes(1, model_name) - response_bytes(0, model_name)
        return self.detokenize_s_per_token + self.sse_chunk_s + self._tls_s(chunk, handshake=False)

    def _tls_s(self, nbytes: float, *, handshake: bool) -> float:
        if not self.tls:
            return 0.0
        shake = self.tls_handshake_s / self.requests_per_connection if handshake else 0.0
        return shake + nbytes / self.tls_bytes_per_s

    def request_cpu_s(
        self, input_tokens: int, output_tokens: int, model_name: str
    ) -> dict[str, float]:
        """CPU seconds one request costs the API server, by part (their sum is
        admission_cpu_s + output_tokens x token_cpu_s)."""
        req_bytes = request_bytes(input_tokens, model_name)
        resp_bytes = response_bytes(output_tokens, model_name)
        return {
            "http_s": self.http_request_s,
            "json_s": req_bytes / self.json_bytes_per_s,
            "tls_s": self._tls_s(req_bytes + resp_bytes, handshake=True),
            "chat_template_s": self.chat_template_cpu_s(input_tokens),
            "tokenize_s": self.tokenize_s(input_tokens),
            "detokenize_s": output_tokens * self.detokenize_s_per_token,
            "stream_s": output_tokens * self.sse_chunk_s,
        }


def api_server_cores(cpu_cores: int, num_gpus: int) -> int:
    """Cores the API-server processes can have: the engine-core process and one worker process
    per GPU each spin on a core of their own (arch_overview.md's process table), at least 1."""
    return max(1, cpu_cores - 1 - num_gpus)


def check_processes(processes: object) -> int:
    """`--api-server-processes` as an integer in [1, MAX_API_SERVER_PROCESSES] (ConfigError)."""
    ok = isinstance(processes, int) and not isinstance(processes, bool)
    if not ok or not 1 <= processes <= MAX_API_SERVER_PROCESSES:  # type: ignore[operator]
        raise ConfigError(
            "api_server_processes", processes, f"an integer in [1, {MAX_API_SERVER_PROCESSES}]"
        )
    return processes  # type: ignore[return-value]


def host_stage(
    host: HostModel,
    cpu_cores: int,
    input_tokens: int,
    output_tokens: int,
    model_name: str,
    *,
    api_server_processes: int = DEFAULT_API_SERVER_PROCESSES,
    cpu_core_speed: float = 1.0,
    num_gpus: int = 1,
) -> dict[str, Any]:
    """Per-request CPU cost and the request rate at which the API-server processes saturate:
    processes (at most the cores left to them) / CPU seconds per request (E8)."""
    parts = {k: v / cpu_core_speed for k, v in host.request_cpu_s(
        input_tokens, output_tokens, model_name
    ).items()}  # fmt: skip
    cpu_s = sum(parts.values())
    serving = min(check_processes(api_server_processes), api_server_cores(cpu_cores, num_gpus))
    return {
        "cpu_s_per_request": cpu_s,
        "cpu_s_by_part": parts,
        "cpu_cores": float(cpu_cores),
        "cpu_core_speed": cpu_core_speed,
        "api_server_processes": api_server_processes,
        "api_server_processes_on_own_cores": serving,
        "requests_per_s_per_core": 1.0 / cpu_s,
        "max_requests_per_s": serving / cpu_s,
    }
