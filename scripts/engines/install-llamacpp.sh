#!/usr/bin/env bash
# Builds llama.cpp's llama-server at build b11312 from the llama.cpp sources that the
# llama-cpp-python 0.3.36 sdist vendors, and caches the binary. Does nothing if cached.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=common.sh
source "$here/common.sh"

binary="$LLAMACPP_DIR/llama-server"
if [[ -x "$binary" ]]; then
    log "llama-server b$LLAMACPP_BUILD already cached: $binary"
    exit 0
fi
command -v cmake >/dev/null || die "cmake not found (apt-get install cmake)"
command -v g++ >/dev/null || die "g++ not found (apt-get install g++)"

work="$PHAROS_ENGINE_CACHE/build/llamacpp-b$LLAMACPP_BUILD"
sdist_dir="$PHAROS_ENGINE_CACHE/downloads"
mkdir -p "$sdist_dir" "$work" "$LLAMACPP_DIR"

sdist="$sdist_dir/llama_cpp_python-$LLAMACPP_PY_VERSION.tar.gz"
if [[ ! -f "$sdist" ]]; then
    log "downloading llama-cpp-python==$LLAMACPP_PY_VERSION sdist"
    "$PYTHON" -m pip download --quiet --no-deps --no-binary llama-cpp-python \
        "llama-cpp-python==$LLAMACPP_PY_VERSION" -d "$sdist_dir"
    found="$(ls "$sdist_dir"/llama_cpp_python-"$LLAMACPP_PY_VERSION".tar.gz 2>/dev/null || true)"
    [[ -n "$found" ]] || die "sdist not found in $sdist_dir after pip download"
fi

src="$work/llama_cpp_python-$LLAMACPP_PY_VERSION"
if [[ ! -d "$src/vendor/llama.cpp" ]]; then
    log "unpacking $sdist"
    tar -xzf "$sdist" -C "$work"
fi
[[ -d "$src/vendor/llama.cpp" ]] || die "vendor/llama.cpp missing in $src"

jobs="${PHAROS_BUILD_JOBS:-2}"
log "configuring llama.cpp (build number $LLAMACPP_BUILD)"
cmake -S "$src/vendor/llama.cpp" -B "$work/cmake-build" \
    -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_NUMBER="$LLAMACPP_BUILD" \
    -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF >"$work/cmake-configure.log" 2>&1 \
    || { tail -40 "$work/cmake-configure.log" >&2; die "cmake configure failed (log: $work/cmake-configure.log)"; }
log "building llama-server with -j$jobs (about 5 minutes on 2 cores)"
cmake --build "$work/cmake-build" --config Release --target llama-server -j"$jobs" \
    >"$work/cmake-build.log" 2>&1 \
    || { tail -40 "$work/cmake-build.log" >&2; die "build failed (log: $work/cmake-build.log)"; }

built="$(find "$work/cmake-build" -type f -name llama-server -perm -u+x | head -1)"
[[ -n "$built" ]] || die "llama-server binary not found after build"
cp "$built" "$binary.tmp"
mv "$binary.tmp" "$binary"
"$binary" --version >/dev/null 2>&1 || log "warning: '$binary --version' did not exit 0"
log "cached $binary"
rm -rf "$work"  # sources and objects: only the binary is kept
