"""ShareGPT sessions as `make scenario`'s client sends them (benchmarks/scenario), so the
simulator replays what the real engines were given, turn for turn (issue 15).

The scenario's conversations.py cuts each session to what one slot of `-np 2 -c 4096` holds:
at most 4 turns, messages clipped to 600 UTF-8 bytes (the system prompt to 1,200), at most
48 completion tokens, think times scaled (x0.5 in the README's runs), a user's conversations
back to back. Its client then sends ShareGPT's answer back as the assistant message, not
what the engine generated: the engine's slot holds its own 48 tokens, so a follow-up finds
only the previous prompt cached (diagnostic run 2026-12-01, pharos-cost, equal fleet: every
second turn predicted the reply cached, e.g. 172 tokens, and the engine reported cache_n 31).
The sessions are drawn over the scenario's horizon (20x the run) with the same seed, so the
same chats come in the same order as on the real engines.
"""

from __future__ import annotations

import dataclasses

from pharos.sim import sharegpt
from pharos.sim.traces import Mix, Session, TurnSpec

MAX_TURNS = 4
MAX_TEXT_BYTES = 600
MAX_COMPLETION_TOKENS = 48
HORIZON_FACTOR = 20.0


def clip(text: str, limit_bytes: int) -> str:
    """The longest prefix of `text` within limit_bytes of UTF-8 (never half a character)."""
    return text.encode()[:limit_bytes].decode(errors="ignore")


def cut_session(
    session: Session, first: bool, think_scale: float, limit_bytes: int = MAX_TEXT_BYTES
) -> Session:
    """The session as the scenario's client replays it (benchmarks/scenario/conversations.py
    converts this to what it sends): a user's first conversation starts at its scaled start,
    later ones one think time after the previous ended (start 0.0 here)."""
    scale = 1.0 if session.bypasses_router else think_scale
    gap_s = session.turns[1].think_s if len(session.turns) > 1 else 5.0
    turns = tuple(
        TurnSpec(
            think_s=scale * (t.think_s if number > 0 or first else gap_s),
            user_text=clip(t.user_text, limit_bytes),
            reply_text=clip(t.reply_text, limit_bytes),
            completion_tokens=min(MAX_COMPLETION_TOKENS, t.completion_tokens),
        )
        for number, t in enumerate(session.turns[:MAX_TURNS])
    )
    return dataclasses.replace(
        session,
        start_s=scale * session.start_s if first else 0.0,
        system=clip(session.system, 2 * limit_bytes),
        turns=turns,
        echoes_reply=False,
    )


def scenario_client_sessions(
    mix: Mix, duration_s: float, seed: int, think_scale: float
) -> list[Session]:
    """The sessions the real-engine scenario replays for this mix and seed, as it cuts them."""
    drawn = sharegpt.load_sessions(
        users=mix.chat_users,
        seed=seed,
        duration_s=duration_s * HORIZON_FACTOR,
        noise_users=mix.noise_users,
        models=mix.models,
    )
    seen: set[str] = set()
    out = []
    for session in drawn:
        out.append(cut_session(session, session.user not in seen, think_scale))
        seen.add(session.user)
    return out
