"""bench's live progress line (on a TTY, not with --json)."""

from __future__ import annotations

from collections import deque

import numpy as np
from rich.table import Table

from tokenprobe.records import RequestRecord
from tokenprobe.units import MILLI, now_s

PROGRESS_WINDOW = 10_000  # the live TTFT/ITL percentiles are over the last this many values


class Progress:
    """The live display (on a TTY, not with --json): requests done of the total, errors, req/s,
    output tok/s, TTFT and ITL p50/p99 over the last PROGRESS_WINDOW values, elapsed and ETA
    (from the request count, or the time left of --duration-s). Called from the event loop."""

    def __init__(self, total: int | None, duration_s: float | None = None) -> None:
        self.total = total
        self.duration_s = duration_s
        self.done = 0
        self.errors = 0
        self.output_tokens = 0
        self.ttft_s: deque[float] = deque(maxlen=PROGRESS_WINDOW)
        self.itl_s: deque[float] = deque(maxlen=PROGRESS_WINDOW)
        self.start_s = now_s()

    def __call__(self, record: RequestRecord) -> None:
        self.done += 1
        if not record.ok:
            self.errors += 1
            return
        self.output_tokens += record.output_tokens
        if record.ttft_s is not None:
            self.ttft_s.append(record.ttft_s)
        self.itl_s.extend(record.itl_s)

    def eta_s(self, elapsed_s: float) -> float | None:
        """Seconds left: the duration's rest, or the remaining requests at the rate so far."""
        if self.duration_s is not None:
            return max(self.duration_s - elapsed_s, 0.0)
        if self.total is None or not self.done:
            return None
        return elapsed_s / self.done * max(self.total - self.done, 0)

    def cells(self) -> list[str]:
        elapsed = max(now_s() - self.start_s, 1e-9)
        total = "?" if self.total is None else str(self.total)
        eta = self.eta_s(elapsed)
        return [
            f"requests {self.done}/{total}",
            f"errors {self.errors}",
            f"{(self.done - self.errors) / elapsed:.2f} req/s",
            f"{self.output_tokens / elapsed:.1f} output tok/s",
            f"TTFT p50/p99 {_p50_p99_ms(self.ttft_s)} ms",
            f"ITL p50/p99 {_p50_p99_ms(self.itl_s)} ms",
            f"{elapsed:.1f} s",
            f"ETA {'?' if eta is None else f'{eta:.0f} s'}",
        ]

    def __rich__(self) -> Table:
        table = Table.grid(padding=(0, 2))
        table.add_row(*self.cells())
        return table


def _p50_p99_ms(values: deque[float]) -> str:
    if not values:
        return "-/-"
    p50, p99 = np.percentile(np.fromiter(values, dtype=np.float64), (50, 99))
    return f"{p50 / MILLI:.1f}/{p99 / MILLI:.1f}"
