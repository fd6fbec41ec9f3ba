"""Replies carry the model name the client asked for (issue 16): vLLM and llama.cpp answer
with their own name (llama-server b11312 live: asked `my-alias`, replied `smollm2`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tools.captures import our_captures as repo_captures_root

from pharos.fakeengine import FakeLlamaCpp, FakeOllama, FakeVLLM, no_sleep
from pharos.proxy.rename import ReplyRename
from pharos.proxy.tap import StreamTap
from tests.proxy.rig import Backend, RigFactory

RECORDED = repo_captures_root() / "routes"
STREAMS = sorted(p for p in RECORDED.glob("*/*/streams/*") if p.name != "replies.tsv")


@pytest.mark.parametrize("path", STREAMS, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_every_recorded_reply_is_renamed_wherever_the_chunks_are_cut(path: Path) -> None:
    recorded = path.read_bytes()
    expected = recorded.replace(b'"model":"smollm2"', b'"model":"team:model"')
    for size in (1, 7, 64, len(recorded)):
        rename = ReplyRename("smollm2", "team:model")
        out = b"".join(rename.feed(recorded[i : i + size]) for i in range(0, len(recorded), size))
        assert out + rename.finish() == expected
    if path.name != "count-tokens.json":  # every recorded reply names the engine's model
        assert expected != recorded


def test_a_chunk_ending_mid_pattern_holds_only_that_tail() -> None:
    rename = ReplyRename("m", "client")
    assert rename.feed(b'data: {"x":1}\n\n') == b'data: {"x":1}\n\n'  # nothing held
    assert rename.feed(b'data: {"mod') == b"data: {"
    assert rename.feed(b'el":"m"}\n\n') == b'"model":"client"}\n\n'
    assert rename.feed(b'{"model":"mm"}') == b'{"model":"mm"}'  # another name stays
    assert rename.finish() == b""


# fake, path, streamed
CASES = [
    (FakeVLLM, "/v1/chat/completions", True),
    (FakeVLLM, "/v1/chat/completions", False),
    (FakeLlamaCpp, "/v1/completions", True),
    (FakeLlamaCpp, "/v1/messages", True),
    (FakeLlamaCpp, "/v1/responses", False),
    (FakeOllama, "/api/chat", True),
]


@pytest.mark.parametrize(("fake_type", "path", "stream"), CASES)
async def test_an_aliased_reply_names_the_alias(
    rig: RigFactory, fake_type: type, path: str, stream: bool
) -> None:
    fake = fake_type(sleep=no_sleep)
    engine_name = next(iter(fake.models))
    r = await rig(Backend(fake, aliases={engine_name: "team-model"}))
    body: dict[str, object] = {"model": "team-model", "stream": stream, "max_tokens": 5}
    if path in ("/v1/completions",):
        body["prompt"] = "Once"
    elif path == "/v1/responses":
        body["input"] = "hi"
    else:
        body["messages"] = [{"role": "user", "content": "hi"}]
    async with r.client.post(r.base + path, json=body) as reply:
        assert reply.status == 200
        raw = await reply.read()
    assert engine_name.encode() not in raw
    models = re.findall(rb'"model":\s*"([^"]*)"', raw)
    assert models and set(models) == {b"team-model"}


def test_the_tap_without_a_rename_is_untouched() -> None:
    tap = StreamTap()
    assert tap.feed(b'{"model":"smollm2"}\n') == b'{"model":"smollm2"}\n'
