import hmac

import pytest

from pharos.proxy.auth import ANONYMOUS, KeyEntry, KeyTable, allows_model, bearer_token, hash_key

ALICE_KEY = "sk-alice-secret"
OPS_KEY = "sk-ops-secret"


def table() -> KeyTable:
    return KeyTable.from_entries(
        [
            KeyEntry(name="alice", sha256=hash_key(ALICE_KEY), rpm=60, models=frozenset({"m1"})),
            KeyEntry(name="ops", sha256=hash_key(OPS_KEY).upper(), admin=True),
        ]
    )


def test_hash_key_is_the_sha256_hex_config_holds() -> None:
    assert hash_key("test") == "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"


def test_bearer_token_finds_the_key() -> None:
    keys = table()
    alice = keys.lookup(f"Bearer {ALICE_KEY}")
    assert alice is not None
    assert (alice.name, alice.rpm, alice.admin) == ("alice", 60, False)
    ops = keys.lookup(f"bearer   {OPS_KEY}  ")  # scheme is case-insensitive; uppercase digest
    assert ops is not None
    assert ops.name == "ops"
    assert not keys.is_open


@pytest.mark.parametrize(
    "header",
    [None, "", "Bearer", "Bearer ", "Bearer    ", f"Basic {ALICE_KEY}", ALICE_KEY, "Bearer nope"],
)
def test_bad_or_unknown_authorization_gets_no_key(header: str | None) -> None:
    assert table().lookup(header) is None


def test_x_api_key_header_is_accepted() -> None:
    keys = table()
    found = keys.lookup(None, ALICE_KEY)
    assert found is not None
    assert found.name == "alice"
    from_malformed = keys.lookup("Basic xyz", ALICE_KEY)
    assert from_malformed is not None
    assert from_malformed.name == "alice"
    assert keys.lookup(None, "") is None
    assert keys.lookup(None, "sk-wrong") is None


def test_a_well_formed_bearer_wins_over_x_api_key() -> None:
    keys = table()
    assert keys.lookup("Bearer sk-wrong", ALICE_KEY) is None
    both = keys.lookup(f"Bearer {OPS_KEY}", ALICE_KEY)
    assert both is not None
    assert both.name == "ops"


def test_lookup_compares_digests_in_constant_time_on_hit_and_miss(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[str, str]] = []
    real = hmac.compare_digest

    def spy(a: str, b: str) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    keys = table()
    assert keys.lookup(f"Bearer {ALICE_KEY}") is not None
    assert keys.lookup("Bearer sk-unknown") is None
    assert [len(a) == len(b) == 64 for a, b in calls] == [True, True]
    assert calls[0] == (hash_key(ALICE_KEY), hash_key(ALICE_KEY))
    assert calls[1][0] == hash_key("sk-unknown")


def test_the_entry_never_holds_the_key_itself() -> None:
    for entry in table().entries:
        assert ALICE_KEY not in repr(entry)
        assert ALICE_KEY not in entry.sha256
        assert entry.sha256 not in repr(entry)


def test_open_table_lets_everyone_in_as_the_anonymous_admin() -> None:
    for keys in (KeyTable.open(), KeyTable.from_entries([])):
        assert keys.is_open
        assert keys.lookup(None) is ANONYMOUS
        assert keys.lookup("Basic junk") is ANONYMOUS
        assert ANONYMOUS.name == "anonymous"
        assert ANONYMOUS.admin
        assert ANONYMOUS.rpm is None
        assert ANONYMOUS.tokens_per_day is None


def test_allow_list() -> None:
    keys = table()
    alice = keys.lookup(f"Bearer {ALICE_KEY}")
    ops = keys.lookup(f"Bearer {OPS_KEY}")
    assert alice is not None
    assert ops is not None
    assert allows_model(alice, "m1")
    assert not allows_model(alice, "m2")
    assert keys.allows_model(ops, "anything")  # empty list: every model


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ([KeyEntry(name="a", sha256="abc")], r"keys\[0\] \('a'\)\.sha256: must be 64 hex"),
        ([KeyEntry(name="a", sha256="g" * 64)], r"sha256: must be 64 hex"),
        ([KeyEntry(name="", sha256=hash_key("x"))], r"keys\[0\]\.name: must not be empty"),
        (
            [KeyEntry(name="a", sha256=hash_key("x")), KeyEntry(name="a", sha256=hash_key("y"))],
            r"keys\[1\] \('a'\)\.name: repeats",
        ),
        (
            [KeyEntry(name="a", sha256=hash_key("x")), KeyEntry(name="b", sha256=hash_key("x"))],
            r"keys\[1\] \('b'\)\.sha256: the same key as 'a'",
        ),
        ([KeyEntry(name="a", sha256=hash_key("x"), weight=0)], r"\.weight: must be at least 1"),
        ([KeyEntry(name="a", sha256=hash_key("x"), rpm=-1)], r"\.rpm: must not be negative"),
    ],
)
def test_bad_entries_name_the_field(entries: list[KeyEntry], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        KeyTable.from_entries(entries)


def test_fingerprint_changes_with_the_key_set_only() -> None:
    same = table()
    assert table().fingerprint() == same.fingerprint()
    other = KeyTable.from_entries([KeyEntry(name="alice", sha256=hash_key(ALICE_KEY), rpm=61)])
    assert other.fingerprint() != same.fingerprint()


def test_bearer_token_shapes() -> None:
    assert bearer_token("Bearer abc") == "abc"
    assert bearer_token("BEARER\tabc") is None  # a tab is not the separator
    assert bearer_token("Bearer a b") == "a b"
