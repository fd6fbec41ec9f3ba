"""The reply an engine generated counts as cached with the prompt it answered (spec §6)."""

from pharos.prefix import Chain, Match, PrefixIndex, chain_for_chat
from pharos.prefix.slots import Source
from pharos.sched.replies import with_reply_credited, without_reply_credit

SYSTEM, ASKED, ANSWERED, NEXT = "be brief", "q" * 80, "a" * 1200, "n" * 40


def turn_two() -> Chain:
    return chain_for_chat(
        "m", None, [("system", SYSTEM), ("user", ASKED), ("assistant", ANSWERED), ("user", NEXT)]
    )


def test_a_follow_up_turn_is_predicted_with_the_previous_reply_cached() -> None:
    turn_one = chain_for_chat("m", None, [("system", SYSTEM), ("user", ASKED)])
    index = PrefixIndex()
    index.record(turn_one, 7, generation=1, now_s=0.0)
    chain = turn_two()
    found = index.lookup(chain, lambda _target: 1)
    assert found[7].matched_bytes == turn_one.cum_bytes[-1]  # 88: the index alone
    credited = with_reply_credited(found, chain)
    assert credited[7] == Match(chain.cum_bytes[2], found[7].source)  # 1,288: with the reply
    assert credited[7].matched_bytes == len(SYSTEM) + len(ASKED) + len(ANSWERED)


# matched_at: the link the index matched up to (index into a 4-link chain); credited_to: the
# link the credit extends it to
CASES = [
    (0, 0),  # only the system matched (another user's chat): the next message isn't ours
    (1, 2),  # the previous prompt matched: its reply is credited
    (2, 2),  # already matched through the reply: nothing more (the last link is new)
    (3, 3),  # the whole chain matched (a repeat): nothing more
]


def test_only_a_match_of_the_previous_prompt_is_extended_over_its_reply() -> None:
    chain = turn_two()
    for matched_at, credited_to in CASES:
        found = {1: Match(chain.cum_bytes[matched_at], Source.LOCAL)}
        got = with_reply_credited(found, chain)[1].matched_bytes
        assert got == chain.cum_bytes[credited_to], matched_at


def test_a_chain_of_two_links_or_no_match_is_left_alone() -> None:
    short = chain_for_chat("m", None, [("system", SYSTEM), ("user", ASKED)])
    found = {1: Match(short.cum_bytes[0], Source.LOCAL)}
    assert with_reply_credited(found, short) is found
    assert with_reply_credited({}, turn_two()) == {}


def test_the_credit_is_taken_back_off_a_match_that_ends_at_the_reply() -> None:
    # a credited match is judged by what the index itself recorded: the reply is a guess
    chain = turn_two()
    for matched_at, recorded_at in [(2, 1), (1, 1), (0, 0), (3, 3)]:
        got = without_reply_credit(chain.cum_bytes[matched_at], chain)
        assert got == chain.cum_bytes[recorded_at], matched_at
    short = chain_for_chat("m", None, [("system", SYSTEM), ("user", ASKED)])
    assert without_reply_credit(short.cum_bytes[1], short) == short.cum_bytes[1]
