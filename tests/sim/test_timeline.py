"""The engine's flat timeline reads back as the tuples it was given (engine.Timeline)."""

from __future__ import annotations

import pytest

from tokenprobe.sim.base import StepPlan
from tokenprobe.sim.engine import Timeline


def test_points_read_back_as_tuples_with_exact_counts() -> None:
    timeline = Timeline()
    timeline.add(0.0, None, 0, 0, 70.0)
    timeline.add(0.0, StepPlan(512, 512 * 513 / 2, 1, 3, 3000), 40, 2, 650.5)  # same instant
    timeline.point(0.02, 4, 41, 1, 700.0, 0, 4)
    big = 2**40 + 1  # a count far above any simulated one still reads back exact
    timeline.point(0.05, 4, big, 0, 90.0, 0, 4)
    rows = timeline.rows
    # the zero-length idle point at t = 0 was replaced by the step that started then
    assert len(rows) == len(timeline) == 3
    assert rows[0] == (0.0, 4, 40, 2, 650.5, 512, 3)
    assert rows[-1] == (0.05, 4, big, 0, 90.0, 0, 4)
    assert all(type(v) is int for row in rows for i, v in enumerate(row) if i not in (0, 4))
    assert rows[1:] == [rows[1], rows[2]] == list(rows)[1:]
    with pytest.raises(IndexError):
        rows[3]
