"""Named unit factors, the one clock, and the few conversions allowed at the edges.

Inside tokenprobe every quantity is a plain float in SI base units (s, bytes, FLOP, W, J) and the
unit is the suffix of its name. Decimal prefixes (KILO..PETA) are for datasheet figures (GB/s,
TFLOP/s); binary prefixes (KiB..TiB) are for memory sizes that really are powers of two.
"""

from __future__ import annotations

import time

KILO = 1e3
MEGA = 1e6
GIGA = 1e9
TERA = 1e12
PETA = 1e15

MILLI = 1e-3
MICRO = 1e-6
NANO = 1e-9
PICO = 1e-12

KiB = 2**10
MiB = 2**20
GiB = 2**30
TiB = 2**40

BITS_PER_BYTE = 8
SECONDS_PER_HOUR = 3600.0
JOULES_PER_KWH = 3.6e6


def now_s() -> float:
    """The one monotonic clock of tokenprobe (token timestamps and telemetry alike)."""
    return time.perf_counter()


def wall_s() -> float:
    """Wall-clock seconds since the epoch: one anchor per run, for humans only."""
    return time.time()


def j_to_kwh(energy_j: float) -> float:
    return energy_j / JOULES_PER_KWH


def fmt_bytes(n_bytes: float) -> str:
    """Human string with binary prefixes (memory sizes)."""
    for factor, name in ((TiB, "TiB"), (GiB, "GiB"), (MiB, "MiB"), (KiB, "KiB")):
        if abs(n_bytes) >= factor:
            return f"{n_bytes / factor:.2f} {name}"
    return f"{n_bytes:.0f} B"


def fmt_si(value: float, unit: str) -> str:
    """Human string with decimal prefixes: fmt_si(3.35e12, 'B/s') -> '3.35 TB/s'."""
    for factor, prefix in ((PETA, "P"), (TERA, "T"), (GIGA, "G"), (MEGA, "M"), (KILO, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def fmt_s(seconds: float) -> str:
    """Human duration: µs, ms or s."""
    if abs(seconds) < MILLI:
        return f"{seconds / MICRO:.1f} µs"
    if abs(seconds) < 1.0:
        return f"{seconds / MILLI:.2f} ms"
    return f"{seconds:.3f} s"
