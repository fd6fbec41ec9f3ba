#!/usr/bin/env bash
# The openai, anthropic and ollama Python SDKs, pinned, in one venv cached outside the repo, for
# recording their request shapes (scripts/clients/record_sdks.py, issue 16). Idempotent.
set -euo pipefail
OPENAI_VERSION=${OPENAI_VERSION:-3.57.0}
ANTHROPIC_VERSION=${ANTHROPIC_VERSION:-2.15.0}
OLLAMA_VERSION=${OLLAMA_VERSION:-0.6.3}
PYTHON=${PYTHON:-python3.11}
ROOT=${PHAROS_CLIENTS_CACHE:-$HOME/.cache/pharos/clients}
VENV=$ROOT/sdks-openai-$OPENAI_VERSION-anthropic-$ANTHROPIC_VERSION-ollama-$OLLAMA_VERSION

if [ -f "$VENV/.installed" ]; then
    echo "$VENV"
    exit 0
fi
mkdir -p "$ROOT"
start_s=$(date +%s)
test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install -q "openai==$OPENAI_VERSION" "anthropic==$ANTHROPIC_VERSION" \
    "ollama==$OLLAMA_VERSION" 2> >(grep -v "^WARNING: Location" >&2)
end_s=$(date +%s)
printf 'install_s=%s disk_bytes=%s\n' "$((end_s - start_s))" "$(du -sb "$VENV" | cut -f1)" \
    >"$VENV/.install-stats"
touch "$VENV/.installed"
echo "$VENV"
