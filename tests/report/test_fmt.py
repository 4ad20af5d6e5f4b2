"""The one number formatter of the reports: never scientific notation, 3 significant digits (no
digit of the integer part dropped), thousands separators, "-" for what is not a number."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenprobe.report import fmt


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (22150.3, "22,150"),
        (460.4, "460"),
        (39.26, "39.3"),
        (4.5612, "4.56"),
        (0.0123456, "0.0123"),
        (9.996, "10.0"),
        (99.96, "100"),
        (1530, "1,530"),
        (0, "0"),
        (-3.456, "-3.46"),
    ],
)
def test_num_examples(value: float, text: str) -> None:
    assert fmt.num(value) == text


@pytest.mark.parametrize("value", [None, "12", True, math.nan, math.inf, [1.0]])
def test_what_is_not_a_finite_number_is_a_dash(value: object) -> None:
    assert fmt.num(value) == "-" and fmt.ms(value) == "-" and fmt.pct(value) == "-"


def test_ms_and_pct_units() -> None:
    assert fmt.ms(22.15) == "22,150" and fmt.ms(0.0392, unit=True) == "39.2 ms"
    assert fmt.pct(0.4567) == "45.7%"


@given(st.floats(min_value=-1e12, max_value=1e12, allow_nan=False).filter(lambda v: v != 0))
def test_num_reads_back_within_half_a_percent_and_never_in_e_notation(value: float) -> None:
    text = fmt.num(value)
    assert "e" not in text.lower()
    back = float(text.replace(",", ""))
    if abs(value) >= 1e-4:  # tiny values keep 3 significant digits too, but we stop checking
        assert back == pytest.approx(value, rel=5e-3, abs=1e-9)
    if abs(back) >= 1000:
        assert "," in text
