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
# scripts/install-*.sh install what pip cannot express (a server wheel with --no-deps, Debian's
# Chromium); each gets the venv's python as $1 and must be idempotent.
shopt -s nullglob
extras=(scripts/install-*.sh)
stamp="$VENV/.installed-$(cat pyproject.toml "${extras[@]}" | sha1sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  "$PY" -m pip install --quiet --upgrade pip
  "$PY" -m pip install --quiet -e '.[dev]'
  for script in "${extras[@]}"; do bash "$script" "$PY"; done
  touch "$stamp"
fi
"$PY" -m ruff check src tests benchmarks
"$PY" -m ruff format --check src tests benchmarks
"$PY" -m mypy
"$VENV/bin/lint-imports"
"$PY" -m pytest "$@"
