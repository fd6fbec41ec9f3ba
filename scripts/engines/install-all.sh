#!/usr/bin/env bash
# Installs every real engine and model the live tests need (tests/live, `pytest -m live`).
# Idempotent: each step is skipped when its result is cached in $PHAROS_ENGINE_CACHE
# (default ~/.cache/pharos/engines). Steps run one after the other: the machines have 2 cores.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "$here/fetch-models.sh"
bash "$here/install-llamacpp.sh"
bash "$here/install-vllm.sh"
bash "$here/install-llamacpp-python.sh"
