"""Prometheus text (telemetry.prometheus_text): parsing never raises; NaN/±Inf stay in the
metrics where the format allows them; samples hold only finite readings >= 0."""

from __future__ import annotations

import math
from dataclasses import fields
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tokenprobe.records import ServerSample, TelemetrySample
from tokenprobe.telemetry.prometheus_text import gpu_samples, parse_exposition, server_sample

from .conftest import FUZZ, mutated_bytes, terminates

DATA = Path(__file__).parents[1] / "data" / "telemetry"
SCRAPES = [
    (DATA / name).read_text()
    for name in (
        "dcgm_exporter_scrape.txt",
        "real_public_dcgm_exporter_a100_mig_busy.txt",
        "real_public_vllm_v1_metrics_qwen25_05b_idle.txt",
        "real_public_sglang_metrics_llama31_8b_overload.txt",
    )
]
VALUES = ["NaN", "+Inf", "-Inf", "1e999", "-5", "1e300", "0x10", "", "1_000", "٣", "nan(0)"]
NAMES = ["DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "sglang:token_usage"]
NAMES += ["vllm:num_requests_running", "vllm:kv_cache_usage_perc"]
LABELS = ['gpu="0"', 'gpu="²"', 'gpu="٣"', 'gpu="99999999999999"', 'gpu=""', 'GPU_I_ID="1"']


@st.composite
def hostile_scrapes(draw: st.DrawFn) -> str:
    lines = draw(st.sampled_from(SCRAPES)).splitlines()
    for _ in range(draw(st.integers(min_value=1, max_value=6))):
        i = draw(st.integers(min_value=0, max_value=len(lines) - 1))
        name = draw(st.sampled_from(NAMES))
        label = draw(st.sampled_from(LABELS))
        value = draw(st.one_of(st.sampled_from(VALUES), st.text(max_size=6)))
        ts = draw(st.sampled_from(["", " 1700000000000", " -1", " " + "9" * 30]))
        lines[i] = f"{name}{{{label}}} {value}{ts}"
    return "\n".join(lines)


def _check(text: str) -> None:
    with terminates():
        parse_exposition(text)
        for sample in gpu_samples(text, 1.0):
            for f in fields(TelemetrySample):
                value = getattr(sample, f.name)
                assert value is None or (math.isfinite(value) and value >= 0), (f.name, value)
        server = server_sample(text, 1.0)
        for f in fields(ServerSample):
            value = getattr(server, f.name)
            if isinstance(value, float):
                assert math.isfinite(value) and value >= 0, (f.name, value)


@FUZZ
@given(text=hostile_scrapes())
def test_hostile_lines(text: str) -> None:
    _check(text)


@FUZZ
@given(data=st.one_of(st.binary(max_size=300), mutated_bytes(SCRAPES[0].encode()[:3000])))
def test_random_and_mutated_text(data: bytes) -> None:
    _check(data.decode("utf-8", errors="replace"))


def test_nan_and_inf_are_kept_where_the_format_allows_them() -> None:
    text = 'x_bucket{le="+Inf"} 3\nx_gauge NaN\nDCGM_FI_DEV_POWER_USAGE{gpu="0"} +Inf\n'
    values = [m.value for m in parse_exposition(text).metrics]
    assert values[0] == 3 and math.isnan(values[1]) and values[2] == math.inf
    assert gpu_samples(text, 0.0) == []  # an infinite power is no reading


def test_a_long_line_is_skipped_and_counted() -> None:
    text = "a " + "{" * 100_000 + "\nb 1\n"
    with terminates():
        result = parse_exposition(text)
    assert [m.name for m in result.metrics] == ["b"] and result.skipped_lines == 1
