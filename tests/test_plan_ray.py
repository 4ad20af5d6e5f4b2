"""The plan's Ray path, on a local Ray instance (skipped where Ray is not installed)."""

from __future__ import annotations

import pytest

from tokenprobe.plan import PlanRequest, candidates, fixed_lengths, plan

ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'tokenprobe[ray]'")


def test_ray_and_process_pool_plans_agree() -> None:
    in_len, out_len = fixed_lengths(256, 128)
    req = PlanRequest(
        "llama-3.1-8b", 6.0, in_len, out_len, 1.5, 0.04,
        candidates(["h100-sxm", "l4"], ["bf16"], [1], [256]), num_requests=120,
    )  # fmt: skip
    seen: list[tuple[int, int]] = []
    try:
        on_ray = plan(req, ray_address="local", progress=lambda i, n: seen.append((i, n)))
    finally:
        ray.shutdown()
    local = plan(req, workers=1)
    assert [o.to_dict() for o in on_ray.outcomes] == [o.to_dict() for o in local.outcomes]
    assert seen[-1] == (2, 2)
