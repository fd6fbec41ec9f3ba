#!/usr/bin/env bash
# promtool (Debian's `prometheus` package) for tests/obs/test_monitoring.py: `promtool check
# rules` on monitoring/pharos-alerts.yaml and `promtool check metrics` on a live /metrics.
# Idempotent: does nothing when promtool is on the PATH. apt runs under /tmp/pharos-apt.lock
# so parallel installs never collide on dpkg's lock.
set -euo pipefail

if command -v promtool >/dev/null 2>&1; then
  echo "promtool present: $(promtool --version 2>&1 | head -1)"
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-promtool: apt-get not found; install Prometheus's promtool onto the PATH" >&2
  exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
LOCK=/tmp/pharos-apt.lock
$SUDO flock "$LOCK" apt-get update -q
$SUDO flock "$LOCK" apt-get install -y -q --no-install-recommends prometheus
# The package starts a Prometheus server where systemd runs; the tests need only promtool.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
  $SUDO systemctl disable --now prometheus || true
fi
promtool --version 2>&1 | head -1
