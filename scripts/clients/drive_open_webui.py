"""Run inside the Open WebUI venv (Playwright from PyPI driving Debian's chromium, no browser
download): a new user's first session, all through the UI. Creates the admin account, points
the one enabled connection (OpenAI or Ollama) at URL with KEY and PREFIX_ID, picks the model,
and types a multi-turn chat, waiting after each turn until the sink has recorded nothing new
for QUIET_S (Open WebUI sends its title, tag and follow-up requests after the reply).

    python drive_open_webui.py WEBUI_URL CONNECTION_URL KEY PREFIX_ID MODEL SINK_DIR SHOTS_DIR \
        TURN...
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

QUIET_S = 6.0
TURN_TIMEOUT_S = 300.0
ADMIN = ("Recording Admin", "admin@example.com", "recording-only-password")


def recorded(sink_dir: Path) -> int:
    return len(list(sink_dir.glob("*.json")))


def inflight(sink_dir: Path) -> int:
    marker = sink_dir / ".inflight"  # the sink's count of requests still being answered
    return int(marker.read_text() or 0) if marker.exists() else 0


def wait_quiet(sink_dir: Path, before: int) -> int:
    """Until the sink has recorded more than `before`, answers nothing, and has recorded
    nothing new for QUIET_S."""
    deadline = time.monotonic() + TURN_TIMEOUT_S
    last, last_change = recorded(sink_dir), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = recorded(sink_dir)
        if now != last:
            last, last_change = now, time.monotonic()
        elif inflight(sink_dir) > 0:
            last_change = time.monotonic()
        elif now > before and time.monotonic() - last_change >= QUIET_S:
            return now
    raise SystemExit(f"no quiet sink within {TURN_TIMEOUT_S}s ({last} recorded, {before} before)")


def dismiss_changelog(page: Page) -> None:
    button = page.get_by_role("button", name="Okay, Let's Go!")
    if button.count():
        button.first.click()


def create_admin(page: Page, base: str) -> None:
    page.goto(base + "/auth", wait_until="domcontentloaded")
    page.get_by_text("Get started").click()
    name, email, password = ADMIN
    page.fill("#name", name)
    page.fill("#email", email)
    page.fill("#password", password)
    page.locator("form button").last.click()
    page.wait_for_url(base + "/", timeout=30_000)
    page.wait_for_timeout(1500)
    dismiss_changelog(page)


def set_connection(page: Page, base: str, url: str, key: str, prefix_id: str) -> None:
    page.goto(base + "/admin/settings/connections", wait_until="domcontentloaded")
    page.get_by_label("Configure").first.click()
    page.fill("#url-input", url)
    page.fill("input[placeholder='API Key']", key)
    page.get_by_role("button", name="Advanced", exact=True).click()
    page.fill("#prefix-id-input", prefix_id)
    page.locator("[role=dialog] button, .modal button").filter(has_text="Save").last.click()
    page.wait_for_timeout(1000)
    page.get_by_role("button", name="Save", exact=True).last.click()
    page.wait_for_timeout(2000)


def pick_model(page: Page, base: str, model: str) -> None:
    page.goto(base + "/", wait_until="domcontentloaded")
    page.wait_for_selector("#chat-input")
    dismiss_changelog(page)
    page.wait_for_timeout(2000)
    if page.get_by_text(model, exact=True).count():  # the only model is selected already
        return
    page.get_by_role("button", name="Select a model").first.click()
    page.get_by_text(model, exact=True).first.click()
    page.wait_for_timeout(500)


def chat(page: Page, turns: list[str], sink_dir: Path, shots: Path) -> None:
    for i, turn in enumerate(turns, start=1):
        before = recorded(sink_dir)
        box = page.locator("#chat-input")
        box.click()
        box.press_sequentially(turn, delay=5)
        box.press("Enter")
        after = wait_quiet(sink_dir, before)
        page.screenshot(path=str(shots / f"turn{i}.png"))
        print(f"turn {i}: {after - before} requests recorded", flush=True)


def main() -> int:
    base, url, key, prefix_id, model, sink, shots_dir, *turns = sys.argv[1:]
    sink_dir, shots = Path(sink), Path(shots_dir)
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        try:
            create_admin(page, base)
            set_connection(page, base, url, key, prefix_id)
            page.screenshot(path=str(shots / "connection.png"))
            shown = model if not prefix_id else f"{prefix_id}.{model}"
            pick_model(page, base, shown)
            chat(page, turns, sink_dir, shots)
        except BaseException:
            page.screenshot(path=str(shots / "failed.png"))
            raise
        finally:
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
