"""Open WebUI 0.12.4, recorded from its UI through both connections (scripts/clients/
record_open_webui.py), replayed through Pharos in front of two fake engines (spec §14 client
captures, issue 16): every request answered as recorded, turns 2+ routed to the engine holding
the conversation's prefix and predicted within the spec's 1.5x of what the engine reports
cached (§6), and every reply metered to the key that sent it."""

from __future__ import annotations

import dataclasses

import pytest

from pharos.fakeengine import FakeEngine, FakeLlamaCpp, FakeModel, FakeOllama, Ledger
from tests.clients.replay import (
    CLIENTS,
    KEY_NAME,
    REPLAY_CONFIG,
    Gates,
    Recorded,
    Replayed,
    load,
    replay,
)
from tests.proxy.rig import Backend, Rig, RigFactory

MODEL = "qwen2.5:0.5b"  # what Open WebUI asked for (its prefix ID "pharos." stripped)
RECORDED = CLIENTS / "open-webui"


def fakes(connection: str, slots: int, gates: Gates) -> list[Backend]:
    ledger = Ledger(slots=slots)
    engines: list[FakeEngine]
    if connection == "ollama":
        engines = [FakeOllama([FakeModel(MODEL)], ledger=ledger, sleep=gates.sleep) for _ in "ab"]
        return [Backend(gates.gate(e), capacity=slots) for e in engines]
    engines = [FakeLlamaCpp(ledger=ledger, sleep=gates.sleep) for _ in "ab"]
    return [Backend(gates.gate(e), aliases={"qwen2.5-0.5b": MODEL}) for e in engines]


def turns(replayed: list[Replayed]) -> list[Replayed]:
    return [x for x in replayed if x.request.is_turn]


async def replayed_chat(rig: RigFactory, connection: str, slots: int) -> tuple[Rig, list[Replayed]]:
    records = load(RECORDED / f"0.12.4-{connection}")
    gates = Gates()
    r = await rig(*fakes(connection, slots, gates), config=REPLAY_CONFIG)
    if connection == "ollama":
        await warm(r)
    return r, await replay(r, records, gates)


async def warm(r: Rig) -> None:
    """Loads the model on both fake Ollamas (straight, not through Pharos): the recording's
    engines were warm, and a load is not what these tests judge."""
    for url in r.urls:
        body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": False}
        async with r.client.post(url + "/api/chat", json=body) as response:
            assert response.status == 200
        await r.until_loaded(url, MODEL)


# connection  recorded through   turns  side requests beside them
# openai      /v1 (prefix ID)    4      title, tags, follow-ups
# ollama      /api (key set)     4      title, tags, follow-ups
CONNECTIONS = ["openai", "ollama"]


@pytest.mark.parametrize("connection", CONNECTIONS)
async def test_every_recorded_request_is_answered_as_recorded_and_names_the_model(
    rig: RigFactory, connection: str
) -> None:
    _, replayed = await replayed_chat(rig, connection, slots=2)
    assert len(turns(replayed)) >= 3
    for x in replayed:
        assert x.status == x.request.status == 200, (x.request.seq, x.request.path, x.reply[:200])
        if x.done is not None:
            assert x.done.model == MODEL and x.done.key == KEY_NAME
            assert MODEL.encode() in x.reply and b"qwen2.5-0.5b" not in x.reply


@pytest.mark.parametrize("connection", CONNECTIONS)
async def test_every_reply_is_metered_to_the_key_that_sent_it(
    rig: RigFactory, connection: str
) -> None:
    r, replayed = await replayed_chat(rig, connection, slots=2)
    served = [x.done for x in replayed if x.done is not None]
    assert served and all(d.metered for d in served)
    (row,) = [row for row in r.pharos.usage.today_by_key() if row.key == KEY_NAME]
    assert row.requests == len(served) and row.unmetered == 0
    assert row.prompt_tokens == sum(d.prompt_tokens or 0 for d in served) > 0
    assert row.completion_tokens == sum(d.completion_tokens or 0 for d in served) > 0


def assert_turns_follow_their_prefix(replayed: list[Replayed]) -> None:
    chat = turns(replayed)
    first = chat[0].done
    assert first is not None
    for x in chat[1:]:
        done = x.done
        assert done is not None
        where = (x.request.seq, done.backend_url, first.backend_url, done.reason)
        assert done.backend_url == first.backend_url, where
        assert ("prefix", "predicted_hit") in done.decisions, (where, done.decisions)
        cached, predicted = done.cached_tokens, x.predicted_tokens()
        assert cached is not None and cached > 1000, where  # 36 tools, ~6,200 tokens
        assert predicted is not None and cached / 1.5 <= predicted <= cached * 1.5, (
            where,
            predicted,
            cached,
        )


# connection  slots per engine  recorded overlap
# openai      2                 the title call runs beside turn 1; the others come after it
# openai      4                 same
# ollama      2                 same
# ollama      4                 same
@pytest.mark.parametrize("slots", [2, 4])
@pytest.mark.parametrize("connection", CONNECTIONS)
async def test_later_turns_go_where_the_prefix_is_with_the_recorded_side_requests(
    rig: RigFactory, connection: str, slots: int
) -> None:
    assert_turns_follow_their_prefix((await replayed_chat(rig, connection, slots=slots))[1])


def with_side_requests_running_on(records: list[Recorded]) -> list[Recorded]:
    """The recording, with the title and follow-up calls of turn 1 still generating when its
    tags call arrives: as in issue 16's run, where the demo's title call generated 1,000
    tokens (31 s). The tags call then finds one free slot per engine, one of them turn 1's."""
    turn = next(i for i, x in enumerate(records) if x.is_turn)
    title, follow_ups, tags = records[turn - 1], records[turn + 1], records[turn + 2]
    assert b"title" in title.body and b"follow" in follow_ups.body and b"tags" in tags.body
    assert tags.done_s is not None
    stretched = list(records)
    stretched[turn - 1] = dataclasses.replace(title, done_s=tags.done_s + 0.02)
    stretched[turn + 1] = dataclasses.replace(follow_ups, done_s=tags.done_s + 0.01)
    return stretched


# connection  slots  title call          follow-ups call            tags call
# openai      2      holds engine B's    holds engine A's other     takes turn 1's slot on A
# ollama      2      same                same                       same
@pytest.mark.parametrize("connection", CONNECTIONS)
async def test_a_turn_keeps_its_slot_when_side_requests_still_run_as_the_next_arrives(
    rig: RigFactory, connection: str
) -> None:
    gates = Gates()
    r = await rig(*fakes(connection, 2, gates), config=REPLAY_CONFIG)
    if connection == "ollama":
        await warm(r)
    records = with_side_requests_running_on(load(RECORDED / f"0.12.4-{connection}"))
    assert_turns_follow_their_prefix(await replay(r, records, gates))
