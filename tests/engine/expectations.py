"""What every library probe reads from every capture body (layer-2 replay, spec §14).

Keys: `engine/` (every version), `engine//state` (every version, one state),
`engine/version`, `engine/version/state`; per probe, the most specific key wins.
A probe with no row for a body must read nothing known from it (an error counts
as nothing), which catches one engine's probe matching another's emulated
endpoint. Values are the true values visible in the capture files:

- versions: the string the engine reports; models: sorted tuple of names;
  residency: {model: state}; vram/size: {model: bytes, or None = unknown};
  load signals: {model, or "" for the whole backend: value}.

A guarded probe (llamacpp-waiting, trusted from b8772) reads nothing on versions
its guard rejects, whatever a row says. Log probes are keyed `engine/version`
and replayed over that version's engine.log.
"""

from __future__ import annotations

from collections.abc import Mapping

QWEN = "qwen2.5-0.5b"  # the served name in every shared llama.cpp, llama-swap, vLLM, SGLang capture
SMOL = "smollm2"  # the served name in our own recordings (tests/captures/): SmolLM2-135M
GEMMA = "gemma3"  # the second model of our llama.cpp router-mode recording
OLLAMA_QWEN = "qwen2.5:0.5b"
MLX_QWEN = "mlx-community/Qwen2.5-0.5B-Instruct-4bit"

EXPECTED: Mapping[str, Mapping[str, object]] = {
    # --- llama-swap: /api/version, /running, /v1/models; its /metrics is host CPU/memory only
    "llama-swap/": {"openai-models": (QWEN,)},
    "llama-swap/v185/busy": {"llamaswap-running": {QWEN: "loaded"}},
    "llama-swap/v185/idle": {
        "llamaswap-running": {},
        "llamaswap-version": "185",
        "ollama-version": "185",  # trap: digits an Ollama probe accepts; the recipe keeps it out
    },
    "llama-swap/v219/cancelled": {"llamaswap-version": "219", "ollama-version": "219"},  # trap
    "llama-swap/v219/saturated": {"llamaswap-running": {QWEN: "loaded"}},
    "llama-swap/v260/cold": {
        "llamaswap-version": "v260",
        "llamaswap-running": {},
        # trap: v260's /v1/models carries status.value like llama.cpp's router mode
        "llamacpp-router-residency": {QWEN: "cold"},
    },
    # --- llama.cpp: /props, /metrics (b7139: a JSON-quoted string), /slots
    "llamacpp/": {"openai-models": (QWEN,), "llamacpp-props-capacity": {"": 2}},
    "llamacpp/b6602": {"llamacpp-props-version": "b6602-72b24d96"},
    "llamacpp/b7139": {"llamacpp-props-version": "b7139-923ae3c61"},
    "llamacpp/b8772": {"llamacpp-props-version": "b8772-bafae2765"},
    "llamacpp/v0.5.0": {"llamacpp-props-version": "b11146-7fe450e19"},
    # ours (tests/captures/engines/llamacpp/b11312): --alias smollm2 -np 2, complete states
    "llamacpp/b11312": {"llamacpp-props-version": "b11312-0c1e570", "openai-models": (SMOL,)},
    "llamacpp//idle": {
        "llamacpp-running": {"": 0},
        "llamacpp-waiting": {"": 0},  # seen on b11312; shared idle copies lack /metrics or guard
        "llamacpp-slots-running": {"": 0},
    },
    "llamacpp//loaded": {
        "llamacpp-running": {"": 0},
        "llamacpp-waiting": {"": 0},
        "llamacpp-slots-running": {"": 0},
    },
    "llamacpp//busy": {
        "llamacpp-running": {"": 2},
        "llamacpp-waiting": {"": 2},  # b8772, v0.5.0, b11312; b6602/b7139 read 0: guarded out
        "llamacpp-slots-running": {"": 2},
    },
    "llamacpp//saturated": {
        "llamacpp-running": {"": 2},
        "llamacpp-waiting": {"": 6},
        "llamacpp-slots-running": {"": 2},
    },
    "llamacpp//cancelled": {
        "llamacpp-running": {"": 0},
        "llamacpp-waiting": {"": 0},
        "llamacpp-slots-running": {"": 0},
    },
    "llamacpp/b11312/prefix": {  # after the shared-prefix requests finished
        "llamacpp-running": {"": 0},
        "llamacpp-waiting": {"": 0},
        "llamacpp-slots-running": {"": 0},
    },
    # --- llama.cpp router mode, ours (tests/captures/llamacpp-router/b11312, --models-max 1).
    # The router's own /props has build_info but no total_slots (capacity unknown); its bare
    # /metrics and /slots answer 400 "model name is missing" (bodies kept: they read nothing).
    "llamacpp-router/b11312": {
        "llamacpp-props-version": "b11312-0c1e570",
        "openai-models": (GEMMA, SMOL),
    },
    "llamacpp-router/b11312/idle": {"llamacpp-router-residency": {GEMMA: "cold", SMOL: "cold"}},
    "llamacpp-router/b11312/loading": {
        "llamacpp-router-residency": {GEMMA: "cold", SMOL: "loading"}
    },
    # Per model (`/props|/metrics?model=X&autoload=false`): the child's body while X is
    # loaded; 400 "model is not loaded" while cold and 503 while loading (they read nothing).
    "llamacpp-router/b11312/loaded": {
        "llamacpp-router-residency": {GEMMA: "cold", SMOL: "loaded"},
        "llamacpp-router-capacity": {SMOL: 2},
        "llamacpp-router-running": {SMOL: 0},
        "llamacpp-router-waiting": {SMOL: 0},
    },
    "llamacpp-router/b11312/busy": {  # 4 streams on smollm2's 2 slots
        "llamacpp-router-residency": {GEMMA: "cold", SMOL: "loaded"},
        "llamacpp-router-capacity": {SMOL: 2},
        "llamacpp-router-running": {SMOL: 2},
        "llamacpp-router-waiting": {SMOL: 2},
    },
    "llamacpp-router/b11312/saturated": {  # 8 streams: this recording's child counted 2 + 6
        "llamacpp-router-residency": {GEMMA: "cold", SMOL: "loaded"},
        "llamacpp-router-capacity": {SMOL: 2},
        "llamacpp-router-running": {SMOL: 2},
        "llamacpp-router-waiting": {SMOL: 6},
    },
    "llamacpp-router/b11312/cancelled": {
        "llamacpp-router-residency": {GEMMA: "cold", SMOL: "loaded"},
        "llamacpp-router-capacity": {SMOL: 2},
        "llamacpp-router-running": {SMOL: 0},
        "llamacpp-router-waiting": {SMOL: 0},
    },
    "llamacpp-router/b11312/swapped": {
        "llamacpp-router-residency": {GEMMA: "loaded", SMOL: "cold"},
        "llamacpp-router-capacity": {GEMMA: 2},
        "llamacpp-router-running": {GEMMA: 0},
        "llamacpp-router-waiting": {GEMMA: 0},
    },
    "llamacpp-router/b11312/unloaded": {"llamacpp-router-residency": {GEMMA: "cold", SMOL: "cold"}},
    # --- mlx-lm: /v1/models only (generic openai recipe)
    "mlx-lm/": {"openai-models": (MLX_QWEN,)},
    # --- Ollama: /api/version, /api/ps (size_vram 0 on CPU is a real 0), /api/tags, engine.log
    "ollama/": {
        "openai-models": (OLLAMA_QWEN,),
        "ollama-ps-residency": {OLLAMA_QWEN: "loaded"},
        "ollama-ps-vram": {OLLAMA_QWEN: 0},
        "ollama-tags-size": {OLLAMA_QWEN: 397821319},
    },
    "ollama/v0.12.4": {"ollama-version": "0.12.4"},
    "ollama/v0.34.4": {"ollama-version": "0.34.4", "ollama-log-num-parallel": {"": 2}},
    # --- SGLang: /get_server_info, /metrics; its /api/tags emulation has size 0 (unknown)
    "sglang/": {"openai-models": (QWEN,), "sglang-capacity": {"": 2}},
    "sglang/v0.5.11": {"sglang-version": "0.5.11"},
    "sglang/v0.5.20": {"sglang-version": "0.5.20"},
    "sglang/v0.5.20/busy": {"sglang-running": {QWEN: 2}, "sglang-waiting": {QWEN: 2}},
    # --- vLLM: /metrics per model_name; no /version body survived in the copies
    "vllm/": {"openai-models": (QWEN,)},
    "vllm/v0.30.0/busy": {
        "vllm-running": {QWEN: 2},
        "vllm-waiting": {QWEN: 2},
        "vllm-kv-cache-usage-perc": {QWEN: 0.0014662756598240456},
    },
    # ours (tests/captures/engines/vllm/v0.32.0): --served-model-name smollm2 --max-num-seqs 2
    "vllm/v0.32.0": {"vllm-version": "0.32.0", "openai-models": (SMOL,)},
    "vllm/v0.32.0/idle": {
        "vllm-running": {SMOL: 0},
        "vllm-waiting": {SMOL: 0},
        "vllm-kv-cache-usage-perc": {SMOL: 0.0},
    },
    "vllm/v0.32.0/loaded": {
        "vllm-running": {SMOL: 0},
        "vllm-waiting": {SMOL: 0},
        "vllm-kv-cache-usage-perc": {SMOL: 0.0},
    },
    "vllm/v0.32.0/busy": {
        "vllm-running": {SMOL: 2},
        "vllm-waiting": {SMOL: 2},
        "vllm-kv-cache-usage-perc": {SMOL: 0.0027510316368638543},
    },
    "vllm/v0.32.0/saturated": {
        "vllm-running": {SMOL: 2},
        "vllm-waiting": {SMOL: 6},
        "vllm-kv-cache-usage-perc": {SMOL: 0.0027510316368638543},
    },
    "vllm/v0.32.0/cancelled": {
        "vllm-running": {SMOL: 0},
        "vllm-waiting": {SMOL: 0},
        "vllm-kv-cache-usage-perc": {SMOL: 0.0},
    },
    "vllm/v0.32.0/prefix": {
        "vllm-running": {SMOL: 0},
        "vllm-waiting": {SMOL: 0},
        "vllm-kv-cache-usage-perc": {SMOL: 0.0},
    },
}
