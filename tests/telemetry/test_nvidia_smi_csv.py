"""nvidia-smi CSV import over the formats nvidia-smi prints (tests/data/telemetry, synthetic)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenprobe.errors import ConfigError, SchemaError
from tokenprobe.telemetry.nvidia_smi_csv import parse_nvidia_smi_csv, read_nvidia_smi_csv

DATA = Path(__file__).parents[1] / "data" / "telemetry"


def test_units_in_cells_with_header_and_two_gpus():
    result = read_nvidia_smi_csv(DATA / "nvidia_smi_units_header.csv")
    assert result.skipped_lines == 0
    assert len(result.samples) == 6
    first, gpu1_second = result.samples[0], result.samples[3]
    assert (first.t_s, first.gpu_index) == (0.0, 0)
    assert first.power_w == pytest.approx(71.23)
    assert first.gpu_util == 0.0 and first.mem_util == 0.0
    assert first.mem_used_bytes == 4 * 2**20
    assert first.temp_c == 34
    assert first.sm_clock_hz == pytest.approx(1.41e9)
    assert first.mem_clock_hz == pytest.approx(1.593e9)
    assert first.throttle_reasons == 0x1
    assert gpu1_second.gpu_index == 1
    assert gpu1_second.t_s == pytest.approx(1.004, abs=1e-6)
    assert gpu1_second.power_w is None  # [N/A]
    assert gpu1_second.gpu_util == pytest.approx(0.96)
    assert result.samples[5].gpu_util is None  # [Not Supported]
    assert result.samples[4].throttle_reasons == 0x4
    assert result.missing == {"power_w": 1, "gpu_util": 1}
    assert result.wall_start_s is not None


def test_units_only_in_the_header():
    result = read_nvidia_smi_csv(DATA / "nvidia_smi_nounits_header.csv")
    assert [s.power_w for s in result.samples] == [280.10, 281.50, 279.80, 350.25]
    assert [round(s.t_s, 3) for s in result.samples] == [0.0, 1.001, 2.002, 3.003]
    assert result.samples[0].gpu_util == pytest.approx(0.98)
    assert result.samples[0].mem_used_bytes == 30110 * 2**20
    assert result.samples[0].gpu_index is None


def test_no_header_needs_the_query_fields():
    path = DATA / "nvidia_smi_noheader_nounits.csv"
    with pytest.raises(SchemaError, match="no header"):
        read_nvidia_smi_csv(path)
    result = read_nvidia_smi_csv(path, "timestamp,power.draw,utilization.gpu")
    assert [s.power_w for s in result.samples] == [61.02, 180.77, 352.40]
    assert [s.gpu_util for s in result.samples] == pytest.approx([0.0, 0.45, 1.0])
    assert result.samples[2].t_s == pytest.approx(2.002)


def test_junk_lines_are_skipped_and_counted():
    result = read_nvidia_smi_csv(DATA / "nvidia_smi_junk.csv")
    assert [s.t_s for s in result.samples] == [0.0, 2.0, 4.0]
    assert [s.power_w for s in result.samples] == [100.0, None, 140.0]
    assert result.lines_read == 8
    assert result.skipped_lines == 5
    assert result.bad_values == {"power_w": 1}
    assert any("unreadable timestamp" in r for r in result.skip_reasons)
    assert any("3 cells, expected 4" in r for r in result.skip_reasons)


def test_seed_003_own_header_and_no_timestamp_with_a_period():
    text = "timestamp,power_w,gpu_util\n2024/05/14 11:00:00, 61.02, 0\n2024/05/14 11:00:01, 70, 5\n"
    result = parse_nvidia_smi_csv(text)
    assert [s.power_w for s in result.samples] == [61.02, 70.0]
    assert result.samples[1].t_s == 1.0
    no_time = parse_nvidia_smi_csv(
        "250.00 W, 97 %\n251.00 W, 98 %\n", "power.draw,utilization.gpu", period_s=1.0
    )
    assert [(s.t_s, s.power_w) for s in no_time.samples] == [(0.0, 250.0), (1.0, 251.0)]
    with pytest.raises(ConfigError, match="period_s"):
        parse_nvidia_smi_csv("250.00 W\n", "power.draw")


def test_byte_order_mark_and_crlf_line_ends():
    text = "\ufefftimestamp, power.draw [W]\r\n2024/05/14 11:00:00.000, 99.5 W\r\n"
    assert [s.power_w for s in parse_nvidia_smi_csv(text).samples] == [99.5]


def test_unknown_columns_are_listed_not_fatal():
    text = "timestamp, name, power.draw [W]\n2024/05/14 11:00:00.000, NVIDIA H100, 99.5 W\n"
    result = parse_nvidia_smi_csv(text)
    assert result.ignored_columns == ["name"]
    assert result.samples[0].power_w == 99.5


def test_unreadable_file_is_a_schema_error(tmp_path):
    with pytest.raises(SchemaError, match="cannot read"):
        read_nvidia_smi_csv(tmp_path / "missing.csv")


def test_import_becomes_a_run_whose_energy_the_join_can_compute():
    from tokenprobe.energy_join import join_energy

    run = read_nvidia_smi_csv(DATA / "nvidia_smi_junk.csv").to_run()
    assert run.kind == "imported" and len(run.telemetry) == 3
    assert run.warnings[0] == "nvidia-smi csv: 5 lines skipped"
    clean = read_nvidia_smi_csv(DATA / "nvidia_smi_nounits_header.csv").to_run()
    assert clean.warnings == []
    energy = join_energy(clean).energy_j  # trapezoid over the 1 Hz samples
    expected = (280.10 + 281.50) / 2 * 1.001 + (281.50 + 279.80) / 2 * 1.001
    expected += (279.80 + 350.25) / 2 * 1.001
    assert energy == pytest.approx(expected, rel=1e-6)
