"""Numbers for people: the ONE formatter of every number a report or the run browser shows.

- `num(x)`: 3 significant digits, but no digit of the integer part is dropped, and thousands
  separators: 0.0123, 4.56, 78.9, 460, 22,150, 1,234,567. Integers print whole (12, 1,530).
- `ms(seconds)`: the same for a duration shown in milliseconds (the report's latency unit).
- `pct(fraction)`: a percentage with 3 significant digits (0.4567 -> "45.7%").
- `duration(s)`, `si(x, unit)`, `size(bytes)`: the same digits with the unit that reads best.
Never scientific notation (`2.215e+04` reads badly); "-" for a value that is absent, not a
number, or not finite.
"""

from __future__ import annotations

import math
from typing import Any

from tokenprobe.units import GIGA, KILO, MEGA, MICRO, MILLI, PETA, TERA, GiB, KiB, MiB, TiB

MISSING = "-"


def _value(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return None
    return float(v)


def num(v: Any, unit: str = "") -> str:
    """3 significant digits (whole number from 100 up), thousands separators, optional unit."""
    x = _value(v)
    if x is None:
        return MISSING
    if isinstance(v, int):
        text = f"{v:,}"
    elif x == 0:
        text = "0"
    else:
        r = float(f"{x:.3g}")  # rounded first: 9.996 -> 10.0, 99.96 -> 100
        if abs(r) >= 100:
            text = f"{round(x):,}"
        else:
            text = f"{r:,.{max(0, 2 - math.floor(math.log10(abs(r))))}f}"
    return f"{text} {unit}" if unit else text


def ms(seconds: Any, unit: bool = False) -> str:
    """A duration in seconds shown in ms (`num` of seconds / 1e-3); "ms" appended if `unit`."""
    s = _value(seconds)
    return num(None if s is None else s / MILLI, "ms" if unit else "")


def pct(fraction: Any) -> str:
    """A fraction as a percentage, 3 significant digits."""
    f = _value(fraction)
    return MISSING if f is None else num(100 * f) + "%"


def duration(seconds: Any) -> str:
    """A duration in the unit that reads best (µs under 1 ms, ms under 1 s, else s), `num`."""
    s = _value(seconds)
    if s is None:
        return MISSING
    if abs(s) < MILLI and s != 0:
        return num(s / MICRO, "µs")
    if abs(s) < 1.0:
        return num(s / MILLI, "ms")
    return num(s, "s")


def si(value: Any, unit: str) -> str:
    """A value with a decimal prefix (k, M, G, T, P) and `num`'s digits: si(3.35e12, "B/s") ->
    "3.35 TB/s"."""
    x = _value(value)
    if x is None:
        return MISSING
    for factor, prefix in ((PETA, "P"), (TERA, "T"), (GIGA, "G"), (MEGA, "M"), (KILO, "k")):
        if abs(x) >= factor:
            return num(x / factor, prefix + unit)
    return num(x, unit)


def size(n_bytes: Any) -> str:
    """A memory size with binary prefixes (KiB, MiB, GiB, TiB), `num`'s digits."""
    x = _value(n_bytes)
    if x is None:
        return MISSING
    for factor, name in ((TiB, "TiB"), (GiB, "GiB"), (MiB, "MiB"), (KiB, "KiB")):
        if abs(x) >= factor:
            return num(x / factor, name)
    return num(round(x), "B")
