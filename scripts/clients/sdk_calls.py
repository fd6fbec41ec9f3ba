"""Run inside the SDK venv (scripts/clients/install-sdks.sh): one SDK's own request shapes for a
three-turn conversation with a system message and a tool, streamed and not, sent to BASE with
KEY (issue 16). The sink in front of Pharos records what the SDK put on the wire.

    python sdk_calls.py {openai,anthropic,ollama} BASE KEY
"""

from __future__ import annotations

import sys
from typing import Any

SYSTEM = "You are a terse assistant. Answer in one line."
TURNS = (
    "Привет, 你好! Say hello in three languages, one line each.",
    "Now say good morning in Russian.",
    "Thanks. And in Chinese?",
)
MODEL = "qwen2.5:0.5b"
WEATHER_TOOL: dict[str, Any] = {
    "name": "get_weather",
    "description": "The current weather in a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "City name"}},
        "required": ["city"],
    },
}


def run_openai(base: str, key: str) -> None:
    import openai

    client = openai.OpenAI(base_url=base + "/v1", api_key=key, max_retries=0)
    client.models.list()
    messages: list[Any] = [{"role": "system", "content": SYSTEM}]
    tools: list[Any] = [{"type": "function", "function": WEATHER_TOOL}]
    for i, turn in enumerate(TURNS):
        messages.append({"role": "user", "content": turn})
        if i % 2 == 0:  # streamed turns 1 and 3, as a chat UI does
            stream = client.chat.completions.create(
                model=MODEL, messages=messages, tools=tools, stream=True
            )
            text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        else:
            reply = client.chat.completions.create(model=MODEL, messages=messages, tools=tools)
            text = reply.choices[0].message.content or ""
        messages.append({"role": "assistant", "content": text})
    client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=16)


def run_anthropic(base: str, key: str) -> None:
    import anthropic

    client = anthropic.Anthropic(base_url=base, api_key=key, max_retries=0)
    tools: list[Any] = [
        {
            "name": WEATHER_TOOL["name"],
            "description": WEATHER_TOOL["description"],
            "input_schema": WEATHER_TOOL["parameters"],
        }
    ]
    messages: list[Any] = []
    for i, turn in enumerate(TURNS):
        messages.append({"role": "user", "content": turn})
        if i == 0:
            client.messages.count_tokens(model=MODEL, system=SYSTEM, messages=messages, tools=tools)
        if i % 2 == 0:
            with client.messages.stream(
                model=MODEL, max_tokens=256, system=SYSTEM, messages=messages, tools=tools
            ) as stream:
                text = "".join(stream.text_stream)
        else:
            reply = client.messages.create(
                model=MODEL, max_tokens=256, system=SYSTEM, messages=messages, tools=tools
            )
            text = "".join(b.text for b in reply.content if b.type == "text")
        messages.append({"role": "assistant", "content": text or "ok"})


def run_ollama(base: str, key: str) -> None:
    import ollama

    client = ollama.Client(host=base, headers={"Authorization": f"Bearer {key}"})
    client.list()
    client.ps()
    messages: list[Any] = [{"role": "system", "content": SYSTEM}]
    tools: list[Any] = [{"type": "function", "function": WEATHER_TOOL}]
    for i, turn in enumerate(TURNS):
        messages.append({"role": "user", "content": turn})
        if i % 2 == 0:
            parts = client.chat(model=MODEL, messages=messages, tools=tools, stream=True)
            text = "".join(p.message.content or "" for p in parts)
        else:
            text = client.chat(model=MODEL, messages=messages, tools=tools).message.content or ""
        messages.append({"role": "assistant", "content": text})
    client.generate(model=MODEL, prompt="Once upon a time", options={"num_predict": 16})


def main() -> int:
    sdk, base, key = sys.argv[1:4]
    {"openai": run_openai, "anthropic": run_anthropic, "ollama": run_ollama}[sdk](base, key)
    return 0


if __name__ == "__main__":
    sys.exit(main())
