"""Calendar and unit constants of the economics module, in one place so every file counts time the same way.

A year is 365 days (8,760 h), the convention of electricity bills and of the seed article's "$770 a year"
(RTX 4090 at ~550 W, 24/7, $0.16/kWh: 0.55 kW x 8,760 h x 0.16 = $771); a month is a twelfth of that
(730 h, the article's "$64 a month": 0.55 kW x 730 h x 0.16 = $64.2).
"""

from __future__ import annotations

__all__ = [
    "HOURS_PER_DAY",
    "DAYS_PER_YEAR",
    "HOURS_PER_YEAR",
    "MONTHS_PER_YEAR",
    "DAYS_PER_MONTH",
    "HOURS_PER_MONTH",
    "SECONDS_PER_HOUR",
    "W_PER_KW",
    "TOKENS_PER_MILLION",
]

HOURS_PER_DAY = 24.0
DAYS_PER_YEAR = 365.0
HOURS_PER_YEAR = HOURS_PER_DAY * DAYS_PER_YEAR  # 8,760 h
MONTHS_PER_YEAR = 12.0
DAYS_PER_MONTH = DAYS_PER_YEAR / MONTHS_PER_YEAR  # 30.4167 days
HOURS_PER_MONTH = HOURS_PER_YEAR / MONTHS_PER_YEAR  # 730 h
SECONDS_PER_HOUR = 3600.0
W_PER_KW = 1000.0
TOKENS_PER_MILLION = 1e6
