"""The repository's folders that the benchmark scripts read and write, found from this file
(never from the current directory), so a script run from anywhere writes where the package
reads: the shipped engine profiles (`tokenprobe.calibrate.load_profile` reads them from the
package) and the public measurements of benchmarks/data (its README)."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
PROFILES_DIR = REPO_ROOT / "src" / "tokenprobe" / "calibrate" / "profiles"
DATA_DIR = REPO_ROOT / "benchmarks" / "data"  # public serving measurements not in shared/
