"""Usage counters and quotas: per-origin cells merged by field-wise max (spec §11)."""

from pharos.usage.book import ADMITTED, OUT_OF_QUOTA, RATE_LIMITED, Admission, UsageBook
from pharos.usage.cells import DAY, MINUTE, Cell, CellId
from pharos.usage.days import day_at, day_start_rfc3339, day_start_unix, seconds_to_next_midnight
from pharos.usage.report import DailyRow, GroupBy, daily_rows

__all__ = [
    "ADMITTED",
    "DAY",
    "MINUTE",
    "OUT_OF_QUOTA",
    "RATE_LIMITED",
    "Admission",
    "Cell",
    "CellId",
    "DailyRow",
    "GroupBy",
    "UsageBook",
    "daily_rows",
    "day_at",
    "day_start_rfc3339",
    "day_start_unix",
    "seconds_to_next_midnight",
]
