#!/usr/bin/env bash
# Open WebUI 0.12.4 and Playwright (driving Debian's chromium, no browser download) in one venv
# cached outside the repo, for `make live-clients` (issue 16). Idempotent: a venv with .installed
# is reused as is. Measured on the 2-core machine: see README "Open WebUI".
set -euo pipefail
VERSION=${OPEN_WEBUI_VERSION:-0.12.4}
PLAYWRIGHT_VERSION=${PLAYWRIGHT_VERSION:-1.65.2}
PYTHON=${PYTHON:-python3.11}
ROOT=${PHAROS_CLIENTS_CACHE:-$HOME/.cache/pharos/clients}
VENV=$ROOT/open-webui-$VERSION

if [ -f "$VENV/.installed" ]; then
    echo "open-webui $VERSION: $VENV"
    exit 0
fi
mkdir -p "$ROOT"
start_s=$(date +%s)
test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip 2> >(grep -v "^WARNING: Location" >&2)
"$VENV/bin/pip" install -q "open-webui==$VERSION" "playwright==$PLAYWRIGHT_VERSION" \
    2> >(grep -v "^WARNING: Location" >&2)
end_s=$(date +%s)
du_bytes=$(du -sb "$VENV" | cut -f1)
printf 'install_s=%s disk_bytes=%s\n' "$((end_s - start_s))" "$du_bytes" >"$VENV/.install-stats"
echo "$VERSION" >"$VENV/.version"
touch "$VENV/.installed"
echo "open-webui $VERSION: $VENV ($(cat "$VENV/.install-stats"))"
