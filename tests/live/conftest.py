"""Layer 4: real engines (spec §14). Every test here is marked `live`, so the default run
(`addopts -m 'not live'`) deselects them; run them with `pytest -m live tests/live`.

The engines come from the engine cache that `bash scripts/engines/install-all.sh` fills.
A missing engine FAILS the test with the script to run: CI installs first, and a live
run that silently skipped would prove nothing.

PHAROS_RECORD=1 writes the captures into tests/captures/ (commit-worthy):
engines/<engine>/<version>/ (the layout of the shared captures, which the engine replay
tests walk) and llamacpp-router/<version>/; otherwise they go to a temporary directory.
Each live test also says what it proved (`prove` below): PHAROS_RECORD=1 rewrites
tests/captures/live-results.tsv with the rows of the tests that passed, which SUPPORT.md's
"(live)" cells come from; PHAROS_LIVE_RESULTS=PATH writes them elsewhere.
PHAROS_LIVE_ENGINES=llamacpp,vllm,llamacpp-router picks engines; PHAROS_LIVE_LOGS keeps
the engines' logs in a directory of your choice.
"""

from __future__ import annotations

import asyncio
import os
import platform
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from pharos.engine import Kind, resolve, scrape
from tests.live.capture import (
    LLAMACPP_GAUGE,
    VLLM_GAUGE,
    CaptureResult,
    Driver,
    StateGauge,
    copy_log_if_clean,
    engine_version,
)
from tests.live.checks import LiveCapture, Observed
from tests.live.engines import (
    REPO_ROOT,
    EngineMissing,
    RunningEngine,
    gemma_gguf,
    require,
    smollm2_gguf,
    start_llamacpp,
    start_llamacpp_router,
    start_vllm,
)
from tests.live.proofs import Prove, SessionProofs, finish, prover
from tests.live.router import RouterCapture, capture_router, router_models_dir

LIVE_DIR = Path(__file__).parent


LIVE_TEST_TIMEOUT_S = 1200
"""Engines start inside session fixtures (vLLM takes ~2 min on 2 cores) and count against
the first test's timeout; the suite-wide 120 s would fail them, not a hang."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if LIVE_DIR in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.live)
            item.add_marker(pytest.mark.timeout(LIVE_TEST_TIMEOUT_S))


_PROOFS = pytest.StashKey[SessionProofs]()


class _ReportsToProofs:
    def __init__(self, proofs: SessionProofs) -> None:
        self.proofs = proofs

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.nodeid.startswith("tests/live/"):
            self.proofs.report(report)


def pytest_configure(config: pytest.Config) -> None:
    proofs = SessionProofs()
    config.stash[_PROOFS] = proofs
    config.pluginmanager.register(_ReportsToProofs(proofs), "pharos-live-proofs")


def pytest_sessionfinish(session: pytest.Session) -> None:
    proofs = session.config.stash.get(_PROOFS, None)
    if proofs is not None and proofs.ran:
        written = finish(proofs)
        if written is not None:
            print(f"\nlive results: {len(proofs.passed())} proofs written to {written}")


@pytest.fixture
def prove(request: pytest.FixtureRequest) -> Prove:
    """Call after the assertions: (engine dir, release dir, signal, probe) this test proved."""
    return prover(request.config.stash[_PROOFS], request.node.nodeid)


def selected(engine: str) -> bool:
    wanted = os.environ.get("PHAROS_LIVE_ENGINES")
    return wanted is None or engine in {e.strip() for e in wanted.split(",")}


@pytest.fixture(scope="session")
def capture_root() -> Iterator[Path]:
    configured = os.environ.get("PHAROS_LIVE_CAPTURES")  # make live-latest: kept for the diff
    if configured:
        Path(configured).mkdir(parents=True, exist_ok=True)
        yield Path(configured)
        return
    if os.environ.get("PHAROS_RECORD") == "1":
        yield REPO_ROOT / "tests" / "captures"
        return
    with tempfile.TemporaryDirectory(prefix="pharos-live-") as tmp:
        yield Path(tmp)


@pytest.fixture(scope="session")
def engine_logs() -> Path:
    """Kept after the run (not deleted) so a failure can be read: $PHAROS_LIVE_LOGS or /tmp."""
    configured = os.environ.get("PHAROS_LIVE_LOGS")
    if configured:
        Path(configured).mkdir(parents=True, exist_ok=True)
        return Path(configured)
    return Path(tempfile.mkdtemp(prefix="pharos-engine-logs-"))


async def _capture(engine: RunningEngine, gauge: StateGauge, root: Path) -> CaptureResult:
    async with _capture_session() as session:

        async def observe(_state: str) -> Observed:
            plan, resolved = await resolve(session, engine.base_url, Kind.AUTO)
            scraped = await scrape(plan, session, engine.base_url, timeout_s=5.0)
            return Observed(plan, resolved, scraped)

        version = await engine_version(session, engine.name, engine.base_url)
        driver = Driver(
            session,
            engine=engine.name,
            base_url=engine.base_url,
            model=engine.model,
            gauge=gauge,
            version=version,
            out_root=root / "engines",
            meta={"model": "SmolLM2-135M-Instruct Q4_1", "start": " ".join(_argv(engine))},
            observe=observe,
        )
        return await driver.run()


CAPTURE_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=10.0, sock_read=120.0)
"""Each read is bounded, not the whole request: the router capture's 1,500-token streams ran past
aiohttp's default 300 s total at load 7 (26 errors in one `make live-latest`); an engine that goes
silent for 120 s still fails the capture."""


def _capture_session() -> aiohttp.ClientSession:
    return aiohttp.ClientSession(connector=_fresh_connections(), timeout=CAPTURE_TIMEOUT)


def _fresh_connections() -> aiohttp.TCPConnector:
    """No keep-alive reuse: after cancelled streams the engine closes idle connections, and a
    POST on a reused, already-closed one fails instead of reaching the engine."""
    return aiohttp.TCPConnector(force_close=True)


def _argv(engine: RunningEngine) -> list[str]:
    """The start command without the machine's paths or the random port."""
    shown = []
    for arg in engine.argv:
        shown.append(Path(arg).name if arg.startswith("/") else arg)
    if "--port" in shown:
        shown[shown.index("--port") + 1] = "PORT"
    return shown


def _live(
    engine_name: str, start: Any, gauge: StateGauge, root: Path, logs: Path
) -> Iterator[LiveCapture]:
    if not selected(engine_name):
        pytest.skip(f"PHAROS_LIVE_ENGINES excludes {engine_name}")
    try:
        engine = start(logs)
    except EngineMissing as missing:
        pytest.fail(str(missing), pytrace=False)
    try:
        result = asyncio.run(_capture(engine, gauge, root))
    finally:
        engine.stop()  # the tests read the capture; the engine's cores go to the next one
    copy_log_if_clean(engine.log_path, result.out_dir)
    yield LiveCapture(engine, result)


@pytest.fixture(scope="session")
def llamacpp(capture_root: Path, engine_logs: Path) -> Iterator[LiveCapture]:
    yield from _live("llamacpp", start_llamacpp, LLAMACPP_GAUGE, capture_root, engine_logs)


@pytest.fixture(scope="session")
def vllm(capture_root: Path, engine_logs: Path) -> Iterator[LiveCapture]:
    yield from _live("vllm", start_vllm, VLLM_GAUGE, capture_root, engine_logs)


@pytest.fixture(scope="session")
def llamacpp_router(
    capture_root: Path, engine_logs: Path
) -> Iterator[tuple[RunningEngine, RouterCapture]]:
    """Router mode over a models dir of two symlinked GGUFs (smollm2, gemma3), --models-max 1."""
    if not selected("llamacpp-router"):
        pytest.skip("PHAROS_LIVE_ENGINES excludes llamacpp-router")
    try:
        require([smollm2_gguf(), gemma_gguf()], "fetch-models.sh")
    except EngineMissing as missing:
        pytest.fail(str(missing), pytrace=False)
    models = router_models_dir()
    try:
        engine = start_llamacpp_router(models, engine_logs)
    except EngineMissing as missing:
        pytest.fail(str(missing), pytrace=False)
    try:
        result = asyncio.run(_capture_router(engine, capture_root))
    finally:
        engine.stop()
    yield engine, result


async def _capture_router(engine: RunningEngine, root: Path) -> RouterCapture:
    async with _capture_session() as session:

        async def observe(_state: str) -> Observed:
            plan, resolved = await resolve(session, engine.base_url, Kind.AUTO)
            scraped = await scrape(plan, session, engine.base_url, timeout_s=5.0)
            return Observed(plan, resolved, scraped)

        version = await engine_version(session, engine.name, engine.base_url)
        meta = {
            "engine": "llamacpp-router",
            "version": version,
            "models": "smollm2 (SmolLM2-135M-Instruct Q4_1), gemma3 (gemma-3-270m Q4_K_M)",
            "captured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "command": "PHAROS_RECORD=1 .venv/bin/pytest -m live tests/live/test_router.py",
            "start": " ".join(_argv(engine)),
            "host": f"{platform.system()}/{platform.machine()}",
        }
        return await capture_router(session, engine.base_url, root, version, meta, observe)


# ---- running engines for the Pharos and doctor live tests (test_pharos.py, test_doctor.py) ----


def _uses_vllm_capture(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    params = callspec.params.values() if callspec is not None else ()
    return "vllm" in getattr(item, "fixturenames", ()) or "vllm" in params


@pytest.fixture(scope="session")
def vllm_engine(request: pytest.FixtureRequest, engine_logs: Path) -> Iterator[RunningEngine]:
    """One vLLM kept running for the session (it takes minutes to start on 2 cores).

    When this session also runs the `vllm` capture, that capture (which starts and stops
    its own vLLM) goes first, so two vLLMs never share the cores."""
    import contextlib

    if not selected("vllm"):
        pytest.skip("PHAROS_LIVE_ENGINES excludes vllm")
    if any(_uses_vllm_capture(item) for item in request.session.items):
        # A failed capture is reported by its own tests; this fixture starts its vLLM anyway.
        with contextlib.suppress(Exception, pytest.fail.Exception, pytest.skip.Exception):
            request.getfixturevalue("vllm")
    try:
        engine = start_vllm(engine_logs / "pharos")
    except EngineMissing as missing:
        pytest.fail(str(missing), pytrace=False)
    try:
        yield engine
    finally:
        engine.stop()


@pytest.fixture
def llamacpp_pair(engine_logs: Path) -> Iterator[tuple[RunningEngine, RunningEngine]]:
    """Two fresh llama-servers (-np 2 -c 4096 -t 1), stopped after the test (~1 s to start)."""
    from tests.live.pharos_engines import start_llamacpp_single_thread

    if not selected("llamacpp"):
        pytest.skip("PHAROS_LIVE_ENGINES excludes llamacpp")
    started: list[RunningEngine] = []
    try:
        for name in ("llamacpp-a", "llamacpp-b"):
            started.append(start_llamacpp_single_thread(name, engine_logs / "pharos"))
        yield started[0], started[1]
    except EngineMissing as missing:
        pytest.fail(str(missing), pytrace=False)
    finally:
        for engine in started:
            engine.stop()
