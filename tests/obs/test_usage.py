"""/usage (spec §11): JSON and CSV, from/to/by/format, days in usage.timezone, admin only."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import zoneinfo

import pytest

from pharos.clock import FakeClock
from pharos.fakeengine import FakeModel, FakeOllama, no_sleep
from tests.obs.rig import MODEL, BackendSpecYaml, KeySpec, Router, StartRouter

ZONE = "Asia/Bangkok"
# 22:00:30 in Bangkok is 15:00:30 UTC: two hours later it is the next day in Bangkok but
# still the same day in UTC, so the rows' days show which zone counted them.
START_WALL = dt.datetime(2026, 9, 28, 22, 0, 30, tzinfo=zoneinfo.ZoneInfo(ZONE)).timestamp()
OTHER_MODEL = "llama3.2:1b"
DAY1 = "2026-09-28T00:00:00+07:00"
DAY2 = "2026-09-29T00:00:00+07:00"

ADMIN = KeySpec("ops", "sk-ops-1", admin=True)
ALICE = KeySpec("alice", "sk-alice-2")
BOB = KeySpec("bob", "sk-bob-3")


@pytest.fixture
async def router(start_router: StartRouter) -> Router:
    clock = FakeClock(start_wall=START_WALL)
    engine = FakeOllama(
        [FakeModel(MODEL), FakeModel(OTHER_MODEL, 1_321_098_329, 2_019_000_000)], sleep=no_sleep
    )
    router = await start_router(
        [BackendSpecYaml(engine, "ollama")], keys=[ADMIN, ALICE, BOB], clock=clock, timezone=ZONE
    )
    for _ in range(2):
        assert (await router.chat(ALICE.secret, MODEL))[0] == 200
    clock.advance(2 * 3600)
    assert (await router.chat(ALICE.secret, MODEL))[0] == 200
    assert (await router.chat(BOB.secret, OTHER_MODEL, stream=True))[0] == 200
    return router


async def usage(
    router: Router, query: str = "", secret: str | None = ADMIN.secret
) -> tuple[int, dict[str, str], bytes]:
    return await router.get(f"/usage{query}", secret)


async def test_default_is_30_days_by_key_in_json(router: Router) -> None:
    status, headers, body = await usage(router)
    assert status == 200
    assert headers["Content-Type"].startswith("application/json")
    report = json.loads(body)
    assert report["from"] == "2026-08-31" and report["to"] == "2026-09-29"
    assert report["by"] == "key" and report["timezone"] == ZONE
    rows = [(r["day"], r["key"], r["requests"]) for r in report["rows"]]
    assert rows == [(DAY1, "alice", 2), (DAY2, "alice", 1), (DAY2, "bob", 1)]
    assert all("model" not in r for r in report["rows"])
    engine = router.fakes[0]
    assert sum(r["prompt_tokens"] for r in report["rows"]) == engine.counters.prompt_tokens
    assert sum(r["completion_tokens"] for r in report["rows"]) == (
        engine.counters.completion_tokens
    )
    assert all(r.get("unmetered", 0) == 0 for r in report["rows"])


async def test_by_model_and_date_range(router: Router) -> None:
    status, _, body = await usage(router, "?by=model&from=2026-09-29&to=2026-09-29")
    assert status == 200
    report = json.loads(body)
    assert report["from"] == report["to"] == "2026-09-29"
    assert [(r["day"], r["model"], r["requests"]) for r in report["rows"]] == [
        (DAY2, OTHER_MODEL, 1),
        (DAY2, MODEL, 1),
    ]
    status, _, body = await usage(router, "?from=2026-09-01&to=2026-09-28")
    assert [(r["day"], r["key"]) for r in json.loads(body)["rows"]] == [(DAY1, "alice")]


async def test_csv_has_the_same_rows(router: Router) -> None:
    _, _, body = await usage(router)
    as_json = json.loads(body)["rows"]
    status, headers, body = await usage(router, "?format=csv")
    assert status == 200
    assert headers["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(body.decode())))
    assert list(rows[0]) == [
        "day",
        "key",
        "requests",
        "prompt_tokens",
        "cached_tokens",
        "completion_tokens",
        "unmetered",
    ]
    assert len(rows) == len(as_json)
    for row, expected in zip(rows, as_json, strict=True):
        assert row["day"] == expected["day"]
        assert row["key"] == expected["key"]
        for name in ("requests", "prompt_tokens", "completion_tokens"):
            assert int(row[name]) == expected[name]
    status, _, body = await usage(router, "?format=csv&by=model")
    assert body.decode().splitlines()[0].startswith("day,model,")


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("?from=2026-13-01", "`from`"),
        ("?to=yesterday", "`to`"),
        ("?from=2026-09-29&to=2026-09-28", "`from`"),
        ("?by=user", "`by`"),
        ("?format=xml", "`format`"),
        ("?since=2026-09-01", "`since`"),
    ],
)
async def test_bad_query_is_400_naming_the_parameter(
    router: Router, query: str, names: str
) -> None:
    status, _, body = await usage(router, query)
    assert status == 400
    error = json.loads(body)["error"]
    assert error["type"] == "invalid_request_error"
    assert names in error["message"]


async def test_usage_needs_an_admin_key(router: Router) -> None:
    status, _, body = await usage(router, secret=None)
    assert status == 401
    assert json.loads(body)["error"]["code"] == "invalid_api_key"
    status, _, body = await usage(router, secret=ALICE.secret)
    assert status == 403
    assert json.loads(body)["error"]["code"] == "insufficient_permissions"


async def test_usage_is_open_without_keys(start_router: StartRouter) -> None:
    router = await start_router([BackendSpecYaml(FakeOllama(sleep=no_sleep), "ollama")])
    assert (await router.chat(None, MODEL))[0] == 200
    status, _, body = await usage(router, secret=None)
    assert status == 200
    assert [r["key"] for r in json.loads(body)["rows"]] == ["anonymous"]


@pytest.mark.parametrize("query", ["?to=0001-01-05", "?from=0001-01-01&to=9999-12-31"])
async def test_dates_at_the_ends_of_the_calendar_are_not_a_server_error(
    router: Router, query: str
) -> None:
    status, _, body = await usage(router, query)
    assert status == 200
    rows = json.loads(body)["rows"]
    assert all(row["day"].startswith("20") for row in rows)
