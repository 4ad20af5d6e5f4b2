"""CPU cost of rendering a chat template, per request, per message and per character (issue 19).

vLLM's OpenAI server renders the model's Jinja chat template (`apply_hf_chat_template`, through
transformers' sandboxed Jinja environment, compiled once and cached) on every chat request,
before tokenizing the result. The cost is a constant per render (the environment's call, the
template's preamble), a constant per message (its loop body: header, filters, concatenation)
and a per-character part (`trim`, string building). This script renders a Llama-3.1-style
template (a header per message, the content trimmed, an end-of-turn token: the structure of
Meta's Llama 3.1 template, written here) with jinja2's sandboxed environment on requests of
1-32 messages of 50-8,000 characters, fits t = a + b x messages + c x characters by least
squares, and prints one JSON line: the three costs (pass them as cost/host.py HostModel's
`chat_template_s`, `chat_template_s_per_message`, `chat_template_s_per_char`).

Needs jinja2 (a dependency of transformers, not of tokenprobe): run it with an interpreter
that has it; without it, it prints {"skipped": ...}.
"""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np

TEMPLATE = (
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}"
    "{{- message['content'] | trim }}"
    "{{- '<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{%- endif %}"
)
WORDS = "The energy a token costs depends on batching, context length and arrivals. "


def _per_render_s(template: Any, messages: list[dict[str, str]], min_s: float = 0.2) -> float:
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < min_s:
        template.render(messages=messages, bos_token="<s>", add_generation_prompt=True)
        n += 1
    return (time.perf_counter() - start) / n


def measure() -> dict[str, Any]:
    try:
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        return {"skipped": "jinja2 is not installed in this interpreter"}
    template = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).from_string(
        TEMPLATE
    )
    rows, times = [], []
    for count in (1, 2, 8, 32):
        for chars in (50, 1000, 8000):
            text = (WORDS * (chars // len(WORDS) + 1))[:chars]
            roles = ("user", "assistant")
            messages = [{"role": roles[i % 2], "content": text} for i in range(count)]
            rows.append([1.0, count, count * chars])
            times.append(_per_render_s(template, messages))
    coef, *_ = np.linalg.lstsq(np.array(rows), np.array(times), rcond=None)
    fitted = np.array(rows) @ coef
    return {
        "chat_template_s": float(coef[0]),
        "chat_template_s_per_message": float(coef[1]),
        "chat_template_s_per_char": float(coef[2]),
        "max_relative_residual": float(np.max(np.abs(fitted - times) / np.array(times))),
        "renders": len(times),
    }


if __name__ == "__main__":
    print(json.dumps(measure()))
