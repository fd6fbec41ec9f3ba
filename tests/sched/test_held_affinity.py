"""A key's next new conversation goes home: where its latest recent conversation ended (issue 15).

Cost sent each new chat to the least utilized target of the moment; a person's chats now stay
where their last one went unless another target saves more than PolicyConfig.away_s. A key
with two requests in flight at once (one Open WebUI, `make scenario`'s anonymous key) is
shared and gets no home.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from pharos.clock import FakeClock
from pharos.policy import DEFAULT_CONFIG
from pharos.prefix import Chain, Match, PrefixIndex
from pharos.prefix.slots import Source
from pharos.sched import Lease, RouteRequest, Scheduler
from pharos.sched.held_affinity import (
    AFFINITY_WINDOW_S,
    SPREAD_WINDOW_S,
    KeyHomes,
    is_new_conversation,
)
from tests.sched.fakes import FakeTargets, make_view, ok

SYSTEM = 11


def chat(first_user: int, turns: int = 1) -> Chain:
    """A chat's chain: the shared system prompt (400 bytes), then 800 bytes a message."""
    hashes = (SYSTEM, *(first_user * 100 + i for i in range(2 * turns - 1)))
    return Chain(hashes, tuple(400 + 800 * i for i in range(len(hashes))))


def chain_of(*links: int) -> Chain:
    return Chain(links, tuple(100 * (i + 1) for i in range(len(links))))


def fresh(n: int) -> Chain:
    """A first turn sharing nothing with any other: no target's cache tells them apart."""
    return chain_of(n * 10, n * 10 + 1)


# each conversation that ended as (key, its chain's links, target, seconds after the start),
# then when asked: the key's home (-1: none)
HOME_CASES = [
    ([], 0.0, -1),  # nothing ended: no home
    ([("k", (1, 2), 7, 0.0)], 10.0, 7),  # one conversation: where it ended
    ([("k", (1, 2), 7, 0.0), ("k", (1, 2, 3, 4), 8, 5.0)], 10.0, 8),  # the same chat moved
    ([("k", (1, 2), 7, 0.0), ("k", (1, 5), 8, 5.0)], 10.0, 8),  # two chats: the latest's
    ([("k", (1, 5), 8, 0.0), ("k", (1, 2), 7, 5.0)], 10.0, 7),
    ([("k", (1, 2), 7, 0.0), ("k", (1, 5), 8, AFFINITY_WINDOW_S + 1)], AFFINITY_WINDOW_S + 2, 8),
    ([("k", (1, 2), 7, 0.0)], AFFINITY_WINDOW_S + 0.5, -1),  # too long ago
    ([("other", (1, 2), 7, 0.0)], 10.0, -1),  # another key's chat is not this key's
]


@pytest.mark.parametrize(("ended", "asked_at", "home"), HOME_CASES)
def test_a_key_has_a_home_where_its_latest_recent_conversation_ended(
    ended: list[tuple[str, tuple[int, ...], int, float]], asked_at: float, home: int
) -> None:
    homes = KeyHomes()
    for key, links, target_id, at in ended:
        homes.ended(key, chain_of(*links), target_id, at)
    assert homes.home_of("k", asked_at) == home


def test_keys_gone_quiet_are_swept_once_the_map_is_full() -> None:
    homes = KeyHomes(max_keys=3)
    for n in range(3):
        homes.ended(f"old{n}", chain_of(1, n + 2), 1, 0.0)
    homes.ended("new", chain_of(1, 9), 2, AFFINITY_WINDOW_S + 1)
    assert len(homes) == 1
    assert homes.home_of("new", AFFINITY_WINDOW_S + 2) == 2


def _match(matched_bytes: int) -> Match:
    return Match(matched_bytes, Source.LOCAL)


# the matches the index found (target -> bytes): whether the request opens a new conversation
NEW_CASES = [
    ({}, True),  # nothing cached anywhere
    ({1: _match(400)}, True),  # only the shared system prompt
    ({1: _match(400), 2: _match(1200)}, False),  # a target holds the earlier turn
]


@pytest.mark.parametrize(("matches", "new"), NEW_CASES)
def test_a_new_conversation_shares_at_most_its_first_message(
    matches: dict[int, Match], new: bool
) -> None:
    assert is_new_conversation(chat(3, turns=2), matches) is new


def test_a_one_message_request_is_not_taken_for_a_conversation() -> None:
    assert is_new_conversation(chain_of(5), {}) is False


async def _one_turn(sched: Scheduler, clock: FakeClock, key: str, chain: Chain, seed: int) -> Lease:
    lease = await sched.acquire(key, 1, RouteRequest("m", 600, chain, seed))
    clock.advance(2.0)
    lease.release(ok(prompt_tokens=600, cached_tokens=0))
    return lease


def sched_with(targets: FakeTargets, clock: FakeClock, **config: float) -> Scheduler:
    """A scheduler whose policy config is the default but for `config`'s fields."""
    policy_config = dataclasses.replace(DEFAULT_CONFIG, **config)
    return Scheduler(targets, PrefixIndex(clock=clock), clock, policy_config=policy_config)


# away_s: where alice's second chat goes while bob holds one slot of her first chat's target
AWAY_CASES = [
    (DEFAULT_CONFIG.away_s, "home"),  # home: a free slot there, the other target idler
    (0.0, "other"),  # off: the least utilized target, as before
]


@pytest.mark.parametrize(("away_s", "where"), AWAY_CASES)
async def test_a_persons_next_chat_goes_where_their_last_one_ended(
    targets: FakeTargets, clock: FakeClock, away_s: float, where: str
) -> None:
    targets.add(make_view(1))
    targets.add(make_view(2))
    sched = sched_with(targets, clock, away_s=away_s)
    first = await _one_turn(sched, clock, "alice", fresh(1), seed=1)
    home = first.target.target_id
    other = 3 - home
    # bob's chat on alice's home: without a home, her next chat would go to the idle target
    excluded = frozenset({other})  # bob's request may only go to alice's home
    bob = await sched.acquire("bob", 1, RouteRequest("m", 600, fresh(2), 2, excluded))
    assert bob.target.target_id == home
    clock.advance(5.0)
    second = await sched.acquire("alice", 1, RouteRequest("m", 600, fresh(3), 3))
    assert second.target.target_id == (home if where == "home" else other)


async def test_a_shared_key_with_two_recent_chats_has_no_home(
    targets: FakeTargets, clock: FakeClock
) -> None:
    targets.add(make_view(1))
    targets.add(make_view(2))
    sched = sched_with(targets, clock)
    a = await sched.acquire("team", 1, RouteRequest("m", 600, fresh(1), 1))
    b = await sched.acquire("team", 1, RouteRequest("m", 600, fresh(2), 2))
    assert {a.target.target_id, b.target.target_id} == {1, 2}
    clock.advance(2.0)
    a.release(ok())
    b.release(ok())
    # bob takes a slot where the team's newest chat ended: a home there would outweigh load
    excluded = frozenset({a.target.target_id})
    bob = await sched.acquire("bob", 1, RouteRequest("m", 600, fresh(4), 4, excluded))
    assert bob.target.target_id == b.target.target_id
    clock.advance(5.0)
    third = await sched.acquire("team", 1, RouteRequest("m", 600, fresh(3), 3))
    assert third.target.target_id == a.target.target_id  # by load, as without affinity


def test_a_key_with_a_request_in_flight_has_no_home() -> None:
    """`make scenario`'s one key: its first reply ended while five more first turns arrived."""
    homes = KeyHomes()
    homes.ended("k", chain_of(1, 2), 7, 0.0)
    homes.started("k")
    assert homes.home_of("k", 1.0) == -1
    homes.left("k")
    assert homes.home_of("k", 1.0) == 7


def test_a_key_that_sent_a_side_call_has_no_home() -> None:
    """An Open WebUI's title and tags calls: one key for every person using it."""
    homes = KeyHomes()
    homes.ended("webui", chain_of(1, 2), 7, 0.0)
    homes.side_call_from("webui")
    assert homes.home_of("webui", 1.0) == -1


def test_a_key_is_shared_once_two_of_its_requests_are_in_flight_at_once() -> None:
    """A person waits for each reply; `make scenario`'s one key carries six people."""
    homes = KeyHomes()
    homes.started("alice")
    homes.left("alice")
    homes.started("alice")
    assert homes.shared("alice") is False
    homes.started("alice")
    assert homes.shared("alice") is True
    homes.left("alice")
    homes.left("alice")
    assert homes.shared("alice") is True  # for good: the key carries several people
    homes.ended("alice", chain_of(1, 2), 7, 0.0)
    assert homes.home_of("alice", 1.0) == -1  # and it has no home


# what is counted per target (live conversations: a shared key's spread; people: a person's
# first chat's), the conversations that ended (key, links, target, at), new ones in flight
# (target), asked at: the count per target
COUNT_CASES = [
    ("conversations", [], [], 10.0, {}),
    (
        "conversations",
        [("k", (1, 2), 7, 0.0), ("k", (1, 5), 7, 1.0), ("j", (1, 9), 8, 2.0)],
        [],
        10.0,
        {7: 2, 8: 1},
    ),
    ("conversations", [("k", (1, 2), 7, 0.0), ("k", (1, 2, 3, 4), 8, 5.0)], [], 10.0, {8: 1}),
    (
        "conversations",
        [("k", (1, 2), 7, 0.0), ("k", (1, 5), 8, 50.0)],
        [],
        SPREAD_WINDOW_S + 1,
        {8: 1},
    ),
    ("conversations", [("k", (1, 2), 7, 0.0)], [7, 8, 8], 1.0, {7: 2, 8: 2}),  # in flight count
    ("people", [], [], 10.0, {}),
    (
        "people",
        [("ann", (1, 2), 7, 0.0), ("ben", (3, 4), 7, 1.0), ("cat", (5, 6), 8, 2.0)],
        [],
        10.0,
        {7: 2, 8: 1},
    ),
    ("people", [("ann", (1, 2), 7, 0.0), ("ann", (5, 6), 8, 5.0)], [], 10.0, {8: 1}),  # latest
    (
        "people",
        [("ann", (1, 2), 7, 0.0), ("ben", (3, 4), 8, 50.0)],
        [],
        AFFINITY_WINDOW_S + 1,
        {8: 1},
    ),
    ("people", [("ann", (1, 2), 7, 0.0)], [7, 8], 1.0, {7: 2, 8: 1}),  # first chats in flight
]


@pytest.mark.parametrize(("counted", "ended", "opening", "asked_at", "count"), COUNT_CASES)
def test_conversations_are_live_and_people_are_where_their_latest_chat_ended_or_is_in_flight(
    counted: str,
    ended: list[tuple[str, tuple[int, ...], int, float]],
    opening: list[int],
    asked_at: float,
    count: dict[int, int],
) -> None:
    assert getattr(homes_after(ended, opening), counted)(asked_at) == count


def homes_after(
    ended: list[tuple[str, tuple[int, ...], int, float]], opening: list[int]
) -> KeyHomes:
    """A KeyHomes whose conversations (key, links, target, at) ended and whose new ones went
    to `opening`'s targets, in flight."""
    homes = KeyHomes()
    for key, links, target_id, at in ended:
        homes.ended(key, chain_of(*links), target_id, at)
    for n, target_id in enumerate(opening):
        homes.opened(("lease", n), target_id)
    return homes


def test_a_first_turn_in_flight_counts_until_its_lease_closes() -> None:
    homes = KeyHomes()
    homes.opened("a", 7)
    homes.opened("b", 7)
    homes.closed("a")
    homes.closed("not opened")
    assert homes.conversations(0.0) == {7: 1}
    homes.closed("b")
    assert homes.conversations(0.0) == {}


async def _team_chats_then_bob(sched: Scheduler) -> Lease:
    """The team's key (shared: two requests at once) ends three chats on target 1 and one on 2;
    then bob's turn holds a slot of 2."""
    to_1, to_2 = frozenset({2}), frozenset({1})
    first = [
        await sched.acquire("team", 1, RouteRequest("m", 600, fresh(n), n, to_1)) for n in (1, 2)
    ]
    for lease in first:
        lease.release(ok())
    for n, only in ((3, to_1), (4, to_2)):
        lease = await sched.acquire("team", 1, RouteRequest("m", 600, fresh(n), n, only))
        lease.release(ok())
    return await sched.acquire("bob", 1, RouteRequest("m", 600, fresh(9), 9, to_2))


# spread_s: where the team's next new chat goes
SPREAD_CASES = [
    (DEFAULT_CONFIG.spread_s, 2),  # 1 holds 3 live chats, 2 one: 0.15 s against 0.05 s
    (0.0, 1),  # off: the least utilized target of the moment (bob holds one of 2's slots)
]


@pytest.mark.parametrize(("spread_s", "chosen"), SPREAD_CASES)
async def test_a_shared_keys_new_chat_goes_where_fewer_of_the_live_chats_are(
    targets: FakeTargets, clock: FakeClock, spread_s: float, chosen: int
) -> None:
    targets.add(make_view(1))
    targets.add(make_view(2))
    config = dataclasses.replace(DEFAULT_CONFIG, spread_s=spread_s)
    sched = Scheduler(targets, PrefixIndex(clock=clock), clock, policy_config=config)
    bob = await _team_chats_then_bob(sched)
    clock.advance(5.0)
    chat = await sched.acquire("team", 1, RouteRequest("m", 600, fresh(5), 5))
    assert chat.target.target_id == chosen
    bob.release(ok())


def test_a_key_is_one_persons_until_it_is_shared_or_sends_side_calls() -> None:
    homes = KeyHomes()
    assert homes.one_person("alice") is True
    homes.started("team")
    homes.started("team")
    homes.side_call_from("webui")
    assert (homes.one_person("team"), homes.one_person("webui")) == (False, False)


def long_system_chat(first_user: int) -> Chain:
    """A chat whose system prompt (4,000 bytes, ~1,000 tokens) is most of its first turn."""
    return Chain((SYSTEM, first_user * 100), (4000, 4400))


async def _system_prompt_on_a_full_target(
    sched: Scheduler, clock: FakeClock
) -> tuple[int, list[Lease]]:
    """Alice's chat leaves the system prompt cached on one target, then two fresh chats that
    may only go there hold both its slots. Returns that target and their leases."""
    first = await sched.acquire("alice", 1, RouteRequest("m", 1100, long_system_chat(1), 1))
    clock.advance(2.0)
    first.release(ok(prompt_tokens=1100, cached_tokens=0))
    held = first.target.target_id
    excluded = frozenset({3 - held})
    holders = [
        await sched.acquire(f"holder{n}", 1, RouteRequest("m", 600, fresh(n), n, excluded))
        for n in (5, 6)
    ]
    assert {lease.target.target_id for lease in holders} == {held}
    return held, holders


# the key's new chat (its first turn ~1,100 tokens, ~1,000 of them the system prompt cached on
# the full target): where it goes
NEW_CHAT_CASES = [
    ("carol", False, "idle"),  # one person's: its system prompt is no rework
    ("team", True, "held"),  # a key many people share: charged as before, it waits
]


@pytest.mark.parametrize(("key", "shared", "where"), NEW_CHAT_CASES)
async def test_only_a_persons_new_chat_leaves_the_full_target_holding_its_system_prompt(
    targets: FakeTargets, clock: FakeClock, key: str, shared: bool, where: str
) -> None:
    """Chat seed 12: the six users' first chats all queued for the engine holding the system
    prompt (8.7 s at most) while the other idled: its copy was charged as a conversation's
    rework (3.5x its prefill). A shared key keeps the charge: `pharos sim`, seeds 1-20, tie
    streams 0-3, real-bypass lost more without it."""
    targets.add(make_view(1))
    targets.add(make_view(2))
    sched = sched_with(targets, clock)
    held, holders = await _system_prompt_on_a_full_target(sched, clock)
    if shared:  # two of its requests in flight at once
        both = [await sched.acquire(key, 1, RouteRequest("m", 600, fresh(n), n)) for n in (7, 8)]
        for lease in both:
            lease.release(ok())
    new_chat = asyncio.ensure_future(
        sched.acquire(key, 1, RouteRequest("m", 1100, long_system_chat(3), 3))
    )
    await asyncio.sleep(0)
    if where == "idle":
        assert new_chat.done() and new_chat.result().target.target_id == 3 - held
    else:
        assert not new_chat.done()  # queued for the held target's next free slot
        holders[0].release(ok())
        await asyncio.sleep(0)
        assert new_chat.done() and new_chat.result().target.target_id == held
