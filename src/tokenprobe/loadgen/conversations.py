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
