#!/usr/bin/env bash
# `make live-clients`: installs the clients (cached in ~/.cache/pharos/clients) and records what
# they send through the sink in front of Pharos into tests/captures/clients/ (issue 16).
#   bash scripts/clients/record.sh [open-webui|sdks|all] [OUT_ROOT]
# Idempotent: installs are reused; a recording replaces the directory it writes. Prints how
# long each step took. Needs /usr/bin/chromium (scripts/install-browser.sh) for Open WebUI.
set -euo pipefail
cd "$(dirname "$0")/../.."
WHAT=${1:-all}
OUT=${2:-tests/captures/clients}
PY=.venv/bin/python
step() { local name=$1; shift; local t0; t0=$(date +%s); "$@"; echo "[live-clients] $name: $(( $(date +%s) - t0 ))s" >&2; }

if [ "$WHAT" = all ] || [ "$WHAT" = sdks ]; then
    step "install sdks" bash scripts/clients/install-sdks.sh >/dev/null
    SDK_VENV=$(bash scripts/clients/install-sdks.sh)
    step "record sdks" "$PY" scripts/clients/record_sdks.py "$SDK_VENV" "$OUT"
fi
if [ "$WHAT" = all ] || [ "$WHAT" = open-webui ]; then
    step "install chromium" bash scripts/install-browser.sh >/dev/null
    step "install open-webui" bash scripts/clients/install-open-webui.sh
    WEBUI_VENV=${PHAROS_CLIENTS_CACHE:-$HOME/.cache/pharos/clients}/open-webui-${OPEN_WEBUI_VERSION:-0.12.4}
    cat "$WEBUI_VENV/.install-stats" >&2
    step "record open-webui" "$PY" scripts/clients/record_open_webui.py "$WEBUI_VENV" "$OUT"
fi
