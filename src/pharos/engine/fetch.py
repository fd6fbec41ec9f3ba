"""One GET per path, with every failure turned into a value (never an exception)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import aiohttp

MAX_BODY_BYTES = 8 * 1024 * 1024
"""The largest body a probe reads (sglang /metrics is ~81 KB); more is an error."""


@dataclass(frozen=True, slots=True)
class Fetched:
    status: int | None  # None: no HTTP answer at all
    body: bytes = b""
    error: str | None = None
    timed_out: bool = False  # no answer within the timeout (silent, not refusing)

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    @property
    def no_answer(self) -> bool:
        """No answer or a server error: we can't tell what the path would say."""
        return self.status is None or self.status >= 500

    def reason(self) -> str | None:
        """The drop/fail reason, or None for a 2xx."""
        if self.status is None:
            return f"fetch error: {self.error}"
        if self.status == 404:
            return "404"
        if not self.ok:
            return f"status {self.status}"
        return None


def join(base_url: str, path: str) -> str:
    return base_url.rstrip("/") + path


async def fetch(
    session: aiohttp.ClientSession, base_url: str, path: str, timeout_s: float
) -> Fetched:
    try:
        async with session.get(
            join(base_url, path), timeout=aiohttp.ClientTimeout(total=timeout_s)
        ) as resp:
            if not 200 <= resp.status < 300:
                return Fetched(resp.status)
            chunks: list[bytes] = []
            size_bytes = 0
            async for chunk in resp.content.iter_chunked(65536):
                size_bytes += len(chunk)
                if size_bytes > MAX_BODY_BYTES:
                    return Fetched(None, error=f"body over {MAX_BODY_BYTES} bytes")
                chunks.append(chunk)
            return Fetched(resp.status, b"".join(chunks))
    except TimeoutError:
        return Fetched(None, error=f"timeout after {timeout_s:g}s", timed_out=True)
    except (aiohttp.ClientError, OSError, ValueError) as err:
        detail = str(err)
        return Fetched(
            None, error=f"{type(err).__name__}: {detail}" if detail else type(err).__name__
        )


def all_silent(fetched: Iterable[Fetched]) -> bool:
    """Every fetch timed out: the engine is silent (llama-cpp-python answers nothing while it
    generates), which is not the same as refusing a connection or answering 5xx."""
    answers = list(fetched)
    return bool(answers) and all(f.timed_out for f in answers)


async def fetch_all(
    session: aiohttp.ClientSession,
    base_url: str,
    paths: Iterable[str],
    timeout_s: float,
    done: Mapping[str, Fetched] | None = None,
) -> dict[str, Fetched]:
    """GETs each distinct path once, concurrently; reuses answers already in `done`."""
    results = dict(done or {})
    todo = [p for p in dict.fromkeys(paths) if p not in results]
    answers = await asyncio.gather(*(fetch(session, base_url, p, timeout_s) for p in todo))
    results.update(zip(todo, answers, strict=True))
    return results
