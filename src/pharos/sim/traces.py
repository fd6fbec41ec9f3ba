"""Workloads: who sends what, when. Seeded, so a seed is the same sessions for every policy.

Request classes (spec §14 layer 5, §16):
- chat: multi-turn conversations with think time; each turn repeats the whole history.
- agent: a coding agent: a long system prompt and a large tool list (Open WebUI sends
  36 tools, ~6,200 tokens; coding agents more), short think times, growing history.
- classifier: near-prefill-only calls (a ~1,000-token instruction, 1 output token).
- burst: many users starting at once on one model (a cold start in a multi-model fleet).
Text is synthetic (letters, so 1 byte = 1 character), sized in the engine's tokens with a
per-session bytes-per-token ratio in the measured 2.8-6.2 range (ENGINE-FACTS.md), so the
router's estimate (bytes / 4) is off the way it is off for real text.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

import msgspec

from pharos.prefix import chain_for_chat
from pharos.sim.engines import Prompt

THINK_S = (5.0, 30.0)
NOISE_THINK_S = (0.5, 2.0)  # a batch client that keeps its engine busy


@dataclass(frozen=True)
class TurnSpec:
    think_s: float  # before this turn is sent (after the previous reply ended)
    user_text: str
    reply_text: str
    completion_tokens: int


@dataclass(frozen=True)
class Session:
    user: str  # the API key name
    klass: str
    model: str
    start_s: float
    system: str
    tools: bytes | None
    turns: tuple[TurnSpec, ...]
    bytes_per_token: float
    carries_history: bool = True  # False: every call stands alone (classifier)
    bypasses_router: bool = False  # traffic sent straight to one engine, unseen by the router
    json_escaped: bool = False  # the client sends non-ASCII as \\uXXXX (Open WebUI does)
    side_calls: int = 0  # concurrent side requests after each turn (Open WebUI: title, tags)
    echoes_reply: bool = True
    """False: the client's history holds another reply than the engine generated (the
    real-engine scenario sends ShareGPT's answers back), so a slot's copy never matches it."""


@dataclass(frozen=True)
class SimRequest:
    """One request as the router sees it (messages) and as the engine sees it (prompt)."""

    session: Session
    turn_index: int
    messages: tuple[tuple[str, str], ...]
    chain_hashes: tuple[int, ...]
    chain_cum_bytes: tuple[int, ...]
    prompt: Prompt

    @property
    def estimated_tokens(self) -> int:
        """The proxy's estimate: decoded text bytes / 4, tools included."""
        tools = 0 if self.session.tools is None else len(self.session.tools)
        return (tools + (self.chain_cum_bytes[-1] if self.chain_cum_bytes else 0)) // 4


def build_request(session: Session, turn_index: int) -> SimRequest:
    messages: list[tuple[str, str]] = [("system", session.system)]
    first = 0 if session.carries_history else turn_index
    for earlier in session.turns[first:turn_index]:
        messages += [("user", earlier.user_text), ("assistant", earlier.reply_text)]
    turn = session.turns[turn_index]
    messages.append(("user", turn.user_text))
    chain = chain_for_chat(session.model, session.tools, messages)
    with_reply = chain_for_chat(
        session.model, session.tools, [*messages, ("assistant", turn.reply_text)]
    )
    ratio = session.bytes_per_token
    tools_tokens = 0 if session.tools is None else int(len(session.tools) / ratio)
    cum_tokens = tuple(tools_tokens + int(b / ratio) for b in chain.cum_bytes)
    reply_hash = with_reply.hashes[-1]
    reply_tokens = max(1, int(len(turn.reply_text) / ratio))
    if not session.echoes_reply:
        reply_hash = _generated_reply_hash(with_reply.hashes[-1])
        reply_tokens = turn.completion_tokens
    prompt = Prompt(
        model=session.model,
        hashes=chain.hashes,
        cum_tokens=cum_tokens,
        completion_tokens=turn.completion_tokens,
        reply_hash=reply_hash,
        reply_tokens=reply_tokens,
    )
    return SimRequest(session, turn_index, tuple(messages), chain.hashes, chain.cum_bytes, prompt)


def _generated_reply_hash(sent_reply_hash: int) -> int:
    """A link no client message has: the reply the engine generated, never sent back."""
    return (sent_reply_hash * 0x9E3779B97F4A7C15 + 1) & 0xFFFF_FFFF_FFFF_FFFF


SIDE_TASKS = ("### Task:\nGenerate a concise title", "### Task:\nGenerate 1-3 broad tags")
SIDE_COMPLETION_TOKENS = (12, 30)


def build_side_request(session: Session, turn_index: int, which: int) -> SimRequest:
    """One of Open WebUI's side calls after turn `turn_index` ended: a single user message, a
    task followed by the chat so far, so it shares no prefix with the conversation (issue 16,
    Open WebUI 0.12.4's title and tags calls, sent at once)."""
    history = "\n".join(
        f"USER: {t.user_text}\nASSISTANT: {t.reply_text}" for t in session.turns[: turn_index + 1]
    )
    task = SIDE_TASKS[which % len(SIDE_TASKS)]
    text = f"{task} for the chat below.\n<chat_history>\n{history}\n</chat_history>"
    chain = chain_for_chat(session.model, None, [("user", text)])
    ratio = session.bytes_per_token
    prompt = Prompt(
        model=session.model,
        hashes=chain.hashes,
        cum_tokens=tuple(int(b / ratio) for b in chain.cum_bytes),
        completion_tokens=SIDE_COMPLETION_TOKENS[which % len(SIDE_COMPLETION_TOKENS)],
        reply_hash=chain.hashes[-1] ^ 1,
        reply_tokens=SIDE_COMPLETION_TOKENS[which % len(SIDE_COMPLETION_TOKENS)],
    )
    return SimRequest(session, turn_index, (("user", text),), chain.hashes, chain.cum_bytes, prompt)


def _text(rng: random.Random, tokens: int, ratio: float, tag: str) -> str:
    size = max(len(tag) + 1, int(tokens * ratio))
    body = "".join(rng.choice("abcdefghij klmnopqrstuvwxyz") for _ in range(64))
    return (tag + " " + body * (size // 64 + 1))[:size]


def tools_json(count: int) -> bytes:
    tools = [
        {"type": "function", "function": {"name": f"tool_{i}", "description": "d" * 600}}
        for i in range(count)
    ]
    return msgspec.json.encode(tools)


@dataclass(frozen=True)
class Mix:
    """How many sessions of each class a scenario starts, over its duration."""

    chat_users: int = 6
    agent_users: int = 0
    classifier_users: int = 0
    burst_users: int = 0
    burst_at_s: float = 60.0
    noise_users: int = 0  # chat sessions sent straight to the first engine
    side_calls: int = 0  # side requests each chat user sends after every turn (Open WebUI: 2)
    models: tuple[str, ...] = ("m",)
    burst_model: str | None = None  # default: the last of `models`


def sessions(mix: Mix, duration_s: float, seed: int) -> Iterator[Session]:
    rng = random.Random(seed)
    system = _text(rng, 120, 4.0, "system")
    for index in range(mix.chat_users + mix.noise_users):
        noise = index >= mix.chat_users
        user = f"noise{index}" if noise else f"user{index}"
        start_s = rng.uniform(0, min(30.0, duration_s / 4))
        while start_s < duration_s:
            ratio = rng.uniform(3.0, 5.0)
            model = mix.models[index % len(mix.models)]
            turns = tuple(
                TurnSpec(
                    think_s=0.0 if t == 0 else rng.uniform(*(NOISE_THINK_S if noise else THINK_S)),
                    user_text=_text(rng, rng.randint(40, 400), ratio, f"{user}-{start_s:.0f}-{t}"),
                    reply_text=_text(rng, rng.randint(80, 300), ratio, f"r{t}"),
                    completion_tokens=rng.randint(80, 300),
                )
                for t in range(rng.randint(3, 8))
            )
            yield Session(
                user,
                "chat",
                model,
                start_s,
                system,
                None,
                turns,
                ratio,
                bypasses_router=noise,
                side_calls=0 if noise else mix.side_calls,
            )
            start_s += sum(t.think_s for t in turns) + len(turns) * 8.0 + rng.uniform(5, 30)
    agent_system = _text(rng, 2000, 4.0, "agent-system")
    agent_tools = tools_json(36)
    for index in range(mix.agent_users):
        user = f"agent{index}"
        start_s = rng.uniform(0, 20.0)
        ratio = rng.uniform(3.0, 4.5)
        turns = tuple(
            TurnSpec(
                think_s=0.0 if t == 0 else rng.uniform(1.0, 5.0),
                user_text=_text(rng, rng.randint(100, 1500), ratio, f"{user}-tool-{t}"),
                reply_text=_text(rng, rng.randint(40, 250), ratio, f"a{t}"),
                completion_tokens=rng.randint(40, 250),
            )
            for t in range(rng.randint(8, 20))
        )
        model = mix.models[index % len(mix.models)]
        yield Session(user, "agent", model, start_s, agent_system, agent_tools, turns, ratio)
    instruction = _text(rng, 900, 4.0, "classify")
    for index in range(mix.classifier_users):
        user = f"classifier{index}"
        ratio = 4.0
        turns = tuple(
            TurnSpec(
                think_s=rng.uniform(1.0, 4.0),
                user_text=_text(rng, 100, ratio, f"{user}-{t}"),
                reply_text="yes",
                completion_tokens=1,
            )
            for t in range(int(duration_s / 2.5))
        )
        model = mix.models[index % len(mix.models)]
        yield Session(
            user, "classifier", model, 0.0, instruction, None, turns, ratio, carries_history=False
        )
    for index in range(mix.burst_users):
        user = f"burst{index}"
        ratio = 4.0
        turns = (TurnSpec(0.0, _text(rng, 300, ratio, f"{user}"), "ok", 50),)
        model = mix.models[-1] if mix.burst_model is None else mix.burst_model
        yield Session(user, "burst", model, mix.burst_at_s, system, None, turns, ratio)
