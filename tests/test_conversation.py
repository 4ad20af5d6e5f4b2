"""Multi-turn conversations (workload/conversation.py) in the Workload and the simulator: the
history grows turn by turn, a follow-up arrives think_s after its previous turn ended, closed
loop users run conversations back to back, and a workload file round-trips."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

from tokenprobe.errors import ConfigError
from tokenprobe.sim import SchedulerConfig, run_workload
from tokenprobe.sim.kv import BlockPool
from tokenprobe.workload import (
    Arrival,
    Conversation,
    LengthDist,
    Workload,
    fixed,
    load_workload,
    workload_dict,
    workload_from_dict,
)


def _workload(arrival: Arrival, n: int = 7, turns: int = 3, think_s: float = 0.5) -> Workload:
    return Workload(
        arrival,
        input_len=LengthDist("uniform", low=20, high=40, name="input_tokens"),
        output_len=fixed(4, "output_tokens"),
        num_requests=n,
        conversation=Conversation(turns, think_s),
    )


def test_turns_carry_the_history_and_the_last_conversation_is_shorter() -> None:
    specs = _workload(Arrival("poisson", rate_per_s=2.0)).generate(np.random.default_rng(2))
    assert [s.request_id for s in specs] == [str(i) for i in range(7)]
    assert [s.turn for s in specs] == [0, 1, 2, 0, 1, 2, 0]  # ceil(7 / 3) = 3 conversations
    for before, spec in pairwise(specs):
        if spec.turn:  # input = the previous input + its 4 output tokens + a new 20..40 message
            message = spec.input_tokens - before.input_tokens - 4
            assert 20 <= message <= 40 and spec.think_s == 0.5
    starts = [s.arrival_s for s in specs if not s.turn]
    assert starts == sorted(starts) and starts[0] == 0.0


def _sim(workload: Workload) -> list:
    """The simulator with a fixed step time (10 ms, 1 J): timing follows from the events alone."""
    pool = BlockPool(10_000, 16, prefix_caching=True)
    result = run_workload(
        workload, lambda plan: (0.01, 1.0), pool, SchedulerConfig(), idle_w=0.0, seed=2
    )
    return sorted(result.records, key=lambda r: int(r.request_id))


def test_a_follow_up_arrives_think_s_after_its_previous_turn_finished() -> None:
    records = _sim(_workload(Arrival("poisson", rate_per_s=2.0)))
    specs = _workload(Arrival("poisson", rate_per_s=2.0)).generate(np.random.default_rng(2))
    for before, rec, spec in zip(records, records[1:], specs[1:], strict=False):
        if spec.turn:
            assert rec.scheduled_s == pytest.approx(before.finish_s + 0.5)
        assert rec.input_tokens == spec.input_tokens
    assert all(r.ok for r in records)


def test_closed_loop_users_run_their_conversations_back_to_back() -> None:
    records = _sim(_workload(Arrival("closed", concurrency=2), n=12, turns=3, think_s=0.0))
    assert len(records) == 12 and all(r.ok for r in records)
    # 4 conversations, 2 users: conversation 2 starts when one of the first two ended
    first_two_ends = sorted(records[i].finish_s for i in (2, 5))
    assert records[6].scheduled_s == pytest.approx(first_two_ends[0])


def test_a_workload_file_with_a_conversation_round_trips(tmp_path: Path) -> None:
    wf = tmp_path / "w.toml"
    wf.write_text(
        'num_requests = 9\n[arrival]\nkind = "offline"\n[conversation]\nturns = 3\nthink_s = 1.5\n'
    )
    wl = load_workload(wf)
    assert wl.conversation == Conversation(3, 1.5) and wl.size == 9
    again = workload_from_dict(workload_dict(wl), "doc", tmp_path)
    assert again.conversation == wl.conversation and again.size == 9
    with pytest.raises(ConfigError, match="turns"):
        Conversation(0)
    with pytest.raises(ConfigError, match="think_s"):
        Conversation(2, -1.0)
