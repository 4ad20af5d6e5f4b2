#!/usr/bin/env bash
# The whole test suite, as the README says: install (idempotent), lint, types, layering, tests.
# Works on a fresh machine with only Python 3.11, pip and gcc; reuses .venv when present.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${TOKENPROBE_VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
PY="$VENV/bin/python"
inputs=(pyproject.toml)
[ -f scripts/install-extras.sh ] && inputs+=(scripts/install-extras.sh)
stamp="$VENV/.installed-$(cat "${inputs[@]}" | sha1sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  "$PY" -m pip install --quiet --upgrade pip
  "$PY" -m pip install --quiet -e '.[dev]'
  if [ -f scripts/install-extras.sh ]; then bash scripts/install-extras.sh "$PY"; fi
  touch "$stamp"
fi
"$PY" -m ruff check src tests benchmarks
"$PY" -m ruff format --check src tests benchmarks
"$PY" -m mypy
"$VENV/bin/lint-imports"
"$PY" -m pytest "$@"
