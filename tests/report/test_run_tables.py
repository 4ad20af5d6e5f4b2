"""A simulated run's report shows its serving front end, and every energy line names its basis
(report/run_tables.py, issue 19 item 4)."""

from __future__ import annotations

import tokenprobe
from tokenprobe.report import estimate_sections, fmt, run_sections
from tokenprobe.sim import simulate


def test_front_end_block_and_energy_on_its_basis() -> None:
    result = simulate(
        "llama-3.1-8b",
        "h100-sxm",
        input_tokens=128,
        output_tokens=16,
        rate_per_s=20.0,
        num_requests=30,
        api_server_processes=1,
        host="dgx-h100",
        host_power=True,
    )
    summary = result.to_dict()
    sections = {s.title: s for s in run_sections(result.run(), summary)}
    fe = dict(sections["Serving front end (CPU)"].tables[0].rows)
    block = summary["frontend"]
    assert fe["API-server processes"] == "1"
    assert fe["their utilisation"] == fmt.pct(block["utilization"])
    for name in ("p50", "p99"):
        assert fe[f"wait in front of them, {name}"] == fmt.ms(block[f"wait_{name}_s"], unit=True)
    energy = dict(sections["Energy"].tables[0].rows)
    e = summary["energy"]
    # one of a DGX H100's 8 GPUs: 2,880 / 8 = 360 W of host base over the run, beside GPU energy
    assert (
        abs(e["basis_total_j"] - e["total_j"] - 360.0 * summary["duration_s"])
        < 1e-6 * e["basis_total_j"]
    )
    basis = "GPU + host (base 360 W)"
    assert energy[f"{basis}: energy total (J)"] == fmt.num(e["basis_total_j"])
    assert energy["GPU: total (J)"] == fmt.num(e["total_j"])
    assert energy[f"{basis}: static share of the energy"] == fmt.pct(e["static_share"])
    # every energy line names its basis
    assert all(k.startswith(("GPU: ", f"{basis}: ")) for k in energy)


def test_a_run_without_a_front_end_has_no_such_section() -> None:
    result = simulate("llama-3.1-8b", "h100-sxm", input_tokens=64, output_tokens=8,
                      rate_per_s=5.0, num_requests=5)  # fmt: skip
    titles = [s.title for s in run_sections(result.run(), result.to_dict())]
    assert "Serving front end (CPU)" not in titles and "Energy" in titles


def test_an_estimate_report_names_the_basis_of_its_energy_lines() -> None:
    est = tokenprobe.estimate(
        "llama-3.1-8b", "h100-sxm", input_tokens=256, output_tokens=64, host="dgx-h100",
        host_power=True,
    ).to_dict()  # fmt: skip
    rows = {label: value for s in estimate_sections(est) for t in s.tables for label, value, *_ in
            t.rows}  # fmt: skip
    basis = "GPU + host (base 360 W)"
    e = est["energy"]
    assert rows[f"{basis}: J per output token"] == fmt.num(e["joules_per_output_token"])
    assert rows[f"{basis}: static share (GPU idle floor + host base)"] == fmt.pct(e["static_share"])
