#!/usr/bin/env bash
# Ray for `tokenprobe plan --ray` (the `ray` extra), so its test runs against a local Ray
# instance. Idempotent. Usage: scripts/install-ray.sh PYTHON
set -euo pipefail
PY="${1:?usage: install-ray.sh PYTHON}"
if ! "$PY" -c "import ray" 2>/dev/null; then
  "$PY" -m pip install --quiet "ray>=2.9"
fi
