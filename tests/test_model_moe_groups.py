"""Group-limited routing read from a DeepSeek-style config.json (`n_group`, `topk_group`;
model/hf_config.py, model/shapes.py MoeSpec): DeepSeek-V3/R1 8 / 4, DeepSeek-V2 8 / 3, GLM-4.6
and Kimi-K2 1 / 1 (Kimi-K2's catalog config omits the keys: read as ungrouped), and the values
that cannot describe a router refused by name."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tokenprobe.errors import ConfigError
from tokenprobe.model import CATALOG_DIR, from_hf_config, get_model


def _catalog_cfg(name: str) -> dict[str, Any]:
    cfg: dict[str, Any] = json.loads((CATALOG_DIR / f"{name}.json").read_text())
    return cfg


@pytest.mark.parametrize(
    ("name", "groups", "per_token"),
    [("deepseek-v3", 8, 4), ("deepseek-r1", 8, 4), ("deepseek-v2", 8, 3),
     ("glm-4.6", 1, 1), ("kimi-k2", 1, 1)],
)  # fmt: skip
def test_catalog_models_carry_their_routers_groups(name: str, groups: int, per_token: int) -> None:
    moe = get_model(name).moe
    assert moe is not None
    assert (moe.expert_groups, moe.groups_per_token) == (groups, per_token)


@pytest.mark.parametrize(
    ("change", "field"),
    [({"n_group": 7}, "n_group"),  # 256 experts do not split into 7 groups
     ({"topk_group": 9}, "topk_group"),  # more groups than there are
     ({"n_group": 64, "topk_group": 1}, "topk_group"),  # 4 experts cannot hold a top-8
     ({"n_group": 0}, "n_group")],
)  # fmt: skip
def test_impossible_groups_are_refused_by_name(change: dict[str, int], field: str) -> None:
    cfg = {**_catalog_cfg("deepseek-v3"), **change}
    with pytest.raises(ConfigError, match=field):
        from_hf_config(cfg)


def test_groups_change_no_weight() -> None:
    """The groups route tokens; they add no parameter: the same count either way."""
    cfg = _catalog_cfg("deepseek-v3")
    grouped = from_hf_config(cfg)
    ungrouped = from_hf_config({**cfg, "n_group": 1, "topk_group": 1})
    assert grouped.params_total == ungrouped.params_total
    assert ungrouped.moe is not None and ungrouped.moe.expert_groups == 1
