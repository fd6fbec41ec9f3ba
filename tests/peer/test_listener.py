"""The peer listener on real 127.0.0.1 sockets: its own port, the secret checked on every
request, Pharos-Origin on every answer, and deltas over HTTP between two instances."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from pharos.peer.server import PeerSetupError, peer_listener, read_secret
from pharos.peer.transport import HttpTransport, Unreachable
from pharos.peer.wire import Delta, encode
from tests.peer.mesh import ADDRESSES, SECRET, Mesh, MeshFactory, until


async def test_every_answer_names_the_origin_and_only_the_secret_gets_in(
    mesh: MeshFactory,
) -> None:
    m: Mesh = await mesh(engines=1)
    a = await m.start(ADDRESSES[0], origin=77, pull=False)
    async with peer_listener(a.node, "127.0.0.1", 0) as (address,):
        url = f"http://{address}"
        good = {"Authorization": f"Bearer {SECRET.decode()}"}
        # request                         | headers          | status
        cases = [
            ("GET", "/peer/snapshot", {}, 401),
            ("GET", "/peer/snapshot", {"Authorization": "Bearer nope"}, 401),
            ("POST", "/peer/delta", {"Authorization": SECRET.decode()}, 401),
            ("GET", "/v1/models", good, 404),
            ("GET", "/peer/snapshot", good, 200),
        ]
        async with aiohttp.ClientSession() as client:
            for method, path, headers, status in cases:
                async with client.request(method, url + path, headers=headers) as resp:
                    assert resp.status == status, (method, path, headers)
                    assert resp.headers["Pharos-Origin"] == "77"
            body = encode(Delta(origin=5, cells=[]))
            async with client.post(url + "/peer/delta", data=body, headers=good) as resp:
                assert resp.status == 200
            async with client.post(url + "/peer/delta", data=b"\xc1", headers=good) as resp:
                assert resp.status == 400 and resp.headers["Pharos-Origin"] == "77"


async def test_two_instances_exchange_deltas_over_http(mesh: MeshFactory) -> None:
    m: Mesh = await mesh(engines=1)
    a = await m.start(ADDRESSES[0], origin=1, pull=False)
    b = await m.start(ADDRESSES[1], origin=2, pull=False)
    async with (
        peer_listener(b.node, "127.0.0.1", 0) as (b_address,),
        aiohttp.ClientSession() as session,
    ):
        transport = HttpTransport(session, 1 << 20)
        reply = await transport.request(
            b_address,
            "POST",
            "/peer/delta",
            {"Authorization": f"Bearer {SECRET.decode()}"},
            encode(Delta(origin=a.origin, cells=a.pharos.usage.export_delta())),
            2.0,
        )
        assert reply.status == 200 and reply.origin == 2
        await until(lambda: b.pharos.peers.known_remote(1) is not None, "B heard from A")
        with pytest.raises(Unreachable):
            await transport.request("127.0.0.1:9", "GET", "/peer/snapshot", {}, b"", 1.0)


# secret file content  | why it is refused
@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"", "is empty"),
        (b"  \n", "is empty"),
        (b"two words", "no spaces"),
        ("s\u00e9cret".encode(), "printable ASCII"),
    ],
)
def test_a_secret_file_that_cannot_be_a_bearer_token_is_refused(
    tmp_path: Path, content: bytes, match: str
) -> None:
    path = tmp_path / "secret"
    path.write_bytes(content)
    with pytest.raises(PeerSetupError, match=match):
        read_secret(str(path))


def test_a_missing_secret_file_is_refused_naming_the_field(tmp_path: Path) -> None:
    with pytest.raises(PeerSetupError, match=r"peers\.secret_file: can.t read"):
        read_secret(str(tmp_path / "absent"))
    (tmp_path / "ok").write_bytes(b"  token-123\n")
    assert read_secret(str(tmp_path / "ok")) == b"token-123"
