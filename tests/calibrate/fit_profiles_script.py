"""benchmarks/fit_profiles.py loaded as a module, for the tests that read its profile specs or
run its main (the script imports its sibling benchmark modules, so their folder is on the path
while it loads)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

FIT = Path(__file__).resolve().parents[2] / "benchmarks" / "fit_profiles.py"


def fit_profiles() -> ModuleType:
    sys.path.insert(0, str(FIT.parent))
    try:
        loaded = importlib.util.spec_from_file_location("fit_profiles", FIT)
        assert loaded is not None and loaded.loader is not None
        module = importlib.util.module_from_spec(loaded)
        loaded.loader.exec_module(module)
    finally:
        sys.path.remove(str(FIT.parent))
    return module
