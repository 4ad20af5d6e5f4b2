"""Multi-turn conversations: `turns` user turns, each sent `think_s` after the previous reply ended.

A conversation's first turn arrives by the workload's arrival process (closed loop: a user starts
the next conversation when the last one's final reply ends); turn t > 0 is sent `think_s` after
turn t-1 finished, carrying the whole history: its input is every earlier message and reply plus
its own new message, input_t = sum_{u<t} (message_u + output_u) + message_t, as a chat client
resends the conversation (the shape of vLLM's and SGLang's multi-turn benchmarks, e.g.
vllm-project/vllm: benchmarks/multi_turn/benchmark_serving_multi_turn.py). Message lengths are
drawn from the workload's input distribution and reply lengths from its output distribution, one
per turn; the shared prefix (a system prompt) opens the first message and so every turn.

`num_requests` counts requests (turns), so a workload file round-trips: ceil(num_requests /
turns) conversations, the last one shorter when they do not divide. With a dataset, a
conversation replays a row's own turns (ShareGPT: its later human/gpt exchanges, at most
`turns`; a row with fewer makes a shorter one), conversations following until num_requests.
A follow-up turn's `arrival_s` in the generated list is its conversation's start (a lower
bound); the simulator and the load generator send it when its previous turn has finished
(`RequestSpec.turn` > 0).

The simulator prices each follow-up's prefill over its whole history: it does not model the
server finding the previous turn's KV in its prefix cache (vLLM may, while the blocks survive),
so measured TTFT of follow-ups can be below simulated; the shared system prefix is modelled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tokenprobe.errors import ConfigError
from tokenprobe.workload.checks import MAX_LENGTH_TOKENS, is_count, nonnegative
from tokenprobe.workload.datasets import DatasetLengths
from tokenprobe.workload.request import RequestSpec

MAX_TURNS = 1000
MAX_THINK_S = 86_400.0  # a day: beyond, no run would wait for it


@dataclass(frozen=True, slots=True)
class Conversation:
    """`turns` user turns per conversation, `think_s` between a reply and the next turn."""

    turns: int = 1
    think_s: float = 0.0

    def __post_init__(self) -> None:
        if not is_count(self.turns, 1, MAX_TURNS):
            raise ConfigError("conversation.turns", self.turns, f"an integer in [1, {MAX_TURNS}]")
        nonnegative("conversation.think_s", self.think_s, MAX_THINK_S)

    @property
    def multi_turn(self) -> bool:
        return self.turns > 1


def conversation_requests(
    conversation: Conversation,
    starts_s: list[float],
    messages: list[int],
    outputs: list[int],
    groups: list[int],
    prefix_tokens: int,
) -> list[RequestSpec]:
    """The turns of len(starts_s) conversations, turn after turn (ids "0", "1", ... in order)."""
    turns, n = conversation.turns, len(messages)
    specs: list[RequestSpec] = []
    for c, start in enumerate(starts_s):
        history = 0
        for t in range(turns):
            i = c * turns + t
            if i >= n:
                break
            tokens = min(history + messages[i], MAX_LENGTH_TOKENS)
            prefix = min(prefix_tokens, tokens)
            think = conversation.think_s if t else 0.0
            specs.append(
                RequestSpec(str(i), start, tokens, outputs[i], prefix, groups[c], -1, t, think)
            )
            history = tokens + outputs[i]
    return specs


def dataset_conversation_requests(
    conversation: Conversation,
    starts_s: list[float],
    lengths: DatasetLengths,
    groups: list[int],
    prefix_tokens: int,
    n: int,
) -> list[RequestSpec]:
    """n requests of dataset conversations: conversation c replays kept row c mod rows (file
    order), its first exchange and up to `turns` - 1 later ones (ShareGPT's own turns: a row
    with fewer makes a shorter conversation); the shared prefix opens the first message."""
    specs: list[RequestSpec] = []
    k = len(lengths.rows)
    for c, start in enumerate(starts_s):
        j = c % k
        later = lengths.followups[j] if lengths.followups else ()
        turns = [(lengths.input_tokens[j] + prefix_tokens, lengths.output_tokens[j])]
        turns += list(later[: conversation.turns - 1])
        history = 0
        for t, (message, output) in enumerate(turns):
            if len(specs) == n:
                return specs
            tokens = min(history + message, MAX_LENGTH_TOKENS)
            think = conversation.think_s if t else 0.0
            i = len(specs)
            specs.append(
                RequestSpec(
                    str(i), start, tokens, output, min(prefix_tokens, tokens), groups[c],
                    lengths.rows[j], t, think,
                )
            )  # fmt: skip
            history = tokens + output
    return specs


def conversations_for(turns: int, n: int) -> int:
    return math.ceil(n / turns)


def draw_groups(rng: np.random.Generator, groups: int, n: int) -> list[int]:
    """Prefix groups of n requests (or conversations): uniform; drawn only if there are several."""
    return rng.integers(0, groups, n).tolist() if groups > 1 else [0] * n
