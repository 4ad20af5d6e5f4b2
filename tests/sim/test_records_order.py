"""The simulator builds its records positionally (sim/result.py `build_records`, for speed): the
order it passes them in must stay RequestRecord's."""

from __future__ import annotations

from dataclasses import fields

from tokenprobe.records import RequestRecord
from tokenprobe.sim.result import RECORD_FIELDS, new_record


def test_records_are_built_in_the_field_order_of_request_record() -> None:
    assert tuple(f.name for f in fields(RequestRecord)) == RECORD_FIELDS


def test_new_record_is_the_dataclass_record() -> None:
    """`new_record` (slots set directly) makes the record RequestRecord(...) makes: equal, of
    the same type, each field the very object passed; and RequestRecord still has no
    __post_init__ that the shortcut would skip."""
    times, extra = [1.5, 1.75], {"energy_j": 2.0}
    values = ("r1", 0.5, 0.625, 1.5, 1.75, 12, 2, times, 0.125, None, None, "sim", extra, None)
    made, built = new_record(*values), RequestRecord(*values)
    assert made == built and type(made) is RequestRecord
    assert made.token_times_s is times and made.extra is extra
    assert not hasattr(RequestRecord, "__post_init__")
    other = new_record("r2", *values[1:])
    assert other != built and other.request_id == "r2"
