"""From the outside in: cold-burst-heavy through the real scheduler and policy (issue 15).

The burst's model c loaded on all three hosts for its one turn at 120 s, and the loads there
unloaded chat model b on two of them. Before IDLE_MODEL_STALE_S, c stayed loaded for the rest
of the run (a second replica of b would have unloaded it, charged as a reload) and b's four
users shared one host's 2 slots. Virtual time: each run takes well under a second.
"""

from __future__ import annotations

from pharos.sim.run import simulate
from pharos.sim.scenarios import SCENARIOS

# seed: chat turns' router wait summed (s) before the bound | after it
SEEDS = (
    1,  # 50.1 | 13.8
    2,  # 87.8 | 20.9
    3,  # 61.0 | 6.1
)
LONGEST_SUMMED_WAIT_S = 100.0  # over the three seeds: 198.9 before, 40.8 after


def test_chat_turns_stop_queueing_on_one_host_once_the_bursts_model_goes_stale() -> None:
    waited_s = 0.0
    for seed in SEEDS:
        result = simulate(SCENARIOS["cold-burst-heavy"], "cost", seed)
        chats = [s for s in result.samples if s.klass == "chat"]
        assert chats
        waited_s += sum(s.router_wait_s for s in chats)
    assert waited_s < LONGEST_SUMMED_WAIT_S
