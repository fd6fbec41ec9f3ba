"""The sessions a run replays: the same ones, seeded, for every policy.

Synthetic chats come from the simulator (pharos.sim.traces); ShareGPT V3 conversations
from pharos.sim.sharegpt (half the users JSON-escaped, as Open WebUI sends them; the data
is fetched by scripts/datasets/fetch-sharegpt.sh). Both are cut
to what one slot of `-np 2 -c 4096` holds (2,048 tokens): MAX_TURNS turns of at most
MAX_TEXT_BYTES (UTF-8) each way plus the system prompt. The synthetic letters tokenize at
~1.9 bytes per token on SmolLM2 (471 prompt tokens for 880 bytes, measured), so 400 bytes
keep a conversation under ~1,800 tokens; ShareGPT text is English at ~4 bytes per token
and CJK at ~3, so 600 bytes keep it under ~1,500.

Each user runs its conversations back to back (the next starts one think time after the
previous ended), and think times are scaled by `think_scale`: at the simulator's 5-30 s a
90 s run serves ~24 turns with 6 users; at 0.25 the two engines are busy, queues form and
where a turn goes matters (the issue's 240 s run served 129-187 turns).

The turns are planned before the run, as the simulator plans them (pharos.sim.run
.planned_turn_counts): those a user would send within the duration if every reply were
instant. Every policy sends the same turns and the hit ratios compare the same prompts; a
run cut at the duration let the faster policy send more, late chats' uncached first turns.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from pharos.sim import clipped
from pharos.sim.clipped import HORIZON_FACTOR, cut_session
from pharos.sim.run import planned_turn_counts
from pharos.sim.sharegpt import DatasetMissing, scenario_sessions
from pharos.sim.traces import Mix, Session, sessions

SOURCES = ("synthetic", "sharegpt")
MAX_TEXT_BYTES = {"synthetic": 400, "sharegpt": clipped.MAX_TEXT_BYTES}


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
    session: Session,
    index: int,
    escaped: bool,
    first: bool,
    think_scale: float,
    limit_bytes: int,
) -> Conversation:
    cut = cut_session(session, first, think_scale, limit_bytes)
    return Conversation(
        user=cut.user,
        index=index,
        start_s=cut.start_s if first else None,
        model=cut.model,
        system=cut.system,
        turns=tuple(
            Turn(t.think_s, t.user_text, t.reply_text, max_tokens=t.completion_tokens)
            for t in cut.turns
        ),
        bypasses_router=cut.bypasses_router,
        json_escaped=escaped,
    )


def _sim_sessions(
    source: str, mix: Mix, duration_s: float, seed: int
) -> Iterable[tuple[Session, bool]]:
    if source == "synthetic":
        return ((s, False) for s in sessions(mix, duration_s, seed))
    try:
        return scenario_sessions(mix, duration_s, seed)
    except DatasetMissing as err:  # names scripts/datasets/fetch-sharegpt.sh
        raise SourceMissing(str(err)) from None


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
    """Every conversation a run replays, in a fixed order (the seed fixes their content), each
    cut to its planned turns (planned). The sessions are drawn over a horizon long enough
    that no user runs out within duration_s."""
    mix = Mix(chat_users=users, noise_users=1 if bypass else 0, models=models)
    made = _sim_sessions(source, mix, duration_s * HORIZON_FACTOR, seed)
    seen: set[str] = set()
    out = []
    for index, (session, escaped) in enumerate(made):
        first = session.user not in seen
        out.append(_cut(session, index, escaped, first, think_scale, MAX_TEXT_BYTES[source]))
        seen.add(session.user)
    return planned(out, duration_s)


def planned(convs: list[Conversation], duration_s: float) -> list[Conversation]:
    """The conversations, in order, each with the turns its user sends within duration_s on
    an instant fleet; a user's later ones dropped."""
    by_user: dict[str, list[Conversation]] = {}
    for conv in convs:
        by_user.setdefault(conv.user, []).append(conv)
    kept: dict[int, int] = {}  # conversation index -> turns
    for mine in by_user.values():
        plan = ((c.start_s or 0.0, [t.think_s for t in c.turns]) for c in mine)
        for conv, turns in zip(mine, planned_turn_counts(plan, duration_s, 0.0), strict=False):
            kept[conv.index] = turns
    return [
        dataclasses.replace(c, turns=c.turns[: kept[c.index]]) for c in convs if c.index in kept
    ]
