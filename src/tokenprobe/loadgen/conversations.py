"""Multi-turn conversations against a server (`workload.conversation`): each follow-up carries
the conversation so far and is sent `think_s` after the previous reply ended.

Turn 0 is its prompt (shared prefix included); turn t > 0 sends every earlier prompt and the
reply the server streamed for it, then its own new message: on the completions endpoint as one
text (history + reply + "\\n" + message), on the chat endpoint as messages (user, assistant, ...,
user). The workload's lengths count the history as earlier input + earlier output + the new
message; the server's count can differ by the few tokens re-tokenizing a reply at its
boundaries merges or splits (and, on chat, by the template's tokens per message); the records
hold the server's own counts. A follow-up's `scheduled_s` is the previous turn's end plus the
think time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from tokenprobe.loadgen.client import StreamClient, WireRequest
from tokenprobe.loadgen.pacing import sleep_until
from tokenprobe.loadgen.sendplan import SendPlan
from tokenprobe.records import RequestRecord
from tokenprobe.units import now_s

Emit = Callable[[RequestRecord], None]


def conversation_turns(plan: SendPlan, first: int) -> list[int]:
    """The request indices of the conversation whose first turn is `first`."""
    turns = [first]
    while turns[-1] + 1 < len(plan.specs) and plan.specs[turns[-1] + 1].turn:
        turns.append(turns[-1] + 1)
    return turns


def starts(plan: SendPlan) -> list[int]:
    """The first turn of every conversation, in arrival order."""
    return [i for i, spec in enumerate(plan.specs) if not spec.turn]


async def run_conversation(
    client: StreamClient, plan: SendPlan, first: int, scheduled_s: float, emit: Emit
) -> None:
    """Send the conversation's turns one after the other (module docstring)."""
    text = ""
    messages: tuple[tuple[str, str], ...] = ()
    for i in conversation_turns(plan, first):
        spec, item = plan.specs[i], plan.prompt(i)
        if spec.turn:
            await asyncio.sleep(spec.think_s)
            scheduled_s = now_s() - client.t0_s
            text += "\n" + item.prompt
            messages += (("user", item.prompt),)
        else:
            text, messages = item.text, (("user", item.text),)
        request = WireRequest(str(i), text, spec.output_tokens, None, messages)
        record, reply = await client.send_keeping_text(request, scheduled_s)
        emit(record)
        text += reply
        messages += (("assistant", reply),)


async def run_conversations(
    client: StreamClient, plan: SendPlan, emit: Emit, max_concurrency: int | None
) -> None:
    """Multi-turn: closed loop, `concurrency` users each running conversations one after the
    other; open loop, each conversation started at its arrival (`loadgen.conversations`), at
    most `max_concurrency` conversations at once (one holds its slot through its think times)."""
    firsts = starts(plan)
    t0 = client.t0_s
    gate = asyncio.Semaphore(max_concurrency) if max_concurrency else None

    async def gated(first: int, scheduled_s: float) -> None:
        if gate is None:
            return await run_conversation(client, plan, first, scheduled_s, emit)
        async with gate:
            return await run_conversation(client, plan, first, scheduled_s, emit)

    async with asyncio.TaskGroup() as group:
        if plan.concurrency is None:
            for first in firsts:
                scheduled_s = plan.specs[first].arrival_s
                await sleep_until(t0 + scheduled_s)
                group.create_task(gated(first, scheduled_s))
            return
        queue = iter(firsts)

        async def user() -> None:
            for first in queue:
                await run_conversation(client, plan, first, now_s() - t0, emit)

        for _ in range(plan.concurrency):
            group.create_task(user())
