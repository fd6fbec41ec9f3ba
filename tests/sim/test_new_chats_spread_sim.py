"""From the outside in: on `chat` a person's first chat no longer queues for the engine that
holds the app's system prompt while the other engine idles (issue 15). Virtual time: each run
takes well under a second.
"""

from __future__ import annotations

from pharos.sim.run import simulate
from pharos.sim.scenarios import SCENARIOS

# seed: the users' first chats on e0 / e1, then cost's router wait summed over the run (s),
# before | now
SEEDS = (
    10,  # 0 / 6, 91.5 | 2 / 4, 23.4
    12,  # 6 / 0, 113.6 | 4 / 2, 39.3
)
MOST_ROUTER_WAIT_S = 60.0


def test_the_users_first_chats_go_to_both_engines_and_wait_little_in_the_router() -> None:
    for seed in SEEDS:
        result = simulate(SCENARIOS["chat"], "cost", seed)
        first_chats = [s.engine for s in result.samples if s.session_index == s.turn_index == 0]
        assert set(first_chats) == {"e0", "e1"}, (seed, first_chats)
        waited_s = sum(s.router_wait_s for s in result.samples)
        assert waited_s < MOST_ROUTER_WAIT_S, (seed, waited_s)
