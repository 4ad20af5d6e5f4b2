"""Bytes a request puts on the network, per request and per streamed token (E9).

Sizes are measured on real OpenAI-format payloads built here (not guessed): a
`/v1/chat/completions` request body and one streamed `chat.completion.chunk` SSE event as vLLM
and llama.cpp's server send them, plus HTTP and TCP/IP framing:
- text is ~4 characters (bytes, for English) per token (OpenAI's tokenizer guide: "one token
  generally corresponds to ~4 characters of text for common English text");
- every SSE event `data: {json}\\n\\n` travels in its own TCP segment (servers flush per token,
  Nagle off): + 40 B TCP/IPv4 + 14 B Ethernet + 12 B options per segment; with TLS + 29 B record
  overhead (5 header + 8 explicit nonce + 16 GCM tag).
"""

from __future__ import annotations

import functools
import json

from tokenprobe.workload import CHARS_PER_TOKEN  # the one characters-per-token figure

HTTP_REQUEST_HEADERS_BYTES = 250  # POST line, Host, Content-Type, Content-Length, Authorization
HTTP_RESPONSE_HEADERS_BYTES = 200  # status, content-type: text/event-stream, date, chunked
PACKET_OVERHEAD_BYTES = 40 + 14 + 12
TLS_RECORD_OVERHEAD_BYTES = 29


def request_bytes(input_tokens: int, model_name: str) -> float:
    """HTTP request of a chat completion with a prompt of `input_tokens`.

    The prompt is `CHARS_PER_TOKEN` plain ASCII characters per token, which JSON carries one byte
    each, so the body is the empty-prompt body plus that many bytes: computed in closed form, not
    by building the prompt (a 10^9-token prompt would be a 4 GB string)."""
    return (
        HTTP_REQUEST_HEADERS_BYTES + _empty_body_bytes(model_name) + CHARS_PER_TOKEN * input_tokens
    )


@functools.cache
def _empty_body_bytes(model_name: str) -> int:
    body = {
        "model": model_name,
        "messages": [{"role": "user", "content": ""}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 1024,
    }
    return len(json.dumps(body).encode())


@functools.cache
def sse_chunk_bytes(model_name: str) -> int:
    """One streamed token as an SSE event, the way OpenAI-compatible servers format it."""
    chunk = {
        "id": "chatcmpl-0123456789abcdef0123456789abcdef",
        "object": "chat.completion.chunk",
        "created": 1764374400,
        "model": model_name,
        "choices": [
            {
                "index": 0,
                "delta": {"content": "x" * CHARS_PER_TOKEN},
                "logprobs": None,
                "finish_reason": None,
            }
        ],
    }
    return len(f"data: {json.dumps(chunk)}\n\n".encode())


def response_bytes(output_tokens: int, model_name: str) -> float:
    return HTTP_RESPONSE_HEADERS_BYTES + output_tokens * sse_chunk_bytes(model_name)


def wire_bytes_per_token(model_name: str, tls: bool = False) -> float:
    """Bytes on the wire for one streamed token: the event plus its segment's framing."""
    extra = PACKET_OVERHEAD_BYTES + (TLS_RECORD_OVERHEAD_BYTES if tls else 0)
    return sse_chunk_bytes(model_name) + extra


def network_stage(
    input_tokens: int, output_tokens: int, model_name: str, nic_bytes_per_s: float, tls: bool
) -> dict[str, float]:
    """Bytes per request and per token, and the token rate one NIC could carry (E9).

    Payload is tiny next to any NIC: ~250 B per streamed token means a 100 Gb/s NIC carries
    tens of millions of tokens/s, far beyond what GPUs generate; the network matters through
    round-trip latency (TTFT) and packet rate, not bandwidth.
    """
    per_token = wire_bytes_per_token(model_name, tls)
    return {
        "request_bytes": request_bytes(input_tokens, model_name),
        "response_bytes": response_bytes(output_tokens, model_name),
        "wire_bytes_per_output_token": per_token,
        "nic_bytes_per_s": nic_bytes_per_s,
        "nic_max_output_tokens_per_s": nic_bytes_per_s / per_token,
    }
