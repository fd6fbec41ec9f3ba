"""The one place for every number the fake engines stand in for (spec §14, Assumptions ledger).

Captures record raw bodies; the latency, memory, cache and capacity numbers
below are synthetic. Each says where it comes from: "measured" values come
from the spec's ledger or ENGINE-FACTS, the rest are assumed and stay here
until live input replaces them. A fake that shares the router's assumption
cannot catch it, so tests that probe a model inject their own Ledger.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Ledger:
    bytes_per_token: float = 4.0
    """Measured: 2.8-6.2 bytes of DECODED text per token (spec ledger, 2026-09-29 spike)."""
    prefill_s_per_token: float = 0.005
    """Measured on CPU, Qwen2.5-0.5B, 3.1-15 ms (spec ledger `policy.Defaults`)."""
    decode_s_per_token: float = 0.03
    """Assumed (spec ledger, `internal/sim` fleet)."""
    load_s: float = 8.0
    """Assumed (spec ledger, `internal/sim` fleet); charged when a model is cold."""
    memory_bytes: int = 10 * 10**9
    """Assumed 10 GB per host (spec ledger, sim); Ollama unloads LRU idle models above it."""
    slots: int = 2
    """Captures: every pinned capture ran 2 parallel slots (meta.yaml capacity: 2)."""
    cache_block_tokens: int = 16
    """Assumed 16-token blocks for vLLM's shared prefix cache (spec ledger). The vLLM
    v0.30.0 CPU capture reports block_size="128" in vllm:cache_config_info; both give
    the recorded 3200 cached of 3209."""
    shared_cache_tokens: int = 32_000
    """Assumed 32k-token shared cache (spec ledger, sim)."""
    keep_alive_s: float = 300.0
    """Assumed: Ollama's default keep-alive [U]; a model idle this long goes cold."""
    reply_tokens: int = 10
    """Captures: the recorded chat stream generated 10 tokens (9 content chunks + stop)."""
    natural_stop: bool = True
    """A reply ends after its words (as an engine stops at end-of-sequence) even when the
    client allows more tokens; False: it runs to max_tokens (a deliberately long reply)."""
    tools_in_prompt: bool = True
    """The chat template renders `tools` as prompt text ahead of the messages (Qwen, llama.cpp
    --jinja: 6,257 of 6,258 cached); False: it drops them, as SmolLM2's does (52 cached,
    live), so they are neither prompt tokens nor cached."""
    embedding_dims: int = 4
    """Synthetic: the fakes' embedding vectors (the recorded all-minilm had 384)."""


DEFAULT_LEDGER = Ledger()
