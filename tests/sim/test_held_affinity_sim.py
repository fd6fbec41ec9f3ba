"""From the outside in: a person's next chat goes where their last one ended (issue 15).

`chat` (two equal llama.cpp hosts, six users, each on their own key) through the real
scheduler and policy. Each new chat is cache-neutral (it shares only the system prompt), and
before the key's home cost sent it to the least utilized host of the moment. Virtual time:
each run takes well under a second.
"""

from __future__ import annotations

from pharos.sim.run import Result, simulate
from pharos.sim.scenarios import SCENARIOS

# seed: a user's new chats on the host their previous chat ended on, without | with the home;
# with llama-server's batch loop simulated (2026-12-07), without | with: 12 | 18 of 21,
# 13 | 10 of 22, 12 | 13 of 25: a prompt that arrives during a decode step waits for it inside
# the engine (up to 30 ms at 60 tok/s, two streams), over estimate.HOME_QUEUED_S (then 0.02 s), so
# most homes counted as queued and were charged nothing. At 0.1 s: 18, 21 and 18 go home; with
# no waiver for a queued home (since 2026-12-07 14:45 UTC), 20, 21 and 23.
SEEDS = (
    1,  # 7 of 21 | 19 of 21
    2,  # 16 of 22 | 15 of 22
    3,  # 16 of 25 | 23 of 25
)
LEAST_HOME_SHARE = 0.8  # pooled: 39 of 68 (57%) without, 57 of 68 (84%) with; batch loop:
# 37 of 68 (54%) without, 57 of 68 (84%) with


def _new_chats_home(result: Result) -> tuple[int, int]:
    home = total = 0
    for user_session, engines in result.engine_of_turn.items():
        user, index = user_session.split("#")
        previous = result.engine_of_turn.get(f"{user}#{int(index) - 1}")
        if previous:
            total += 1
            home += engines[0] == previous[-1]
    return home, total


def test_most_new_chats_go_to_the_host_the_users_last_chat_ended_on() -> None:
    home = total = 0
    for seed in SEEDS:
        went_home, new_chats = _new_chats_home(simulate(SCENARIOS["chat"], "cost", seed))
        home += went_home
        total += new_chats
    assert total > 60
    assert home / total >= LEAST_HOME_SHARE


def test_the_shared_key_of_make_scenario_gets_no_home() -> None:
    """real-equal: every user on one key, so every request is scored as before the home; the
    same-key conversations are several at once and one home would herd them."""
    result = simulate(SCENARIOS["real-equal"], "cost", 1)
    home, total = _new_chats_home(result)
    assert total > 0
    assert home < total  # new chats go by load: some land on the other host


def test_a_person_who_opens_chats_quickly_keeps_their_home() -> None:
    """real-equal-keys: `make scenario`'s users on a key each, 4 turns a chat and 2.5-15 s of
    thinking, so each has two or three chats within the home's window. With no home for
    several (before), 45% of their new chats went to their last chat's host (99 of 217, seeds
    1-4), a coin's share; with the latest one's host, 72% (158 of 217); with no waiver for a
    home our own batches queued at, 95% (206 of 217; seeds 1-2: 99 of 109)."""
    home = total = 0
    for seed in (1, 2):
        went_home, new_chats = _new_chats_home(simulate(SCENARIOS["real-equal-keys"], "cost", seed))
        home += went_home
        total += new_chats
    assert total > 100
    assert home / total >= 0.85
