"""A simulated run's energy on its basis and its static share (sim/energy_basis.py)."""

from __future__ import annotations

import pytest

from tokenprobe.sim import simulate

KW: dict[str, object] = {
    "input_tokens": 256,
    "output_tokens": 64,
    "rate_per_s": 2.0,
    "num_requests": 20,
}


def test_host_base_power_over_the_run_and_the_static_share() -> None:
    gpu = simulate("llama-3.1-8b", "h100-sxm", **KW).to_dict()  # type: ignore[arg-type]
    host = simulate(
        "llama-3.1-8b",
        "h100-sxm",
        host="dgx-h100",
        host_power=True,
        **KW,  # type: ignore[arg-type]
    ).to_dict()
    e0, e1 = gpu["energy"], host["energy"]
    assert e0["energy_basis"] == "GPU" and e0["basis_total_j"] == e0["total_j"]
    # GPU basis: the static part is the GPU's 70 W idle over the whole run
    assert e0["static_j"] == pytest.approx(70.0 * gpu["duration_s"])
    # one of a DGX H100's 8 GPUs: 2,880 / 8 = 360 W of host base over the run
    assert e1["energy_basis"] == "GPU + host (base 360 W)"
    assert e1["host_base_j"] == pytest.approx(360.0 * host["duration_s"])
    assert e1["basis_total_j"] == pytest.approx(e1["total_j"] + e1["host_base_j"])
    assert e1["static_j"] == pytest.approx((70.0 + 360.0) * host["duration_s"])
    # at 2 requests/s the GPU is mostly waiting: the host's base makes static power dominate
    assert e0["static_share"] < 0.5 < e1["static_share"] < 1.0
    assert all(v >= 0 for v in e1.values() if isinstance(v, float))
