"""From the outside in: chats whose contents parse.py now leaves raw (msgspec.Raw, unescaped in
prefix/_chainc.c's message_links) are recorded over HTTP under the chain the Python loop gives the
same messages as msgspec decodes them (issue 13). These add what test_chain_on_the_wire's chats
don't: part lists, nulls and roles that aren't strings beside raw strings, raw UTF-8 bodies, a
top-level system."""

from __future__ import annotations

import json
import os

import pytest

from pharos.fakeengine import FakeLlamaCpp, no_sleep
from pharos.prefix import chain
from tests.prefix.native import native_module
from tests.proxy.rig import Backend, RigFactory
from tests.proxy.test_chain_on_the_wire import MODEL, assert_recorded_whole, python_chain

# the body's messages (and system)                           | ensure_ascii
BODIES: dict[str, tuple[dict[str, object], bool]] = {
    "parts and nulls among raw strings": (
        {
            "messages": [
                {"role": "system", "content": 'Be brief \\ "quoted" \n'},
                {"role": "user", "content": [{"type": "text", "text": "Résumé \U0001f600"}]},
                {"role": "assistant", "content": None},
                {"role": "user", "content": "Привет " * 50},
            ]
        },
        True,
    ),
    "raw UTF-8 with a role that is no string": (
        {
            "messages": [
                {"role": "user", "content": "请把这段话翻译成英文 " * 40},
                {"role": 7, "content": "a number for a role"},
                {"role": "user", "content": "\t\x01 controls, escaped by json.dumps"},
            ]
        },
        False,
    ),
    "a top-level system as parts": (
        {
            "system": [{"type": "text", "text": "house rules"}],
            "messages": [{"role": "user", "content": "hi \u00e9"}],
        },
        True,
    ),
}


@pytest.mark.parametrize("name", list(BODIES))
async def test_a_raw_contents_chat_over_http_is_recorded_under_the_python_loops_chain(
    rig: RigFactory, name: str
) -> None:
    if native_module("_chainc") is not None and os.environ.get(chain.PURE_ENV) != "1":
        assert chain.MESSAGE_LINKS, "the C build is here but parse takes the strict path"
    r = await rig(Backend(FakeLlamaCpp(sleep=no_sleep)))
    fields, ascii_only = BODIES[name]
    body = json.dumps({"model": MODEL, "max_tokens": 4, **fields}, ensure_ascii=ascii_only).encode()
    status, reply = await r.post(
        "/v1/chat/completions", None, data=body, headers={"Content-Type": "application/json"}
    )
    assert status == 200, reply
    await assert_recorded_whole(r, python_chain(body))
