"""The scenarios `pharos sim` runs, each testing one claim (spec §14 layer 5, §16).

Host numbers: `llamacpp` mirrors the real-engine run of issue 15 (SmolLM2-135M on one
CPU thread, ~170 prefill tok/s, 2 slots); `fast`/`slow` differ in speed by 3x; the
Ollama fleet is the spec's first simulator runs (3 hosts that each fit 2 of 3 models).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from pharos.sim.engines import Flavour, HostSpec
from pharos.sim.run import Scenario
from pharos.sim.traces import Mix


def _cpu(name: str, speed: float = 1.0, host_cache_tokens: int = 200_000) -> HostSpec:
    return HostSpec(
        name,
        Flavour.LLAMACPP,
        prefill_s_per_token=1 / 170 / speed,
        decode_s_per_token=1 / 60 / speed,
        host_cache_tokens=host_cache_tokens,
    )


def _ollama(name: str) -> HostSpec:
    """Ollama 0.34.4: each loaded model's llama-server keeps a host prompt cache limited to
    its context, `-c 8192` at OLLAMA_NUM_PARALLEL:2 (captures/engines/ollama/v0.34.4/
    engine.log: "prompt cache is enabled", "limits: 8192.000 MiB, 8192 tokens")."""
    return HostSpec(
        name,
        Flavour.OLLAMA,
        models=("a", "b", "c"),
        model_gb=(4.0, 4.0, 4.0),
        memory_gb=9.0,
        load_s=8.0,
        host_cache_tokens=8192,
    )


_EQUAL = (_cpu("e0"), _cpu("e1"))
_SPEED = (_cpu("e0", 246 / 170), _cpu("e1", 136 / 170))


def _real(
    name: str,
    description: str,
    hosts: tuple[HostSpec, ...],
    *,
    bypass: bool = False,
    shared_key: bool = True,
    engines_differ: bool = False,
) -> Scenario:
    """`make scenario`'s sessions as its client sends them (pharos.sim.clipped), 300 s, think
    x0.5; `bypass`: its client loading e0 directly, unseen by the router."""
    return Scenario(
        name,
        description,
        hosts,
        Mix(chat_users=6, noise_users=1 if bypass else 0),
        duration_s=300.0,
        source="scenario",
        think_scale=0.5,
        shared_key=shared_key,
        engines_differ=engines_differ or bypass,
    )


SCENARIOS: Mapping[str, Scenario] = MappingProxyType(
    {
        s.name: s
        for s in (
            Scenario(
                "chat",
                "two equal llama.cpp hosts, six users in multi-turn chats",
                (_cpu("e0"), _cpu("e1")),
                Mix(chat_users=6),
            ),
            Scenario(
                "noisy",
                "as chat, and a client loading e0 directly, unseen by the router",
                (_cpu("e0"), _cpu("e1")),
                Mix(chat_users=6, noise_users=2),
                engines_differ=True,
            ),
            Scenario(
                "hetero",
                "a fast and a slow host (3x apart), six chat users",
                (_cpu("fast", 2.0), _cpu("slow", 2.0 / 3.0)),
                Mix(chat_users=6),
                engines_differ=True,
            ),
            Scenario(
                "agents",
                "coding agents (2k-token system, 36 tools) and classifier calls on two hosts",
                (_cpu("e0", 3.0), _cpu("e1", 3.0)),
                Mix(chat_users=2, agent_users=3, classifier_users=2),
            ),
            Scenario(
                "cold-burst",
                "three Ollama hosts each fitting 2 of 3 models; chats on a and b, a burst on c",
                (_ollama("o0"), _ollama("o1"), _ollama("o2")),
                Mix(
                    chat_users=8,
                    burst_users=8,
                    burst_at_s=120.0,
                    models=("a", "b"),
                    burst_model="c",
                ),
            ),
            Scenario(
                "webui",
                "two Open WebUI users (a title and a tags call beside each turn) on two hosts "
                "4x faster that cache per slot only (llama.cpp without --cache-ram; Ollama alike)",
                (_cpu("e0", 4.0, host_cache_tokens=0), _cpu("e1", 4.0, host_cache_tokens=0)),
                Mix(chat_users=2, side_calls=2),
            ),
            Scenario(
                "sharegpt-webui",
                "as webui, the users replaying ShareGPT chats",
                (_cpu("e0", 4.0, host_cache_tokens=0), _cpu("e1", 4.0, host_cache_tokens=0)),
                Mix(chat_users=2, side_calls=2),
                source="sharegpt",
            ),
            Scenario(
                "sharegpt",
                "two equal llama.cpp hosts, six users replaying ShareGPT chats",
                (_cpu("e0"), _cpu("e1")),
                Mix(chat_users=6),
                source="sharegpt",
            ),
            Scenario(
                "sharegpt-noisy",
                "as sharegpt, and a ShareGPT client loading e0 directly, unseen by the router",
                (_cpu("e0"), _cpu("e1")),
                Mix(chat_users=6, noise_users=1),
                source="sharegpt",
                engines_differ=True,
            ),
            _real(
                "real-equal",
                "`make scenario --fleet equal` mirrored: its ShareGPT sessions cut as its "
                "client sends them (4 turns, 600 bytes, 48 tokens, think x0.5, ShareGPT's "
                "answers sent back, one API key) on two equal llama.cpp hosts",
                _EQUAL,
            ),
            _real(
                "real-bypass",
                "as real-equal, and the scenario's bypassing client loading e0 directly",
                _EQUAL,
                bypass=True,
            ),
            _real(
                "real-speed",
                "as real-equal on the speed fleet: e0 prefilled 246 tok/s on 2 threads, e1 136 "
                "on 1 (the README's quieter run)",
                _SPEED,
                engines_differ=True,
            ),
            Scenario(
                "sharegpt-hetero",
                "a fast and a slow host (3x apart), six users replaying ShareGPT chats",
                (_cpu("fast", 2.0), _cpu("slow", 2.0 / 3.0)),
                Mix(chat_users=6),
                source="sharegpt",
                engines_differ=True,
            ),
            Scenario(
                "cold-burst-heavy",
                "as cold-burst, with 16 users in the burst on c (issue 15: pre-emptive warming "
                "of a second replica)",
                (_ollama("o0"), _ollama("o1"), _ollama("o2")),
                Mix(
                    chat_users=8,
                    burst_users=16,
                    burst_at_s=120.0,
                    models=("a", "b"),
                    burst_model="c",
                ),
            ),
            _real(
                "real-equal-keys",
                "as real-equal with one API key per user (`make scenario --key-per-user`, "
                "how a team runs it)",
                _EQUAL,
                shared_key=False,
            ),
            _real(
                "real-bypass-keys",
                "as real-bypass with one API key per user",
                _EQUAL,
                bypass=True,
                shared_key=False,
            ),
            _real(
                "real-speed-keys",
                "as real-speed with one API key per user",
                _SPEED,
                engines_differ=True,
                shared_key=False,
            ),
        )
    }
)
