"""Sticky's map of users to engines is one draw per seed, and holds for the whole run.

Unsalted, the scenarios' user names (user0 ... user5, the same on every seed) hashed to one
map on every seed: 5 of chat's 6 users on e1, 20 seeds judged against one draw.
"""

from collections import defaultdict

from pharos.sim import SCENARIOS, Result, simulate
from pharos.sim.routers import sticky_index


def engine_of_each_user(result: Result) -> dict[str, str]:
    engines: dict[str, set[str]] = defaultdict(set)
    for sample in result.samples:
        engines[sample.user].add(sample.engine)
    assert all(len(used) == 1 for used in engines.values()), dict(engines)
    return {user: used.pop() for user, used in engines.items()}


def test_sticky_keeps_every_user_on_one_engine_and_draws_the_map_per_seed() -> None:
    chat = SCENARIOS["chat"].with_duration(120.0)
    maps = [engine_of_each_user(simulate(chat, "sticky", seed)) for seed in (1, 2)]
    assert maps[0] != maps[1]
    assert maps[0] == engine_of_each_user(simulate(chat, "sticky", 1))


def test_twenty_seeds_draw_more_than_one_split_of_six_users() -> None:
    users = [f"user{i}" for i in range(6)]
    # (users on engine 1 of 2, per seed): unsalted every seed gave 5
    splits = {sum(sticky_index(f"{seed}/", user, 2) for user in users) for seed in range(1, 21)}
    assert len(splits) >= 3, splits
