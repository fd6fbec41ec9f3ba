"""Record the openai, anthropic and ollama Python SDKs' requests through the sink in front of
Pharos into tests/captures/clients/<sdk>-python/<version>/ (issue 16). Run by
scripts/clients/record.sh with the project's .venv; the SDKs run in their own cached venv.

    python scripts/clients/record_sdks.py SDK_VENV [OUT_ROOT]
"""

from __future__ import annotations

import asyncio
import datetime
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from stack import recording_stack  # noqa: E402

SDKS = {"openai": "openai", "anthropic": "openai", "ollama": "ollama"}  # sdk -> fakes behind
ENGINES = {"openai": "llama.cpp", "ollama": "Ollama"}


def sdk_version(venv: Path, sdk: str) -> str:
    code = f"import importlib.metadata as m; print(m.version({sdk!r}))"
    return subprocess.run(
        [str(venv / "bin" / "python"), "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()


async def record_one(venv: Path, sdk: str, out_root: Path) -> Path:
    version = sdk_version(venv, sdk)
    out_dir = out_root / f"{sdk}-python" / version
    if out_dir.exists():
        shutil.rmtree(out_dir)
    async with recording_stack(SDKS[sdk], out_dir, speed=20.0) as stack:
        command = [str(venv / "bin" / "python"), str(HERE / "sdk_calls.py"), sdk, stack.sink_url]
        process = await asyncio.create_subprocess_exec(*command, stack.key)
        rc = await asyncio.wait_for(process.wait(), timeout=120)
        if rc != 0:
            raise SystemExit(f"{sdk}: sdk_calls.py exited {rc}")
    (out_dir / ".inflight").unlink(missing_ok=True)
    meta = out_dir / "meta.yaml"
    meta.write_text(
        f"client: {sdk} Python SDK {version} (its own request shapes)\n"
        f"captured: {datetime.date.today().isoformat()}\n"
        f"command: bash scripts/clients/record.sh sdks  # scripts/clients/sdk_calls.py {sdk}\n"
        f"behind: Pharos with one key, two fake {ENGINES[SDKS[sdk]]} engines"
        " (scripts/clients/stack.py)\n"
        "scrubbed: Authorization, x-api-key and every other secret-bearing header value\n"
    )
    return out_dir


async def main() -> int:
    venv = Path(sys.argv[1])
    default_out = HERE.parents[1] / "tests/captures/clients"
    out_root = Path(sys.argv[2]) if len(sys.argv) > 2 else default_out
    for sdk in SDKS:
        out_dir = await record_one(venv, sdk, out_root)
        print(f"{sdk}: {len(list(out_dir.glob('*.json')))} requests in {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
