"""Templates cloned from the recorded captures (see templates/SOURCES.tsv for the file each
one came from), and the helpers that put a fake's numbers into them. Values are set
only on keys the recorded body has, so the key set and order stay the capture's.
"""

from __future__ import annotations

import copy
import json
import random
import string
from datetime import UTC, datetime
from importlib import resources
from typing import Any, TypeVar

Json = dict[str, Any]


def template_bytes(engine_dir: str, name: str) -> bytes:
    return (resources.files("pharos.fakeengine") / "templates" / engine_dir / name).read_bytes()


def template_json(engine_dir: str, name: str) -> Any:
    return json.loads(template_bytes(engine_dir, name))


def template_lines(engine_dir: str, name: str) -> list[Json]:
    """The JSON objects of an SSE (`data: {...}`) or NDJSON template, in order."""
    out: list[Json] = []
    for line in template_bytes(engine_dir, name).split(b"\n"):
        body = line[len(b"data: ") :] if line.startswith(b"data: ") else line
        if body.startswith(b"{"):
            out.append(json.loads(body))
    return out


def dumps(value: object) -> bytes:
    """The compact encoding every recorded Ollama, llama.cpp and vLLM body uses."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def sse(value: object) -> bytes:
    return b"data: " + dumps(value) + b"\n\n"


SSE_DONE = b"data: [DONE]\n\n"


T = TypeVar("T")


def clone(value: T) -> T:
    return copy.deepcopy(value)


def put(obj: Any, path: str, value: object) -> None:
    """Sets a dotted path only where the template has it (keeps the recorded shape)."""
    keys = path.split(".")
    for key in keys[:-1]:
        if not isinstance(obj, dict) or key not in obj:
            return
        obj = obj[key]
    if isinstance(obj, dict) and keys[-1] in obj:
        obj[keys[-1]] = value


def rfc3339_ns(wall_s: float) -> str:
    """Ollama's timestamps: RFC 3339 with nanoseconds and Z."""
    moment = datetime.fromtimestamp(wall_s, UTC)
    nanos = round((wall_s - int(wall_s)) * 1e9) % 1_000_000_000
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos:09d}Z"


def random_id(rng: random.Random, length: int, alphabet: str = string.ascii_letters) -> str:
    return "".join(rng.choice(alphabet + string.digits) for _ in range(length))


def set_metric(text: str, name: str, value: float, *, labels: str | None = None) -> str:
    """Replaces the sample value of one series in a Prometheus text template: the exact
    name (`vllm:num_requests_waiting` never matches `..._waiting_by_reason`)."""
    out: list[str] = []
    for line in text.split("\n"):
        if line.startswith((name + " ", name + "{")) and (labels is None or labels in line):
            series, _, _old = line.rpartition(" ")
            line = f"{series} {value}"
        out.append(line)
    return "\n".join(out)
