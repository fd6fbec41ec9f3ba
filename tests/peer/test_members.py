"""Membership (spec §12): peers.members as written, or peers.dns re-resolved, with the port
of peers.listen for a name without one; resolution is injected."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from pharos.peer.members import Members, with_port


# member            | port taken
@pytest.mark.parametrize(
    ("member", "expected"),
    [
        ("pharos-a", "pharos-a:8081"),
        ("pharos-a:9000", "pharos-a:9000"),
        (" 10.0.0.5 ", "10.0.0.5:8081"),
        ("[::1]:9000", "[::1]:9000"),
        ("[::1]", "[::1]:8081"),
        ("fd00::7", "[fd00::7]:8081"),
    ],
)
def test_a_member_without_a_port_takes_the_listen_port(member: str, expected: str) -> None:
    assert with_port(member, 8081) == expected


async def test_static_members_are_the_list_as_written() -> None:
    members = Members(members=["a:1", "b"], default_port=7)
    assert not members.dynamic
    assert await members.current() == ("a:1", "b:7")


async def test_dns_is_resolved_on_every_call_with_the_listen_port() -> None:
    answers: list[Sequence[str]] = [["10.0.0.2", "10.0.0.1"], ["10.0.0.3", "fd00::1"]]
    asked: list[str] = []

    async def resolve(name: str) -> Sequence[str]:
        asked.append(name)
        return answers.pop(0)

    members = Members(dns="pharos-peers.default.svc", default_port=8081, resolve=resolve)
    assert members.dynamic
    assert await members.current() == ("10.0.0.1:8081", "10.0.0.2:8081")
    assert await members.current() == ("10.0.0.3:8081", "[fd00::1]:8081")
    assert asked == ["pharos-peers.default.svc"] * 2


async def test_a_dns_name_with_a_port_uses_that_port() -> None:
    async def resolve(name: str) -> Sequence[str]:
        assert name == "peers.local"
        return ["10.1.1.1"]

    members = Members(dns="peers.local:9100", default_port=8081, resolve=resolve)
    assert await members.current() == ("10.1.1.1:9100",)


async def test_a_failed_lookup_keeps_the_last_list_and_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def resolve(_name: str) -> Sequence[str]:
        raise OSError(-2, "Name or service not known")

    members = Members(dns="nowhere.invalid", resolve=resolve)
    assert await members.current() is None
    assert await members.current() is None
    assert len([r for r in caplog.records if "nowhere.invalid" in r.getMessage()]) == 1
