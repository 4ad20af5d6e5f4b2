"""The host's base power in every energy figure (issue 19 item 1; cost.energy.EnergyPrices)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import tokenprobe
from tokenprobe.cli import app
from tokenprobe.cost import EnergyPrices, host_base_power_w
from tokenprobe.errors import ConfigError, SchemaError
from tokenprobe.hardware import get_host, load_host_file


def test_dgx_base_power_from_its_measured_peak() -> None:
    # Latif et al. (arXiv:2412.08602): node peak 8.48 kW with 8 x 700 W GPUs -> 2,880 W apart
    # from the GPUs; a deployment on one of the 8 GPUs pays 360 W, on 16 GPUs two servers
    host = get_host("dgx-h100")
    assert (host.base_power_w, host.gpus) == (2880.0, 8)
    assert host_base_power_w(host, 1) == 360.0
    assert host_base_power_w(host, 16) == 5760.0
    with pytest.raises(ConfigError, match="base_power_w"):
        host_base_power_w(get_host("default"), 1)


def test_a_host_file_gives_base_power_and_gpus_together(tmp_path: Path) -> None:
    path = tmp_path / "box.toml"
    body = (
        '[box]\ndisplay_name = "x"\ncpu_cores = 16\ndram_gib = 64\ndram_gb_per_s = 100\n'
        'nvme_gb_per_s = 3\nnic_gbit_per_s = 25\nsources = ["mine"]\n'
    )
    path.write_text(body + "base_power_w = 400\ngpus = 4\n")
    (host,) = load_host_file(path)
    assert host_base_power_w(host, 2) == 200.0
    path.write_text(body + "base_power_w = 400\n")
    with pytest.raises(SchemaError, match="base_power_w"):
        load_host_file(path)


def test_energy_on_a_basis_by_hand() -> None:
    # 1,000 J of GPU energy over 10 s, host base 360 W, dynamic 0.2, PUE 1.3:
    # 1.3 x (1,000 x 1.2 + 360 x 10) = 6,240 J; static (GPUs idle at 70 W): 1.3 x (840 + 3,600)
    p = EnergyPrices(pue=1.3, server_overhead_fraction=0.2, host_base_w=360.0)
    assert p.energy_j(1000.0, 10.0) == pytest.approx(6240.0)
    assert p.static_j(70.0, 10.0) == pytest.approx(1.3 * (70 * 10 * 1.2 + 3600))
    assert p.basis == "facility: GPU + host (base 360 W, dynamic x1.20) x PUE 1.30"
    assert EnergyPrices().basis == "GPU"
    with pytest.raises(ConfigError, match="host_base_w"):
        EnergyPrices(host_base_w=-1.0)


def test_estimate_charges_the_base_over_each_stage() -> None:
    kw: dict[str, object] = {"input_tokens": 512, "output_tokens": 256, "batch": 8}
    gpu = tokenprobe.estimate("llama-3.1-8b", "h100-sxm", host="dgx-h100", **kw)  # type: ignore[arg-type]
    host = tokenprobe.estimate(
        "llama-3.1-8b",
        "h100-sxm",
        host="dgx-h100",
        host_power=True,
        **kw,  # type: ignore[arg-type]
    )
    e0, e1 = gpu.energy(), host.energy()
    # per output token the host adds 360 W x one decode step / the 8 tokens it emits
    extra = e1["joules_per_output_token"] - e0["joules_per_output_token"]  # type: ignore[operator]
    assert extra == pytest.approx(360.0 * gpu.tpot_s / 8)
    assert host.to_dict()["energy"]["energy_basis"] == "GPU + host (base 360 W)"
    # static: (70 W GPU idle + 360 W) over prefill + 255 decode steps, over all that energy
    run_s = gpu.prefill.time_s + 255 * gpu.tpot_s
    total_j = e1["energy_per_request_j"] * 8  # type: ignore[operator]
    assert e1["static_share"] == pytest.approx((70 + 360) * run_s / total_j)
    assert 0 < e0["static_share"] < e1["static_share"] < 1  # type: ignore[operator]
    assert all(v is None or v >= 0 for v in e1.values())  # type: ignore[operator]


def test_cli_host_power_on_a_host_without_the_figure_is_a_clear_error() -> None:
    args = ["estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--host-power"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "400"})
    assert result.exit_code == 2
    assert "base_power_w" in result.output and "Traceback" not in result.output
