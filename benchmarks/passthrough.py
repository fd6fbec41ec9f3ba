"""The bare aiohttp pass-through Pharos is measured against (compare.py): forward the POST,
stream the reply back chunk by chunk, nothing else. The floor any Python proxy sits on.

It samples its own event-loop lag with Pharos's sampler (obs/looplag.py) and serves it on
/metrics: the control for Pharos's lag, since a stall both show is the machine's (another
process on the core), not Pharos's.

Run: .venv/bin/python benchmarks/passthrough.py --port N http://upstream
"""

from __future__ import annotations

import argparse
import contextlib

import aiohttp
from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest

from pharos.obs.looplag import LoopLag

_DROP = frozenset({"host", "content-length", "transfer-encoding", "connection", "authorization"})


def app_for(upstream: str) -> web.Application:
    app = web.Application(client_max_size=8 * 1024 * 1024)

    registry = CollectorRegistry()
    lag = LoopLag(registry)

    async def session_ctx(app: web.Application):  # type: ignore[no-untyped-def]
        app["session"] = aiohttp.ClientSession(auto_decompress=False)
        lag.start()
        yield
        await lag.stop()
        await app["session"].close()

    async def metrics(_request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(registry), content_type="text/plain")

    async def healthz(_request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def forward(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _DROP}
        session: aiohttp.ClientSession = request.app["session"]
        async with session.post(upstream + request.path_qs, data=body, headers=headers) as up:
            response = web.StreamResponse(status=up.status)
            content_type = up.headers.get("Content-Type")
            if content_type is not None:
                response.content_type = content_type
            await response.prepare(request)
            async for chunk in up.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response

    app.cleanup_ctx.append(session_ctx)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/{tail:.*}", forward)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("upstream")
    args = parser.parse_args()
    with contextlib.suppress(ImportError):
        import uvloop

        uvloop.install()
    web.run_app(app_for(args.upstream.rstrip("/")), host="127.0.0.1", port=args.port, print=None)


if __name__ == "__main__":
    main()
