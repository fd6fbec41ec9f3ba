"""Recipes: the probes we trust per engine kind, in priority order (spec §4).

The kind says what we trust (engines emulate each other's endpoints with
well-formed placeholder values); the plan says what answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from pharos.engine import library as lib
from pharos.engine.router_mode import ROUTER_PROBES
from pharos.engine.types import Kind, Probe

# llama.cpp router mode (--models-dir): its probes go right after openai-models; on a
# single-model llama-server they read nothing and resolve drops them ("no value").
LLAMACPP_ROUTER_MODE: tuple[Probe, ...] = ROUTER_PROBES

RECIPES: Mapping[Kind, tuple[Probe, ...]] = MappingProxyType(
    {
        Kind.VLLM: (
            lib.vllm_version,
            lib.openai_models,
            lib.vllm_running,
            lib.vllm_waiting,
            lib.vllm_kv_cache_usage_perc,
        ),
        Kind.LLAMACPP: (
            lib.llamacpp_props_version,
            lib.openai_models,
            *LLAMACPP_ROUTER_MODE,
            lib.llamacpp_props_capacity,
            lib.llamacpp_running,
            lib.llamacpp_waiting,  # guarded: trusted from b8772
            lib.llamacpp_slots_running,  # the fallback when --metrics is off
        ),
        Kind.OLLAMA: (
            lib.ollama_version,
            lib.openai_models,
            lib.ollama_ps_residency,
            lib.ollama_ps_vram,
            lib.ollama_tags_size,
            lib.ollama_log_num_parallel,
        ),
        Kind.LLAMA_SWAP: (lib.llamaswap_version, lib.openai_models, lib.llamaswap_running),
        Kind.SGLANG: (
            lib.sglang_version,
            lib.openai_models,
            lib.sglang_capacity,
            lib.sglang_running,
            lib.sglang_waiting,
        ),
        Kind.OPENAI: (lib.openai_models,),
    }
)
