"""Sending on time: the open loop's wait until a request's arrival time, on the one clock."""

from __future__ import annotations

import asyncio

from tokenprobe.units import now_s

SPIN_S = 0.0012  # yield-wait the last 1.2 ms before a send (epoll is 1 ms coarse)


async def sleep_until(t_abs_s: float) -> None:
    """Return at `t_abs_s` on the one clock, within tens of µs when the loop is idle.

    asyncio's timers wake through epoll, whose timeout is in whole milliseconds rounded up
    (up to 1 ms late, 0.5 ms on average); so the last SPIN_S are spent yielding to the loop
    (`sleep(0)`), which keeps serving every stream meanwhile, until the time has come.
    """
    delay_s = t_abs_s - now_s()
    if delay_s > SPIN_S:
        await asyncio.sleep(delay_s - SPIN_S)
    while now_s() < t_abs_s:
        await asyncio.sleep(0)
