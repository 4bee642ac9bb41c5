"""Every case of tests/data/cron_cases.jsonl (from public bug reports) through CronSchedule.

One JSON object a line: ``id``, ``source`` (the bug report), ``expr``, ``tz``, ``start``,
``expected_next`` (the next fire times after start), ``expect_error``,
``expected_description``, ``seconds_position`` ("first" for 6 fields), ``note``. Fire times are
compared as ISO 8601 strings (offset included), descriptions by their essentials (time of day,
weekday and month names, ordinals, numbers, "last ...", and whether the day fields are OR-ed),
since cron-descriptor's wording may differ from the case's.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from tickwork.cron import CronError, CronSchedule

CASES_PATH = Path(__file__).parent / "data" / "cron_cases.jsonl"
CASES: list[dict[str, Any]] = [
    json.loads(line) for line in CASES_PATH.read_text(encoding="utf-8").splitlines() if line.strip()
]
FIELDS = {
    "expression",
    "second",
    "minute",
    "hour",
    "day_of_month",
    "month",
    "day_of_week",
    "timezone",
}
#: The field each rejected case must name (cases added later without an entry are checked for
#: a valid field name only).
ERROR_FIELDS = {
    "hash-out-of-range": "day_of_week",
    "feb31-every-minute-slow": "day_of_month",
    "apr31-never": "day_of_month",
    "invalid-step-zero": "minute",
    "invalid-step-zero-single-range": "minute",
    "invalid-step-double-zero": "minute",
    "invalid-negative": "minute",
    "invalid-minute-60": "minute",
    "invalid-month-13": "month",
    "invalid-dow-8": "day_of_week",
    "invalid-garbage-dom": "day_of_month",
    "invalid-underscore-range": "day_of_week",
    "invalid-star-slash-star": "minute",
}
_ESSENTIAL = re.compile(
    r"\d\d:\d\d [AP]M|\b(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day\b"
    r"|\b(?:January|February|March|April|May|June|July|August|September|October|November"
    r"|December)\b|\b(?:first|second|third|fourth|fifth)\b|\blast (?:weekday|day)\b"
    r"|\bevery \d+ \w+|\bevery (?:minute|hour)\b|\b\d+\b",
    re.IGNORECASE,
)


def essentials(text: str) -> list[str]:
    return sorted({m.lower() for m in _ESSENTIAL.findall(text)})


def test_cases_file() -> None:
    assert len(CASES) >= 50
    assert len({case["id"] for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_case(case: dict[str, Any]) -> None:
    began = time.perf_counter()
    if case["expect_error"]:
        with pytest.raises(CronError) as raised:
            CronSchedule(case["expr"], case["tz"])
        err = raised.value
        assert err.field in FIELDS
        assert str(err).startswith(f"{err.field}: ")
        if case["id"] in ERROR_FIELDS:
            assert err.field == ERROR_FIELDS[case["id"]], str(err)
        assert time.perf_counter() - began < 0.5  # rejected without a long search
        return

    schedule = CronSchedule(case["expr"], case["tz"])
    if case.get("seconds_position") == "first":
        assert schedule.has_seconds
    start = dt.datetime.fromisoformat(case["start"])
    expected = case["expected_next"]
    if expected is None:
        assert schedule.next_fire_time(start) is None
    else:
        previews = schedule.next_fire_times(start, len(expected))
        assert [p.fire_time.isoformat() for p in previews] == expected
        assert str(schedule.next_fire_time(start)) == str(previews[0].fire_time)
    assert time.perf_counter() - began < 0.5  # "must answer in milliseconds" (perf-* cases)

    description = schedule.describe()
    assert description and not description.startswith("Cron expression")
    wanted = case["expected_description"]
    if wanted is not None:
        assert essentials(description) == essentials(wanted), (description, wanted)
        assert (" or " in description) == (" or " in wanted), (description, wanted)
