#!/usr/bin/env bash
# Debian's Chromium and ChromeDriver for the browser tests of the report and the web app
# (tests/report, tests/web), driven by the Python `playwright` package through
# executable_path=/usr/bin/chromium: a test tool's own browser download is not possible here.
# Idempotent: no apt when both binaries are already there. Needs root (CI runs it as root).
# Usage: scripts/install-browser.sh PYTHON   (PYTHON unused; every install-*.sh gets it)
set -euo pipefail
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
