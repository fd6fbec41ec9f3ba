"""From the outside in: on `noisy` a turn for e0 waits in e0's own queue, not the router's
(issue 15). Two clients send straight to e0, 0.5-2 s after each reply, and hold both its slots
most of the time; the router saw a slot they freed only at the next scrape, by when they had
taken it again. Virtual time: each run takes well under a second.
"""

from __future__ import annotations

from pharos.sim.run import simulate
from pharos.sim.scenarios import SCENARIOS

# seed: cost's router wait summed over its turns sent to e0, s (turns there), before | now
SEEDS = (
    1,  # 68.8 (29) | 21.7 (33)
    2,  # 92.3 (43) | 33.0 (38)
    3,  # 105.0 (40) | 23.2 (45)
)
MOST_ROUTER_WAIT_FOR_E0_S = 45.0


def test_turns_for_the_engine_the_bypassing_clients_load_wait_little_in_the_router() -> None:
    for seed in SEEDS:
        result = simulate(SCENARIOS["noisy"], "cost", seed)
        waited_s = sum(s.router_wait_s for s in result.samples if s.engine == "e0")
        assert waited_s < MOST_ROUTER_WAIT_FOR_E0_S, (seed, waited_s)
