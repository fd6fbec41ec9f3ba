"""Every command the demo banner and the README's quick start print, run as a user would: the
real `pharos demo` on a free port, each `curl` line through a shell, each `open` URL fetched.
A command that hangs or answers an error fails here (the banner's /api/chat with llama3.2:1b
used to wait forever: the fake Ollama's memory_gb was below the model's size)."""

from __future__ import annotations

import asyncio
import re
import signal
from pathlib import Path

import aiohttp

from tests.cmd.serve_procs import PharosProcess, free_port, pharos_process

README = Path(__file__).resolve().parents[2] / "README.md"
README_BASE = "http://127.0.0.1:8090"
COMMAND_TIMEOUT_S = 30.0


def shell_commands(text: str) -> list[str]:
    """The commands in `text`: lines starting with curl/open/xdg-open, `\\` continuations
    joined, a trailing `# comment` or `(comment)` dropped."""
    commands: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if pending:
            pending += " " + line.rstrip("\\").strip()
            if not line.endswith("\\"):
                commands.append(pending)
                pending = ""
            continue
        if not re.match(r"(curl|open|xdg-open) ", line):
            continue
        if line.endswith("\\"):
            pending = line.rstrip("\\").strip()
            continue
        commands.append(re.sub(r"\s+(#.*|\(.*)$", "", line))
    return commands


def banner_of(demo: PharosProcess) -> str:
    start = demo.output.index("Try:")
    return demo.output[start : demo.output.index("Stop with", start)]


def readme_quick_start() -> str:
    text = README.read_text()
    start = text.index("With the demo running")
    return text[start : text.index("```", text.index("```sh", start) + 5)]


async def run_command(command: str, session: aiohttp.ClientSession) -> tuple[int, str]:
    """(HTTP status, body) of one example."""
    if command.startswith(("open ", "xdg-open ")):
        url = command.split()[1]
        async with session.get(url) as response:
            return response.status, await response.text()
    curl = command.replace(
        "curl -s ", f"curl -sS --max-time {COMMAND_TIMEOUT_S:.0f} -o - -w '\\n%{{http_code}}' ", 1
    )
    process = await asyncio.create_subprocess_shell(
        curl, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    stdout, stderr = await process.communicate()
    if process.returncode == 28:  # curl: operation timed out
        raise AssertionError(f"no answer within {COMMAND_TIMEOUT_S} s: {command}")
    assert process.returncode == 0, f"{command}: {stderr.decode()}"
    body, _, status = stdout.decode().rpartition("\n")
    return int(status), body


async def test_every_banner_and_readme_example_answers_against_the_demo() -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    async with pharos_process("demo", "--listen", f"127.0.0.1:{port}", "--speed", "20") as demo:
        await demo.wait_for_line(f"Pharos demo is running at {base}")
        await demo.wait_for_line("Stop with")
        banner = shell_commands(banner_of(demo))
        readme = [c.replace(README_BASE, base) for c in shell_commands(readme_quick_start())]
        # every kind of example is there: the table below would pass vacuously otherwise
        assert any("/api/chat" in c and "llama3.2:1b" in c for c in banner), banner
        assert any(c.startswith("open ") for c in banner), banner
        assert any(c.startswith("xdg-open ") for c in readme), readme
        timeout = aiohttp.ClientTimeout(total=COMMAND_TIMEOUT_S)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            for command in banner + readme:
                assert base in command, command
                status, body = await run_command(command, session)
                assert status == 200, f"{command}: {status} {body[:300]}"
                assert body.strip(), command
        demo.signal(signal.SIGINT)
        assert await demo.wait() == 0
    assert "Traceback" not in demo.output


def test_commands_are_found_across_continuations_and_comments() -> None:
    text = """
      curl -s http://h/v1/models
      curl -s http://h/v1/chat \\
        -d '{"a":1}'
      open http://h/status     (what it shows)
      xdg-open http://h/status # Linux
      not a command
    """
    assert shell_commands(text) == [
        "curl -s http://h/v1/models",
        "curl -s http://h/v1/chat -d '{\"a\":1}'",
        "open http://h/status",
        "xdg-open http://h/status",
    ]
