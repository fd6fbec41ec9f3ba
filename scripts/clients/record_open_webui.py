"""Record Open WebUI's requests, UI-driven, through the sink in front of Pharos (issue 16).

For each connection (openai, ollama): a fresh Open WebUI data dir with only that connection
enabled (its URL a closed port until the admin sets it in the UI), the stack of
scripts/clients/stack.py, and drive_open_webui.py typing the chat in headless chromium. The
requests land in OUT_ROOT/open-webui/<version>-<connection>/ with a meta.yaml.

    python scripts/clients/record_open_webui.py WEBUI_VENV [OUT_ROOT] [--connections openai,ollama]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import secrets
import shutil
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from stack import MODEL, recording_stack  # noqa: E402

TURNS = (
    "Привет, 你好! Say hello in three languages, one line each.",
    "Now say good morning in Russian.",
    "Thanks. And in Chinese?",
    "Which of the three greetings is the shortest?",
)
PREFIX_ID = {"openai": "pharos", "ollama": ""}  # what the recording typed into "Prefix ID"
CLOSED_PORT_URL = "http://127.0.0.1:9"  # the connection's URL before the admin sets it
STARTUP_TIMEOUT_S = 300.0
FAKE_SPEED = 1.0  # see stack.py: the side requests' overlap with each turn depends on it


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def webui_env(connection: str, data_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DATA_DIR=str(data_dir),
        WEBUI_SECRET_KEY=secrets.token_hex(16),
        OFFLINE_MODE="true",  # no version check, no model downloads (no network here)
        HF_HUB_OFFLINE="1",
        BYPASS_EMBEDDING_AND_RETRIEVAL="true",
        ANONYMIZED_TELEMETRY="false",
        DO_NOT_TRACK="true",
        SCARF_NO_ANALYTICS="true",
    )
    if connection == "openai":
        env.update(
            ENABLE_OLLAMA_API="false",
            OPENAI_API_BASE_URL=CLOSED_PORT_URL + "/v1",
            OPENAI_API_KEY="set-in-the-ui",
        )
    else:
        env.update(ENABLE_OPENAI_API="false", OLLAMA_BASE_URL=CLOSED_PORT_URL)
    return env


async def wait_healthy(base: str, process: asyncio.subprocess.Process) -> float:
    start = time.monotonic()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
        while time.monotonic() - start < STARTUP_TIMEOUT_S:
            if process.returncode is not None:
                raise SystemExit(f"open-webui exited {process.returncode} while starting")
            try:
                async with session.get(base + "/health") as response:
                    if response.status == 200:
                        return time.monotonic() - start
            except (aiohttp.ClientError, TimeoutError):
                pass
            await asyncio.sleep(1.0)
    raise SystemExit(f"open-webui not healthy within {STARTUP_TIMEOUT_S}s")


async def record(venv: Path, connection: str, out_root: Path, work: Path) -> Path:
    version = (venv / ".version").read_text().strip()
    out_dir = out_root / "open-webui" / f"{version}-{connection}"
    if out_dir.exists():
        shutil.rmtree(out_dir)
    data_dir, shots = work / f"data-{connection}", work / f"shots-{connection}"
    data_dir.mkdir(parents=True)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = (work / f"open-webui-{connection}.log").open("wb")
    async with recording_stack(connection, out_dir, speed=FAKE_SPEED) as stack:
        webui = await asyncio.create_subprocess_exec(
            str(venv / "bin" / "open-webui"), "serve", "--host", "127.0.0.1", "--port", str(port),
            env=webui_env(connection, data_dir), stdout=log, stderr=log, cwd=str(work),
        )  # fmt: skip
        try:
            startup_s = await wait_healthy(base, webui)
            print(f"{connection}: open-webui up in {startup_s:.0f}s", flush=True)
            url = stack.sink_url + ("/v1" if connection == "openai" else "")
            run_start = time.monotonic()
            driver = await asyncio.create_subprocess_exec(
                str(venv / "bin" / "python"), str(HERE / "drive_open_webui.py"), base, url,
                stack.key, PREFIX_ID[connection], MODEL, str(out_dir), str(shots), *TURNS,
            )  # fmt: skip
            rc = await asyncio.wait_for(driver.wait(), timeout=900)
            if rc != 0:
                raise SystemExit(f"{connection}: the UI driver exited {rc} (screenshots: {shots})")
            run_s = time.monotonic() - run_start
        finally:
            if webui.returncode is None:
                webui.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(webui.wait(), timeout=30)
                except TimeoutError:
                    webui.kill()
                    await webui.wait()
            log.close()
    (out_dir / ".inflight").unlink(missing_ok=True)
    (out_dir / "meta.yaml").write_text(
        f"client: open-webui {version} ({connection} connection), typed into its UI in headless"
        " chromium by scripts/clients/drive_open_webui.py\n"
        f"captured: {datetime.date.today().isoformat()}\n"
        f"command: bash scripts/clients/record.sh open-webui  # make live-clients\n"
        f"connection: url={'SINK/v1' if connection == 'openai' else 'SINK'}, key=a Pharos key,"
        f" prefix_id={PREFIX_ID[connection]!r}\n"
        f"model: {MODEL}\n"
        f"engine_speed: {FAKE_SPEED}  # the fakes' speed: 1 = a small CPU engine\n"
        f"turns: {list(TURNS)!r}\n"
        "behind: the sink, then Pharos with one key, then two fake engines"
        f" ({'llama.cpp' if connection == 'openai' else 'Ollama'}; scripts/clients/stack.py)\n"
        "scrubbed: Authorization, cookies and every other secret-bearing header value\n"
        f"timing: startup_s={startup_s:.0f} drive_s={run_s:.0f}\n"
    )
    return out_dir


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("venv", type=Path)
    default_out = HERE.parents[1] / "tests/captures/clients"
    parser.add_argument("out_root", type=Path, nargs="?", default=default_out)
    parser.add_argument("--connections", default="openai,ollama")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pharos-webui-"))
    print(f"logs and screenshots: {work}", flush=True)
    for connection in args.connections.split(","):
        out_dir = await record(args.venv, connection, args.out_root, work)
        print(f"{connection}: {len(list(out_dir.glob('*.json')))} requests in {out_dir}")
    shutil.rmtree(work)  # kept when a recording failed
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
