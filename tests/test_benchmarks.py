"""Every benchmark still runs (issue 13: benchmarks report, never assert; CI keeps them from
rotting). Each runs with PHAROS_BENCH_SMOKE=1 (tiny counts) and must print its lines; the
numbers are not checked."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
LINE = re.compile(r"^(bench|mem|info) [a-z0-9-]+( [a-z0-9_]+=[^ ]+)+$")

# file, the line names it must print
EXPECTED = [
    ("bench_policy.py", ["pick-cost-64", "pick-least-load-64"]),
    ("bench_sched.py", ["acquire-release-64", "acquire-release-64-state"]),
    ("bench_prefix.py", ["prefix-chain-50", "prefix-lookup-50", "prefix-record-50", "prefix-200k"]),
    ("bench_memory.py", ["pharos-full", "pharos-full-after-save", "pharos-restored"]),
    ("bench_proxy.py", ["overhead-32k", "ttft-direct-32k", "ttft-pharos-32k"]),
    ("bench_peer.py", ["peer-push"]),
    (
        "compare.py",
        [
            "compare-bare",
            "compare-pharos",
            "compare-pharos-vs-bare",
            "compare-pharos-chat-32k-10tok",
            "compare-pharos-chat-32k-256tok",
            "compare-pharos-loop-lag-c1",
            "compare-pharos-loop-lag-c4",  # smoke runs c=4
            "compare-bare-loop-lag-c1",
            "compare-bare-loop-lag-c4",
            "compare-floor-chat-32k-10tok",
            "compare-floor-parse-chat-32k-10tok",
        ],
    ),
]


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("script", "names"), EXPECTED)
def test_each_benchmark_prints_its_lines_in_smoke_mode(script: str, names: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script)],
        env={**os.environ, "PHAROS_BENCH_SMOKE": "1"},
        capture_output=True,
        text=True,
        timeout=220,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stdout.splitlines() if line]
    assert all(LINE.match(line) for line in lines), lines
    printed = {line.split()[1] for line in lines}
    assert set(names) <= printed, (names, lines)


def test_every_benchmark_file_is_smoke_tested() -> None:
    scripts = {p.name for p in BENCHMARKS.glob("bench_*.py")} | {"compare.py"}
    assert scripts == {s for s, _ in EXPECTED}


def _compare_module() -> Any:
    spec = importlib.util.spec_from_file_location("bench_compare", BENCHMARKS / "compare.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


# cumulative buckets before, after                                  | the line's figures
LAG_CASES = [
    ({}, {"0.001": 5.0, "0.002": 5.0, "+Inf": 5.0}, "samples=5 over_1ms=0 worst_under_ms=1"),
    (
        {"0.001": 5.0, "0.002": 5.0, "0.005": 5.0, "+Inf": 5.0},
        {"0.001": 8.0, "0.002": 9.0, "0.005": 10.0, "+Inf": 10.0},
        "samples=5 over_1ms=2 worst_under_ms=5",  # 3 under 1 ms, 1 under 2, 1 under 5
    ),
    ({}, {"0.001": 1.0, "0.002": 1.0, "+Inf": 2.0}, "samples=2 over_1ms=1 worst_under_ms=inf"),
]


@pytest.mark.parametrize(("before", "after", "figures"), LAG_CASES)
def test_the_loop_lag_line_counts_only_samples_between_its_two_reads(
    before: dict[str, float], after: dict[str, float], figures: str
) -> None:
    line = _compare_module().lag_line("pharos", "c1", before, after)
    assert line == f"bench compare-pharos-loop-lag-c1 {figures}"
    assert LINE.match(line)


def _rawhttp_module() -> Any:
    spec = importlib.util.spec_from_file_location("bench_rawhttp", BENCHMARKS / "rawhttp.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


_HEAD_CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
_HEAD_LENGTH = b"HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\n"

# pieces as they arrive                                       | piece with first body byte, last
REPLY_END_CASES = [
    ([_HEAD_LENGTH + b"nope"], 0, 0),
    ([_HEAD_LENGTH, b"no", b"pe"], 1, 2),
    ([_HEAD_CHUNKED + b"3\r\nabc\r\n0\r\n\r\n"], 0, 0),
    ([_HEAD_CHUNKED[:10], _HEAD_CHUNKED[10:], b"3\r\nabc\r\n", b"0\r\n\r\n"], 2, 3),
    ([_HEAD_CHUNKED, b"3\r\nabc\r\n0\r", b"\n\r\n"], 1, 2),  # the last chunk split
    ([_HEAD_CHUNKED, b"0\r\n\r\n"], 1, 1),  # an empty body
    ([_HEAD_CHUNKED, b"5\r\n0\r\n\r\n\r\n", b"0\r\n\r\n"], 1, 2),  # looks like an end, is data
]


@pytest.mark.parametrize(("pieces", "first_at", "done_at"), REPLY_END_CASES)
def test_the_raw_client_finds_the_first_body_byte_and_the_end_of_a_reply(
    pieces: list[bytes], first_at: int, done_at: int
) -> None:
    end = _rawhttp_module().ReplyEnd()
    seen = [end.feed(piece) for piece in pieces]
    assert [i for i, (first, _) in enumerate(seen) if first] == [first_at]
    assert [i for i, (_, done) in enumerate(seen) if done] == [done_at]


# usage asked | events: role chunk, 10 tokens, finish, (usage,) [DONE]
FAST_FAKE_CASES = [(False, 13), (True, 14)]


@pytest.mark.parametrize(("usage", "events"), FAST_FAKE_CASES)
async def test_the_fast_fake_streams_what_fakevllm_recorded_and_the_raw_client_reads_it(
    usage: bool, events: int
) -> None:
    import asyncio

    import aiohttp

    raw = _rawhttp_module()
    replies = await raw.record_replies([10])
    server = await asyncio.get_running_loop().create_server(
        lambda: raw.FakeServer(replies), "127.0.0.1", 0
    )
    port = server.sockets[0].getsockname()[1]
    body = raw.chat_body(3, 10)
    if usage:
        body = b'{"stream_options": {"include_usage": true}, ' + body[1:]
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"http://127.0.0.1:{port}/v1/chat/completions", data=body) as response,
        ):
            sse = await response.read()
        assert response.status == 200
        lines = [line for line in sse.split(b"\n\n") if line]
        assert len(lines) == events and lines[-1] == b"data: [DONE]"
        assert (b'"choices":[]' in lines[-2]) is usage  # vLLM's usage-only chunk
        client = raw.Client("127.0.0.1", port)
        request = raw.request_bytes(f"127.0.0.1:{port}", "/v1/chat/completions", body, {})
        first, second = await client.send(request), await client.send(request)  # keep-alive
        client.close()
        assert first.status == 200 and first.body_bytes == second.body_bytes > len(sse)
        assert first.ttft_s > 0
    finally:
        server.close()


async def test_the_raw_client_sends_once_more_when_an_idle_connection_was_just_closed() -> None:
    """A keep-alive connection the server closes before a byte of the reply (uvicorn's 5 s
    idle timeout hit a bench-compare run) is retried once on a new one; a reply cut after its
    first byte is an error."""
    import asyncio

    raw = _rawhttp_module()
    answered: list[bool] = []
    cut_mid_reply = False

    class Server(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport

        def data_received(self, _data: bytes) -> None:
            transport = self.transport
            assert isinstance(transport, asyncio.Transport)
            if not answered:  # the first request: closed unanswered
                answered.append(False)
                transport.close()
            elif cut_mid_reply:
                transport.write(_HEAD_CHUNKED + b"3\r\nab")
                transport.close()
            else:
                answered.append(True)
                transport.write(_HEAD_CHUNKED + b"0\r\n\r\n")

    server = await asyncio.get_running_loop().create_server(Server, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = raw.Client("127.0.0.1", port)
    request = raw.request_bytes(f"127.0.0.1:{port}", "/", b"{}", {})
    try:
        reply = await client.send(request)
        assert reply.status == 200 and answered == [False, True]
        cut_mid_reply = True
        with pytest.raises(ConnectionError, match="mid-reply"):
            await client.send(request)
    finally:
        client.close()
        server.close()


def _profile_module() -> Any:
    spec = importlib.util.spec_from_file_location("bench_profile", BENCHMARKS / "profile_proxy.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_profile_shares_count_each_function_once_per_stack_and_leave_idle_threads_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = tmp_path / "spy.txt"
    raw.write_text(
        "run (a.py:1);handle (b.py:2);parse (c.py:3) 6\n"
        "run (a.py:1);handle (b.py:2);handle (b.py:9) 2\n"  # recursion: counted once
        "run (a.py:1);handle (b.py:2) 2\n"
        "_bootstrap (threading.py:1);_worker (concurrent/futures/thread.py:83) 90\n"
    )
    _profile_module().shares(raw, 10)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "# 10 samples; share of them, inclusive then self"
    assert "inclusive 100.0% handle (b.py" in out
    assert "inclusive  60.0% parse (c.py" in out
    assert "self  60.0% parse (c.py" in out
    assert "self  40.0% handle (b.py" in out
    assert not [line for line in out if "_worker" in line or "threading" in line]


SWEEP_ONE = ("--seeds", "1", "--bursts", "6", "--memory", "13")


@pytest.mark.timeout(120)
def test_the_warming_sweep_prints_a_row_per_policy_on_one_seed_and_burst() -> None:
    """benchmarks/sim_warm.py (issue 15's warming question) is a simulator sweep, not a
    bench_* file: one seed, one burst size, one host size keep it to a few seconds."""
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "sim_warm.py"), *SWEEP_ONE],
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line.split() for line in done.stdout.splitlines()[1:] if line]
    spec = importlib.util.spec_from_file_location("bench_sim_warm", BENCHMARKS / "sim_warm.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert [row[2] for row in rows] == list(module.POLICIES)
    assert all(row[:2] == ["13GB", "6"] and row[3].isdigit() for row in rows), rows
