"""RequestSpec: the shape of one request of a workload (what the simulator runs, bench sends)."""

from __future__ import annotations

from typing import NamedTuple


class RequestSpec(NamedTuple):
    """One request to send: when (s after the run starts) and how many tokens in and out.

    `prefix_tokens` of the prompt are shared with every other request of the same
    `prefix_group` (a common system prompt), which prefix caching may reuse. `item` is the
    row of the workload's dataset the request takes its prompt from (-1: a synthetic prompt).
    `turn` > 0: a conversation's follow-up, sent `think_s` after the request before it in the
    list (its previous turn) finished, whatever `arrival_s` says (`workload.conversation`).
    A NamedTuple (immutable, and cheap to build 10^5 times for a simulation).
    """

    request_id: str
    arrival_s: float
    input_tokens: int
    output_tokens: int
    prefix_tokens: int = 0
    prefix_group: int = 0
    item: int = -1
    turn: int = 0
    think_s: float = 0.0
