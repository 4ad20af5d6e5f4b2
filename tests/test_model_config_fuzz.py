"""Random Hugging Face configs: `from_hf_config` / `load_config_file` return a ModelSpec with
positive counts or raise ConfigError (SchemaError is one), nothing else, and return.

Examples are mutations of real configs (catalog entries and tests/data/hf_configs: every family
reader is reached) with keys set to random JSON-like values (integers huge, negative or zero,
floats with NaN and inf, strings, booleans, null, lists, nested objects) or removed, and wholly
random objects. `TOKENPROBE_FUZZ_EXAMPLES` raises the example count for a soak run (unset: 200,
derandomized, so the default run is deterministic).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenprobe.errors import ConfigError
from tokenprobe.model import CATALOG_DIR, SHAPE_KEY, ModelSpec, from_hf_config, load_config_file

_ENV = os.environ.get("TOKENPROBE_FUZZ_EXAMPLES", "").strip()
FUZZ = settings(
    max_examples=int(_ENV) if _ENV else 200,
    deadline=None,
    derandomize=not _ENV,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
CALL_LIMIT_S = 60  # far above any honest read (milliseconds), so machine load cannot trip it

DATA = Path(__file__).parent / "data" / "hf_configs"
BASES = [
    json.loads(f.read_text())
    for f in [
        *(CATALOG_DIR / f"{n}.json" for n in ("llama-3.1-8b", "deepseek-v3", "gpt-oss-20b")),
        *(CATALOG_DIR / f"{n}.json" for n in ("qwen3-30b-a3b", "llama-4-maverick-17b-128e")),
        *(CATALOG_DIR / f"{n}.json" for n in ("gemma-3-27b", "glm-4.6", "mistral-7b")),
        *sorted(DATA.glob("*.json")),
    ]
]
KEYS = sorted(
    {k for cfg in BASES for k in cfg}
    | {k for cfg in BASES for k in cfg.get("text_config", {})}
    | {"model_type", "layer_types", "num_experts", "ssm_state_size", "sliding_window"}
)
LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, 2, 3, 7, 8, 64, 10**4, 10**7, 2**31, 2**63]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["llama", "falcon", "gpt_bigcode", "gemma3", "full_attention", "linear"]),
    st.text(max_size=8),
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=6), st.dictionaries(st.sampled_from(KEYS), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def configs(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.integers(0, 9)) == 0:  # a wholly random object
        return draw(st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text()), VALUES))
    cfg: dict[str, Any] = json.loads(json.dumps(draw(st.sampled_from(BASES))))
    target = cfg["text_config"] if "text_config" in cfg and draw(st.booleans()) else cfg
    for _ in range(draw(st.integers(1, 4))):
        key = draw(st.sampled_from(KEYS))
        if draw(st.integers(0, 3)) == 0:
            target.pop(key, None)
        else:
            target[key] = draw(VALUES)
    return cfg


def _alarm(signum: int, frame: object) -> None:
    raise AssertionError(f"reading a config ran for more than {CALL_LIMIT_S} s")


@contextlib.contextmanager
def _terminates() -> Iterator[None]:
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(CALL_LIMIT_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _check(spec: ModelSpec) -> None:
    counts = (spec.params_total, spec.params_active, spec.params_active_no_embedding)
    assert all(isinstance(n, int) and n > 0 and math.isfinite(float(n)) for n in counts), counts
    assert spec.params_active <= spec.params_total
    assert spec.kv_elements_per_token > 0
    assert 0 < spec.kv_elements_for_context(100_000) <= 100_000 * spec.kv_elements_per_token


@FUZZ
@given(cfg=configs(), via_file=st.booleans())
def test_a_random_config_gives_a_model_or_a_config_error(
    cfg: dict[str, Any], via_file: bool
) -> None:
    with _terminates():
        try:
            if via_file:  # json.dumps writes NaN/Infinity, which the reader refuses
                with tempfile.TemporaryDirectory() as folder:
                    file = Path(folder) / "config.json"
                    file.write_text(json.dumps(cfg))
                    spec = load_config_file(file)
            else:
                spec = from_hf_config(cfg)
        except ConfigError as exc:
            assert str(exc)  # a message, naming a field or a file
            return
        _check(spec)


def test_the_catalog_configs_carry_no_unread_shape_key() -> None:
    """The rule's other half: every real config the catalog ships reads without a refusal, and
    each has shape keys (the fuzz bases are not trivially empty)."""
    for file in sorted(CATALOG_DIR.glob("*.json")):
        cfg = json.loads(file.read_text())
        _check(from_hf_config(cfg))
        assert any(SHAPE_KEY.search(k) for k in cfg.get("text_config", cfg))
