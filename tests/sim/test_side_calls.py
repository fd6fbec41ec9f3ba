"""Open WebUI's side calls in the simulator: fresh prompts beside each turn (issue 16)."""

from pharos.sim.run import Scenario, simulate
from pharos.sim.scenarios import SCENARIOS
from pharos.sim.traces import Mix, build_request, build_side_request, sessions


def test_a_side_call_embeds_the_chat_but_shares_no_prefix_with_it() -> None:
    session = next(iter(sessions(Mix(chat_users=1, side_calls=2), 300.0, 1)))
    turn = build_request(session, 1)
    title, tags = build_side_request(session, 0, 0), build_side_request(session, 0, 1)
    assert len(title.chain_hashes) == 1  # one user message
    assert title.chain_hashes[0] not in turn.chain_hashes
    assert title.chain_hashes != tags.chain_hashes
    assert session.turns[0].user_text in title.messages[0][1]
    assert title.prompt.tokens > build_request(session, 0).prompt.tokens  # the history and more


def test_side_calls_are_served_but_left_out_of_the_figures() -> None:
    webui = SCENARIOS["webui"].with_duration(120.0)
    without = Scenario(webui.name, webui.about, webui.hosts, Mix(chat_users=2), 120.0)
    beside, alone = simulate(webui, "sticky", 1), simulate(without, "sticky", 1)
    assert {s.klass for s in beside.samples} == {"chat"}
    # same sessions either way; with side calls, sticky's turns lose their slot
    assert alone.cache_hit_ratio > beside.cache_hit_ratio == 0.0
