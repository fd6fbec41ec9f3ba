"""`pharos demo` as a user runs it: the real CLI, a real SDK, Ctrl-C to stop."""

from __future__ import annotations

import asyncio
import signal

import openai

from pharos.cmd.demo import DEMO_MODEL
from tests.cmd.serve_procs import free_port, pharos_process


async def test_demo_serves_chats_lists_its_models_and_stops_cleanly_on_ctrl_c() -> None:
    port = free_port()
    async with pharos_process("demo", "--listen", f"127.0.0.1:{port}", "--speed", "20") as demo:
        await demo.wait_for_line(f"Pharos demo is running at http://127.0.0.1:{port}")
        client = openai.AsyncOpenAI(
            base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=20
        )
        try:
            reply = await client.chat.completions.create(
                model=DEMO_MODEL, messages=[{"role": "user", "content": "hi"}]
            )
            models = sorted(model.id for model in (await client.models.list()).data)
        finally:
            await client.close()
        assert reply.choices[0].message.content
        assert reply.usage is not None and reply.usage.completion_tokens > 0
        assert "qwen2.5:0.5b" in models and "llama3.2:1b" in models
        demo.signal(signal.SIGINT)
        assert await demo.wait() == 0
    assert "Traceback" not in demo.output and "Unclosed" not in demo.output


async def test_demo_on_a_port_in_use_says_so_and_exits_1() -> None:
    port = free_port()
    server = await asyncio.start_server(lambda _reader, writer: writer.close(), "127.0.0.1", port)
    try:
        async with pharos_process("demo", "--listen", f"127.0.0.1:{port}") as demo:
            assert await demo.wait() == 1
    finally:
        server.close()
        await server.wait_closed()
    assert f"cannot listen on 127.0.0.1:{port}" in demo.output
    assert "Traceback" not in demo.output and "Unclosed" not in demo.output
