#!/usr/bin/env bash
# Installs llama-cpp-python[server] 0.3.36 into its own venv in the engine cache: the generic
# OpenAI-compatible server the live tests run as kind `openai` (no /health, no /metrics, no
# usage chunk in streams). Built from the same cached sdist install-llamacpp.sh uses, so it
# compiles llama.cpp a second time inside the package (about 5 minutes on 2 cores).
# Does nothing if cached.
#   start: "$LLAMACPP_PY_VENV/bin/python" -m llama_cpp.server --model GGUF --host 127.0.0.1 --port PORT
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=common.sh
source "$here/common.sh"

py="$LLAMACPP_PY_VENV/bin/python"
marker="$LLAMACPP_PY_VENV/.pharos-installed"
if [[ -f "$marker" ]]; then
    log "llama-cpp-python $LLAMACPP_PY_VERSION already installed: $LLAMACPP_PY_VENV"
    exit 0
fi
command -v cmake >/dev/null || die "cmake not found (apt-get install cmake)"
command -v g++ >/dev/null || die "g++ not found (apt-get install g++)"

sdist_dir="$PHAROS_ENGINE_CACHE/downloads"
sdist="$sdist_dir/llama_cpp_python-$LLAMACPP_PY_VERSION.tar.gz"
mkdir -p "$sdist_dir"
if [[ ! -f "$sdist" ]]; then
    log "downloading llama-cpp-python==$LLAMACPP_PY_VERSION sdist"
    "$PYTHON" -m pip download --quiet --no-deps --no-binary llama-cpp-python \
        "llama-cpp-python==$LLAMACPP_PY_VERSION" -d "$sdist_dir"
    [[ -f "$sdist" ]] || die "sdist not found in $sdist_dir after pip download"
fi

rm -rf "$LLAMACPP_PY_VENV"
log "creating venv $LLAMACPP_PY_VENV"
"$PYTHON" -m venv "$LLAMACPP_PY_VENV"
"$py" -m pip install --quiet --upgrade pip
jobs="${PHAROS_BUILD_JOBS:-2}"
log "building llama-cpp-python[server] $LLAMACPP_PY_VERSION with -j$jobs (about 5 minutes)"
build_log="$PHAROS_ENGINE_CACHE/build/llamacpp-python-$LLAMACPP_PY_VERSION.log"
mkdir -p "$(dirname "$build_log")"
CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
    CMAKE_BUILD_PARALLEL_LEVEL="$jobs" \
    "$py" -m pip install --no-cache-dir "llama-cpp-python[server] @ file://$sdist" \
    >"$build_log" 2>&1 \
    || { tail -40 "$build_log" >&2; die "llama-cpp-python build failed (log: $build_log)"; }
"$py" -c "import llama_cpp, llama_cpp.server; print('llama_cpp', llama_cpp.__version__)" >&2 \
    || die "llama_cpp.server does not import in $LLAMACPP_PY_VENV"
touch "$marker"
log "installed llama-cpp-python[server] $LLAMACPP_PY_VERSION"
