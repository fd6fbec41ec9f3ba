#!/usr/bin/env bash
# Headless Chromium for the /status page browser test (tests/obs/test_obs_browser.py).
# Idempotent: does nothing when /usr/bin/chromium already exists. Debian/Ubuntu only.
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
  echo "chromium present: $(/usr/bin/chromium --version 2>/dev/null || echo /usr/bin/chromium)"
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-browser: apt-get not found; install Chromium so that /usr/bin/chromium exists" >&2
  exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core
/usr/bin/chromium --version
