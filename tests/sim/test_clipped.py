"""The simulator replays `make scenario`'s sessions as its client sends them (issue 15)."""

import asyncio
import dataclasses

import pytest

from pharos.sim.clipped import MAX_COMPLETION_TOKENS, MAX_TEXT_BYTES, MAX_TURNS, cut_session
from pharos.sim.engines import Flavour, HostSpec, Served, SimEngine
from pharos.sim.traces import Mix, Session, build_request, sessions
from pharos.sim.vloop import run_virtual


def a_session(echoes_reply: bool = True) -> Session:
    session = next(iter(sessions(Mix(chat_users=1), 600.0, 3)))
    return dataclasses.replace(session, echoes_reply=echoes_reply)


def turns_one_and_two(echoes_reply: bool) -> tuple[int, Served]:
    session = a_session(echoes_reply)
    first, second = build_request(session, 0), build_request(session, 1)
    spec = HostSpec("e", Flavour.LLAMACPP, prefill_s_per_token=0.001, decode_s_per_token=0.001)

    async def main() -> Served:
        engine = SimEngine(spec, asyncio.get_running_loop())
        await engine.serve(first.prompt)
        return await engine.serve(second.prompt)

    return first.prompt.tokens, run_virtual(main())


@pytest.mark.parametrize("echoes_reply", [True, False])
def test_a_follow_up_finds_the_reply_cached_only_when_the_client_sent_back_the_engines(
    echoes_reply: bool,
) -> None:
    asked_tokens, second = turns_one_and_two(echoes_reply)
    if echoes_reply:
        assert second.cached_tokens > asked_tokens  # the previous prompt and its reply
    else:
        assert second.cached_tokens == asked_tokens  # the previous prompt only


def test_sessions_are_cut_as_the_scenario_client_cuts_them() -> None:
    session = dataclasses.replace(a_session(), system="s" * 5000)
    first, later = cut_session(session, True, 0.5), cut_session(session, False, 0.5)
    assert len(first.turns) == min(MAX_TURNS, len(session.turns))
    for turn in first.turns:
        assert len(turn.user_text.encode()) <= MAX_TEXT_BYTES
        assert len(turn.reply_text.encode()) <= MAX_TEXT_BYTES
        assert turn.completion_tokens <= MAX_COMPLETION_TOKENS
    assert len(first.system.encode()) == 2 * MAX_TEXT_BYTES
    assert first.turns[1].think_s == pytest.approx(0.5 * session.turns[1].think_s)
    assert first.start_s == pytest.approx(0.5 * session.start_s)
    # a later conversation opens one (scaled) think time after the previous one ended
    assert later.start_s == 0.0
    assert later.turns[0].think_s == pytest.approx(0.5 * session.turns[1].think_s)
    assert not first.echoes_reply
