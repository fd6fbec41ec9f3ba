"""/status in a real browser: headless Chromium loads the page from a running router with fake
engines and traffic, its DOM holds every section, and screenshots (laptop and phone) land in
test-artifacts/ for a person to look at."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from tests.obs.rig import Router, StartRouter
from tests.obs.status_html import parse_status
from tests.obs.traffic import make_traffic, rich_router, seed_history

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
SIZES = {"laptop": (1280, 900), "phone": (390, 844)}
LAPTOP_FULL_HEIGHT = 2400  # the whole page at once, for review
PHONE_SECTIONS = ("backends", "targets", "recent", "usage")  # one phone screen per section

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists() and not os.environ.get("CI"),
    reason="/usr/bin/chromium is missing (run scripts/install-browser.sh); CI always runs this",
)


async def chromium(profile: Path, *args: str) -> bytes:
    proc = await asyncio.create_subprocess_exec(
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        stdout, stderr = await asyncio.wait_for(proc.communicate(), timeout=60)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode == 0, stderr.decode(errors="replace")[-2000:]
    return stdout


async def screenshot(profile: Path, url: str, path: Path, width: int, height: int) -> None:
    await asyncio.to_thread(path.unlink, missing_ok=True)
    await chromium(profile, f"--window-size={width},{height}", f"--screenshot={path}", url)
    png = await asyncio.to_thread(path.read_bytes)
    assert len(png) > 10_000, f"{path} looks empty"
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.fixture
async def router(start_router: StartRouter, tmp_path: Path) -> Router:
    router = await rich_router(start_router, tmp_path)  # no keys: /status is open
    await make_traffic(router, [None])
    seed_history(router)
    return router


async def test_status_page_in_headless_chromium(router: Router, tmp_path: Path) -> None:
    url = f"{router.base}/status"
    profile = tmp_path / "chromium-profile"
    dom = (await chromium(profile, "--dump-dom", url)).decode()
    page = parse_status(dom)
    for section in ("summary", "backends", "targets", "recent", "usage", "peers"):
        assert section in page.sections, section
    assert len(page.rows_in("backends", "probe")) >= 6
    assert len(page.rows_in("recent", "request")) == 6
    assert "unknown" in page.text_by_section["targets"]
    assert len(page.bars) == 30

    ARTIFACTS.mkdir(exist_ok=True)
    for name, (width, height) in SIZES.items():
        await screenshot(profile, url, ARTIFACTS / f"status-{name}.png", width, height)
    width, _ = SIZES["laptop"]
    await screenshot(profile, url, ARTIFACTS / "status-laptop-full.png", width, LAPTOP_FULL_HEIGHT)
    # A screenshot shows the top of a page only: for each later section, the served page with
    # the sections above it hidden shows how that section reads on a phone.
    width, height = SIZES["phone"]
    for section in PHONE_SECTIONS:
        hidden = ",".join(f"#{s}" for s in page.sections[: page.sections.index(section)])
        copy = tmp_path / f"status-{section}.html"
        copy.write_text(dom.replace("</head>", f"<style>{hidden} {{display:none}}</style></head>"))
        await screenshot(
            profile, copy.as_uri(), ARTIFACTS / f"status-phone-{section}.png", width, height
        )
