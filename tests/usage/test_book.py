import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from pharos.clock import FakeClock
from pharos.usage import DAY, MINUTE, OUT_OF_QUOTA, RATE_LIMITED, Cell, UsageBook
from pharos.usage.book import rpm_wait_s
from pharos.usage.days import day_of_date

BANGKOK = ZoneInfo("Asia/Bangkok")
NEW_YORK = ZoneInfo("America/New_York")
UTC = ZoneInfo("UTC")
MINUTE_START = 1_790_000_040.0  # an exact unix minute
ORIGIN = 7


def book_at(
    wall: float, zone: ZoneInfo = UTC, *, retention_days: int = 400
) -> tuple[UsageBook, FakeClock]:
    clock = FakeClock(start_wall=wall)
    return UsageBook(clock, zone, origin=ORIGIN, retention_days=retention_days), clock


def local(
    zone: ZoneInfo, year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> float:
    return dt.datetime(year, month, day, hour, minute, second, tzinfo=zone).timestamp()


def admitted_count(book: UsageBook, key: str, rpm: int | None, tries: int) -> int:
    return sum(book.admit(key, rpm).ok for _ in range(tries))


# requests per minute


def test_rpm_admits_up_to_the_limit_then_refuses_until_the_window_has_room() -> None:
    book, _ = book_at(MINUTE_START + 15)
    assert admitted_count(book, "alice", 3, 3) == 3
    refused = book.admit("alice", 3)
    assert not refused.ok
    assert refused.code == RATE_LIMITED
    # 45 s to the next minute, where the 3 of this one still count in full, then
    # 20 s more until 3 × (1 − 1/3) + 1 ≤ 3.
    assert refused.retry_after_s == 65


def test_rpm_window_slides_over_the_previous_minute() -> None:
    book, clock = book_at(MINUTE_START)
    assert admitted_count(book, "alice", 10, 10) == 10
    clock.advance(90)  # half-way into the next minute: 10 × 0.5 still count
    assert admitted_count(book, "alice", 10, 20) == 5
    refused = book.admit("alice", 10)
    assert refused.retry_after_s == 6  # 10 × (1 − 0.6) + 5 + 1 ≤ 10
    clock.advance(30)  # a new minute: the 5 admitted last minute count in full
    assert admitted_count(book, "alice", 10, 20) == 5


def test_refused_requests_are_not_counted() -> None:
    book, clock = book_at(MINUTE_START)
    assert admitted_count(book, "alice", 2, 50) == 2
    (delta,) = [cell for cell in book.export_delta() if cell.kind == MINUTE]
    assert delta.requests == 2
    clock.advance(60)  # the whole previous minute still counts: 2 of 2
    assert not book.admit("alice", 2).ok
    clock.advance(30)  # 2 × 0.5 = 1
    assert admitted_count(book, "alice", 2, 5) == 1


def test_keys_have_separate_windows() -> None:
    book, _ = book_at(MINUTE_START)
    assert admitted_count(book, "alice", 1, 3) == 1
    assert admitted_count(book, "bob", 1, 3) == 1


def test_no_rpm_means_no_limit_and_zero_means_none_allowed() -> None:
    book, _ = book_at(MINUTE_START)
    assert admitted_count(book, "alice", None, 500) == 500
    assert not book.admit("bob", 0).ok


def test_other_origins_requests_count_in_the_window() -> None:
    book, _ = book_at(MINUTE_START)
    minute = int(MINUTE_START // 60)
    book.merge([Cell(origin=99, kind=MINUTE, bucket=minute, key="alice", requests=4)])
    assert admitted_count(book, "alice", 5, 5) == 1


def test_minute_cells_are_never_in_the_snapshot() -> None:
    book, _ = book_at(MINUTE_START)
    book.admit("alice", 10)
    assert book.export_snapshot() == []


# daily token quota


def test_quota_counts_prompt_plus_completion_and_resets_at_local_midnight() -> None:
    book, clock = book_at(local(BANGKOK, 2026, 9, 27, 23, 58, 30), BANGKOK)
    book.record_reply("alice", "m", 60, 50, 30)
    assert book.check_quota("alice", 100).ok  # 90 used: cached is part of the prompt
    book.record_reply("alice", "m", 5, None, 5)
    refused = book.check_quota("alice", 100)
    assert refused.code == OUT_OF_QUOTA
    assert refused.retry_after_s == 90  # 23:58:30 -> 00:00 in Bangkok, not UTC
    assert book.tokens_today("alice") == 100
    clock.advance(89)
    assert not book.check_quota("alice", 100).ok
    clock.advance(1)
    assert book.check_quota("alice", 100).ok
    assert book.tokens_today("alice") == 0


def test_quota_retry_after_spans_a_short_dst_day() -> None:
    book, _ = book_at(local(NEW_YORK, 2026, 3, 8, 0, 30), NEW_YORK)
    book.record_reply("alice", "m", 10, 0, 0)
    refused = book.check_quota("alice", 10)
    assert refused.retry_after_s == 23 * 3600 - 1800


def test_quota_day_stays_whole_across_fall_back() -> None:
    book, clock = book_at(local(NEW_YORK, 2026, 11, 1, 0, 30), NEW_YORK)
    book.record_reply("alice", "m", 10, 0, 0)
    clock.advance(24 * 3600)  # 23:30 local on the same 25-hour day
    assert book.tokens_today("alice") == 10
    assert book.check_quota("alice", 10).retry_after_s == 1800
    clock.advance(1800)
    assert book.tokens_today("alice") == 0


def test_admit_checks_quota_first_and_a_refusal_is_not_counted() -> None:
    book, _ = book_at(MINUTE_START)
    book.record_reply("alice", "m", 100, 0, 0)
    refused = book.admit("alice", 10, tokens_per_day=100)
    assert refused.code == OUT_OF_QUOTA
    assert [cell for cell in book.export_delta() if cell.kind == MINUTE] == []
    assert book.admit("alice", 10, tokens_per_day=None).ok


def test_quota_sums_every_origin_and_model() -> None:
    book, _ = book_at(MINUTE_START)
    today = book.today()
    book.record_reply("alice", "a", 30, 0, 10)
    book.merge(
        [
            Cell(origin=1, kind=DAY, bucket=today, key="alice", model="b", prompt_tokens=40),
            Cell(origin=2, kind=DAY, bucket=today - 1, key="alice", model="a", prompt_tokens=99),
            Cell(origin=2, kind=DAY, bucket=today, key="bob", model="a", prompt_tokens=99),
        ]
    )
    assert book.tokens_today("alice") == 80
    assert book.check_quota("alice", 81).ok
    assert not book.check_quota("alice", 80).ok


# unmetered replies


@pytest.mark.parametrize(
    ("prompt", "cached", "completion", "tokens"),
    [(None, None, None, 0), (None, None, 7, 7), (12, 3, None, 12)],
)
def test_a_reply_without_counts_is_unmetered_never_zero_tokens(
    prompt: int | None, cached: int | None, completion: int | None, tokens: int
) -> None:
    book, _ = book_at(MINUTE_START)
    book.record_reply("alice", "m", prompt, cached, completion)
    (row,) = book.today_by_key()
    assert (row.requests, row.unmetered) == (1, 1)
    assert row.prompt_tokens + row.completion_tokens == tokens
    assert book.tokens_today("alice") == tokens


def test_unknown_cached_count_alone_is_metered() -> None:
    book, _ = book_at(MINUTE_START)
    book.record_reply("alice", "m", 10, None, 5)
    (row,) = book.today_by_key()
    assert (row.unmetered, row.cached_tokens, book.tokens_today("alice")) == (0, 0, 15)


# peers, snapshots, retention


def test_export_delta_holds_only_this_origins_recent_cells() -> None:
    book, clock = book_at(MINUTE_START)
    book.record_reply("alice", "m", 1, 0, 1)  # day d
    clock.advance(86400)
    book.record_reply("alice", "m", 2, 0, 2)  # day d + 1
    clock.advance(86400)
    book.record_reply("alice", "m", 3, 0, 3)  # day d + 2 (today)
    book.admit("alice", 10)
    clock.advance(60)
    book.admit("alice", 10)
    today = book.today()
    book.merge([Cell(origin=5, kind=DAY, bucket=today, key="x", model="m", requests=1)])
    delta = book.export_delta()
    assert {cell.origin for cell in delta} == {ORIGIN}
    assert sorted((cell.kind, cell.bucket) for cell in delta if cell.kind == DAY) == [
        (DAY, today - 1),
        (DAY, today),
    ]
    minute = int(clock.time() // 60)
    assert sorted(cell.bucket for cell in delta if cell.kind == MINUTE) == [minute - 1, minute]


def test_snapshot_keeps_day_cells_of_departed_origins_within_retention() -> None:
    book, clock = book_at(MINUTE_START, retention_days=3)
    today = book.today()
    book.merge([Cell(origin=5, kind=DAY, bucket=today, key="x", model="m", prompt_tokens=9)])
    book.record_reply("alice", "m", 1, 0, 1)
    clock.advance(2 * 86400)
    assert {cell.origin for cell in book.export_snapshot()} == {5, ORIGIN}
    clock.advance(86400)
    assert book.export_snapshot() == []


def test_merge_skips_cells_outside_retention_or_the_minute_window() -> None:
    book, _ = book_at(MINUTE_START, retention_days=2)
    today = book.today()
    minute = int(MINUTE_START // 60)
    taken = book.merge(
        [
            Cell(origin=5, kind=DAY, bucket=today - 2, key="x", model="m", requests=1),
            Cell(origin=5, kind=DAY, bucket=today - 1, key="x", model="m", requests=1),
            Cell(origin=5, kind=MINUTE, bucket=minute - 2, key="x", requests=1),
            Cell(origin=5, kind=MINUTE, bucket=minute - 1, key="x", requests=1),
        ]
    )
    assert taken == 2
    assert [cell.bucket for cell in book.export_snapshot()] == [today - 1]


def test_merge_skips_cells_no_pharos_could_have_counted() -> None:
    book, _ = book_at(MINUTE_START)
    today = book.today()
    bad = [
        Cell(origin=5, kind=9, bucket=today, key="x"),
        Cell(origin=5, kind=DAY, bucket=today, key="x", prompt_tokens=-5),
        Cell(origin=-1, kind=DAY, bucket=today, key="x"),
    ]
    assert book.merge(bad) == 0
    assert book.export_snapshot() == []
    assert book.tokens_today("x") == 0


def test_merge_takes_the_field_wise_max() -> None:
    book, _ = book_at(MINUTE_START)
    today = book.today()

    def cell(prompt: int, completion: int) -> Cell:
        return Cell(
            origin=5,
            kind=DAY,
            bucket=today,
            key="x",
            model="m",
            prompt_tokens=prompt,
            completion_tokens=completion,
        )

    book.merge([cell(10, 1)])
    book.merge([cell(4, 8)])
    (merged,) = book.export_snapshot()
    assert (merged.prompt_tokens, merged.completion_tokens) == (10, 8)
    assert book.tokens_today("x") == 18


# queries


def test_daily_rows_by_key_and_model_with_zone_offsets() -> None:
    book, clock = book_at(local(BANGKOK, 2026, 9, 27, 12, 0), BANGKOK)
    book.record_reply("alice", "small", 10, 2, 5)
    clock.advance(86400)
    book.record_reply("alice", "small", 1, 0, 1)
    book.record_reply("alice", "big", 20, 0, 10)
    book.record_reply("bob", "big", None, None, None)
    by_key = book.daily(dt.date(2026, 9, 27), dt.date(2026, 9, 28), by="key")
    assert [(row.day, row.key, row.requests, row.prompt_tokens) for row in by_key] == [
        ("2026-09-27T00:00:00+07:00", "alice", 1, 10),
        ("2026-09-28T00:00:00+07:00", "alice", 2, 21),
        ("2026-09-28T00:00:00+07:00", "bob", 1, 0),
    ]
    assert all(row.model is None for row in by_key)
    by_model = book.daily(dt.date(2026, 9, 28), dt.date(2026, 9, 28), by="model")
    assert [(row.model, row.requests, row.unmetered) for row in by_model] == [
        ("big", 2, 1),
        ("small", 1, 0),
    ]


def test_daily_range_outside_history_is_empty() -> None:
    book, _ = book_at(MINUTE_START)
    book.record_reply("alice", "m", 1, 0, 1)
    assert book.daily(dt.date(1970, 1, 1), dt.date(1999, 1, 1)) == []
    assert book.daily(dt.date(2100, 1, 2), dt.date(2100, 1, 1)) == []
    assert len(book.daily(dt.date(1970, 1, 1), dt.date(2100, 1, 1))) == 1


def test_daily_rejects_an_unknown_grouping() -> None:
    book, _ = book_at(MINUTE_START)
    book.record_reply("alice", "m", 1, 0, 1)
    with pytest.raises(ValueError, match="by must be"):
        book.daily(dt.date(2026, 1, 1), dt.date(2100, 1, 1), by="color")  # type: ignore[arg-type]


def test_today_is_the_zone_day() -> None:
    book, _ = book_at(local(BANGKOK, 2026, 9, 28, 0, 30), BANGKOK)
    assert book.today() == day_of_date(dt.date(2026, 9, 28))


def test_origin_is_random_when_not_given() -> None:
    clock = FakeClock()
    origins = {UsageBook(clock, UTC).origin for _ in range(4)}
    assert len(origins) == 4
    assert all(0 <= origin < 2**64 for origin in origins)


async def test_merge_in_slices_takes_every_cell() -> None:
    book, _ = book_at(MINUTE_START)
    today = book.today()
    cells = [
        Cell(origin=5, kind=DAY, bucket=today, key=f"k{n}", model="m", prompt_tokens=n)
        for n in range(25)
    ]
    assert await book.merge_in_slices(cells, slice_size=4) == 25
    assert book.tokens_today("k24") == 24
    assert len(book.today_by_key()) == 25


@pytest.mark.parametrize(
    ("previous", "current", "elapsed_fraction", "rpm"),
    [(0, 2, 0.5, 2), (2, 0, 0.0, 2), (4, 1, 0.25, 3), (3, 3, 0.9, 3), (10, 0, 0.5, 5)],
)
def test_rpm_wait_is_exactly_when_the_window_admits_one_more(
    previous: int, current: int, elapsed_fraction: float, rpm: int
) -> None:
    wait_s = rpm_wait_s(previous, current, elapsed_fraction, rpm)

    def window_after(seconds: float) -> float:
        fraction = elapsed_fraction + seconds / 60
        if fraction < 1:
            return previous * (1 - fraction) + current
        return current * (1 - (fraction - 1))  # the current minute has become the previous one

    assert window_after(wait_s) + 1 <= rpm + 1e-9
    if wait_s > 0.01:
        assert window_after(wait_s - 0.01) + 1 > rpm
