"""The simulator builds its records positionally (sim/result.py `build_records`, for speed): the
order it passes them in must stay RequestRecord's."""

from __future__ import annotations

from dataclasses import fields

from tokenprobe.records import RequestRecord
from tokenprobe.sim.result import RECORD_FIELDS


def test_records_are_built_in_the_field_order_of_request_record() -> None:
    assert tuple(f.name for f in fields(RequestRecord)) == RECORD_FIELDS
