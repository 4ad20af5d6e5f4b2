"""GPU-to-GPU communication (cost/comm.py): the alpha-beta all-reduce and its link kinds."""

from __future__ import annotations

import dataclasses

import pytest

from tokenprobe.cost import make_deployment
from tokenprobe.cost.comm import allreduce_time_s, send_time_s
from tokenprobe.hardware import PCIE_COLLECTIVE_FACTOR


def test_ring_allreduce_by_hand_on_nvlink() -> None:
    dep = make_deployment("llama-3.1-70b", "h100-sxm", tp=8)
    link, eta = dep.gpu.link, dep.efficiency.link
    n_bytes = 16e6
    expected = link.latency_s + 2 * 7 / 8 * n_bytes / (link.bytes_per_s * eta)
    assert allreduce_time_s(dep, n_bytes) == pytest.approx(expected)
    assert link.collective_factor == 1.0


def test_collectives_over_pcie_keep_a_smaller_share_of_the_link_than_copies() -> None:
    dep = make_deployment("llama-3.1-70b", "a100-pcie-80gb", tp=4)
    link, eta = dep.gpu.link, dep.efficiency.link
    assert link.kind == "pcie4"
    n_bytes = 16e6
    bandwidth_s = allreduce_time_s(dep, n_bytes) - link.latency_s
    assert bandwidth_s == pytest.approx(1.5 * n_bytes / (link.bytes_per_s * eta * 0.66))
    # the same link declared as NVLink-class would move the bytes 1/0.66 times faster
    nvlink_like = dataclasses.replace(dep.gpu, link=dataclasses.replace(link, kind="nvlink3"))
    faster = dataclasses.replace(dep, gpu=nvlink_like)
    assert allreduce_time_s(faster, n_bytes) - link.latency_s == pytest.approx(
        bandwidth_s * PCIE_COLLECTIVE_FACTOR
    )
    # a point-to-point send (pipeline stages) is not a collective
    assert send_time_s(dep, n_bytes) == pytest.approx(send_time_s(faster, n_bytes))
