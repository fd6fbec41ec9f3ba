"""The chat chain's C links (prefix/_chainc.c) and chain.py's Python loop are one chain (issue 13).

The default import uses the C build when setup.py compiled it; PHAROS_PURE_PYTHON=1, a missing
build or one that disagrees with chain.py runs the Python loop. Hashes never depend on which.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import types

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pharos.prefix import chain
from pharos.prefix.chain import (
    _KIND_CHAT,
    _KNOWN_TEXT_PREFIXES,
    _root,
    chain_for_chat,
    python_links,
)
from tests.prefix.native import native_module
from tests.prefix.native import needs_c_build as needs_c_build_of

_chainc = native_module("_chainc")


def needs_c_build() -> types.ModuleType:
    return needs_c_build_of(_chainc, "_chainc")


TOOLS = b'[{"type":"function"}]'
# Only str contents under usual roles: every link goes through the C build when it is loaded.
# Values computed by chain.py before the C build existed (main at 2ab4433).
PINNED_TEXT_MESSAGES: list[tuple[str, object]] = [
    ("system", "Be brief."),
    ("user", 'café 请 \U0001f600 "q" \\ \n'),
    ("assistant", ""),
    ("tool", "x" * 5000),  # longer than any link before it: the C buffer grows
    ("developer", "ok"),
    ("function", "f"),
    ("", "no role"),
]
PINNED_TEXT = (
    0xC4ABB07CC4241BB9,
    0xCD5575FE8B9D264D,
    0x3C28E6EB79D27894,
    0x5093B1F932CC016E,
    0xCDC900A66C9F8086,
    0x8278DB62902321C4,
    0x631C42BCCB51CE2E,
)

PINNED_TEXT_CUM_BYTES = (30, 52, 52, 5052, 5054, 5055, 5062)  # 21 bytes of tools first

PIN_SCRIPT = f"""
from pharos.prefix import chain
got = chain.chain_for_chat("m", {TOOLS!r}, {PINNED_TEXT_MESSAGES!r})
print(chain.IMPLEMENTATION, [hex(h) for h in got.hashes], list(got.cum_bytes), got.tools_bytes)
"""


def test_a_text_chat_keeps_its_pinned_hashes_in_this_process() -> None:
    got = chain_for_chat("m", TOOLS, PINNED_TEXT_MESSAGES)
    assert (got.hashes, got.cum_bytes, got.tools_bytes) == (
        PINNED_TEXT,
        PINNED_TEXT_CUM_BYTES,
        21,
    )


# PHAROS_PURE_PYTHON | implementation that must run
@pytest.mark.parametrize("pure", [False, True])
def test_both_builds_give_the_pinned_hashes_in_a_fresh_process(pure: bool) -> None:
    env = {k: v for k, v in os.environ.items() if k != chain.PURE_ENV}
    if pure:
        env[chain.PURE_ENV] = "1"
    else:
        needs_c_build()
    done = subprocess.run(
        [sys.executable, "-c", PIN_SCRIPT], env=env, capture_output=True, check=True, text=True
    )
    expected_hashes = [hex(h) for h in PINNED_TEXT]
    expected = f"{'python' if pure else 'c'} {expected_hashes} {list(PINNED_TEXT_CUM_BYTES)} 21"
    assert done.stdout.strip() == expected


_TEXTS = (
    "",
    "plain ascii",
    "Résumé des étapes — télécharger",
    "请把这段话翻译成英文",
    "Привет! \U0001f600\U0001f680",
    'quotes " and back\\slashes\n\t\r',
    "\x00 nul and \x7f",
)


def _random_chat(rng: random.Random) -> list[tuple[str, object]]:
    roles = [role for role in _KNOWN_TEXT_PREFIXES]
    out: list[tuple[str, object]] = []
    for _ in range(rng.randint(1, 60)):
        text = "".join(rng.choice(_TEXTS) for _ in range(rng.randint(0, 4)))
        if rng.random() < 0.05:
            text *= rng.randint(50, 2000)  # up to ~100 KB in one message
        out.append((rng.choice(roles), text))
    return out


def test_the_c_links_equal_the_python_loops_on_random_text_chats() -> None:
    native = needs_c_build()
    rng = random.Random(13)
    for round_ in range(300):
        messages = _random_chat(rng)
        previous = _root(_KIND_CHAT, f"model-{round_}", None)
        covered = rng.choice((0, 21, 6257))
        expected = python_links(previous, messages, covered)
        assert native.chat_links(previous, messages, _KNOWN_TEXT_PREFIXES, covered) == expected
        assert chain_for_chat(f"model-{round_}", None, messages).hashes == expected[0]


# a message the C build leaves to the Python loop       | why
FALLBACKS: list[tuple[str, object]] = [
    ("user", "\ud800 lone"),  # a lone surrogate: not strict UTF-8
    ("odd-role", "text"),  # a role outside the usual ones
    ("user", None),  # no content
    ("user", msgspec.Raw(b'"raw"')),  # raw JSON
    ("user", [{"type": "text", "text": "part"}]),  # decoded parts
    ("user", b"bytes"),  # raw bytes
]


@pytest.mark.parametrize("odd", FALLBACKS, ids=lambda odd: repr(odd)[:30])
def test_a_chat_with_one_message_the_c_build_cannot_read_is_chained_whole_by_python(
    odd: tuple[str, object],
) -> None:
    native = needs_c_build()
    messages: list[tuple[str, object]] = [("system", "s"), odd, ("user", "after")]
    previous = _root(_KIND_CHAT, "m", None)
    assert native.chat_links(previous, messages, _KNOWN_TEXT_PREFIXES, 0) is None
    got = chain_for_chat("m", None, messages)
    assert (got.hashes, got.cum_bytes) == python_links(previous, messages, 0)


def test_a_message_that_is_not_a_pair_falls_back_to_the_python_loop() -> None:
    native = needs_c_build()
    previous = _root(_KIND_CHAT, "m", None)
    assert native.chat_links(previous, [["user", "a list"]], _KNOWN_TEXT_PREFIXES, 0) is None


# previous      | messages      | error
@pytest.mark.parametrize(
    ("previous", "messages", "error"),
    [
        (b"short", [("user", "x")], ValueError),  # h0 is always 32 bytes
        (b"\x00" * 32, 42, TypeError),  # not a sequence
        (b"\x00" * 32, [([], "x")], TypeError),  # an unhashable role, as dict.get raises
    ],
)
def test_the_c_build_refuses_what_chain_py_never_passes(
    previous: bytes, messages: object, error: type[Exception]
) -> None:
    native = needs_c_build()
    with pytest.raises(error):
        native.chat_links(previous, messages, _KNOWN_TEXT_PREFIXES, 0)


def test_a_c_build_that_disagrees_with_chain_py_is_never_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stale = types.ModuleType("pharos.prefix._chainc")
    stale.chat_links = lambda *_args: ((1,), (2,))  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pharos.prefix._chainc", stale)
    monkeypatch.delenv(chain.PURE_ENV, raising=False)
    native, reason = chain._load_native()
    assert native is None
    assert "disagrees" in reason


def test_pure_python_is_chosen_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(chain.PURE_ENV, "1")
    assert chain._load_native() == (None, f"{chain.PURE_ENV}=1")


_ROLES = st.sampled_from([*_KNOWN_TEXT_PREFIXES, "odd", "USER", "user "])
_CONTENTS = st.one_of(
    st.text(),  # any code point, lone surrogates included
    st.text(alphabet=st.characters(codec="utf-8")),
    st.none(),
    st.binary(max_size=64),
)


@settings(max_examples=300, deadline=None)
@given(
    messages=st.lists(st.tuples(_ROLES, _CONTENTS), min_size=1, max_size=40),
    model=st.text(max_size=20),
)
def test_any_chat_chains_the_same_whichever_build_runs(
    messages: list[tuple[str, object]], model: str
) -> None:
    """Hypothesis: every role and content shape the parse can hand over, the C build's links
    (or its fall back to Python) equal the Python loop's."""
    previous = _root(_KIND_CHAT, model, None)
    expected = python_links(previous, messages, 0)
    got = chain_for_chat(model, None, messages)
    assert (got.hashes, got.cum_bytes) == expected
    if _chainc is not None:
        native = _chainc.chat_links(previous, messages, _KNOWN_TEXT_PREFIXES, 0)
        assert native is None or native == expected
