"""A Hugging Face config read key by key, every value checked where it is read (the readers of
hf_config.py, hf_hybrid.py and hf_legacy.py take one): integers within the limits of spec.py,
booleans for flags, strings, lists of the right entries; a refusal is one ConfigError naming
the key and the value."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tokenprobe.errors import ConfigError
from tokenprobe.model.spec import check_count


class ConfigReader:
    """A config dict read key by key: every value is checked where it is read."""

    def __init__(self, cfg: Mapping[str, Any], defaults: Mapping[str, Any]) -> None:
        self.cfg, self.defaults = cfg, defaults

    def has(self, key: str) -> bool:
        return self.cfg.get(key) is not None or key in self.defaults

    def raw(self, key: str) -> Any:
        value = self.cfg.get(key)
        return self.defaults.get(key) if value is None else value

    def count(self, *keys: str, hi: int, lo: int = 1, default: int | None = None) -> int:
        """The first of `keys` that is set, as an integer in [lo, hi] (4096.0 reads as 4096)."""
        for key in keys:
            if self.has(key):
                value = self.raw(key)
                if isinstance(value, float) and math.isfinite(value) and value.is_integer():
                    value = int(value)
                return check_count(key, value, hi, lo=lo)
        if default is None:
            raise ConfigError(keys[0], None, f"required: an integer in [{lo:,}, {hi:,}]")
        return default

    def flag(self, key: str, default: bool) -> bool:
        if not self.has(key):
            return default
        value = self.raw(key)
        if not isinstance(value, bool):
            raise ConfigError(key, value, "true or false")
        return value

    def text(self, key: str, default: str) -> str:
        value = self.raw(key) if self.has(key) else default
        if not isinstance(value, str):
            raise ConfigError(key, value, "a string")
        return value

    def entries(self, key: str, item: type, hi: int) -> list[Any]:
        value = self.raw(key)
        if not isinstance(value, list) or len(value) > hi:
            raise ConfigError(key, value, f"a list of at most {hi:,} entries")
        for entry in value:
            if isinstance(entry, bool) or not isinstance(entry, item):
                raise ConfigError(key, entry, f"entries of type {item.__name__}")
        return value
