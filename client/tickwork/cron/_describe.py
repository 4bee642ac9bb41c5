"""Describe a parsed cron expression in English (cron-descriptor's segments, with the day
wording fixed to Vixie's rule). Pure: no I/O, no clock."""

from __future__ import annotations

from functools import lru_cache

from cron_descriptor import DescriptionTypeEnum, ExpressionDescriptor, Options

from tickwork.cron._parse import DAY_NAMES, DIGITS, CronFields

__all__ = ["describe"]


def describe(fields: CronFields, expression: str) -> str:
    """A human-readable English description, e.g. ``"At 02:00 AM"``.

    "or" joins the day fields when both are restricted, "only on" when one starts with
    ``*``. Macros are described as their expansion; 6-field expressions as seconds-first.

    Args:
        fields: The parsed expression.
        expression: The expression as given (quoted when cron-descriptor cannot describe it).

    Returns:
        The description; never raises.
    """
    second, minute, hour, dom, month, dow = fields.texts
    days = fields.days
    star = days.both_must_match
    # A day field that allows every day says nothing: described as "*" (``0-7`` is not
    # "Sunday through Sunday"). Under the OR rule it makes every day match, so the
    # other day field says nothing either (``L * 0-6`` fires daily).
    every_weekday = days.dow == frozenset(range(7))
    every_monthday = days.dom == frozenset(range(1, 32))
    dom_says_nothing = dom in ("?", "*") or every_monthday or (every_weekday and not star)
    dow_says_nothing = dow in ("?", "*") or every_weekday or (every_monthday and not star)
    dom_text = "*" if dom_says_nothing else dom
    dow_text = "*" if dow_says_nothing else _descriptor_weekdays(dow)
    descriptor_fields = tuple(
        _for_descriptor(field)
        for field in (second, minute, hour, dom_text, month.upper(), dow_text)
    )
    return _describe(descriptor_fields, fields.has_seconds, star, expression.strip())


def _for_descriptor(field: str) -> str:
    """A field as cron-descriptor reads it best: numbers without leading zeros."""
    return DIGITS.sub(lambda m: str(int(m.group())), field)


def _descriptor_weekdays(dow: str) -> str:
    """A day_of_week list of single days as numbers 0-6, deduplicated (``SUN,7`` -> ``0``)."""
    items = dow.split(",")
    if len(items) < 2 or not all(DIGITS.fullmatch(i) or i in DAY_NAMES for i in items):
        return dow
    days = [str(DAY_NAMES[i] if i in DAY_NAMES else int(i) % 7) for i in items]
    return ",".join(dict.fromkeys(days))


@lru_cache(maxsize=1024)
def _describe(
    descriptor_fields: tuple[str, ...], has_seconds: bool, both_must_match: bool, expression: str
) -> str:
    """:func:`describe`, cached: cron-descriptor reloads its locale for every description,
    which costs more than the rest of creating a schedule."""
    second, minute, hour, dom, month, dow = descriptor_fields
    parts = [second if has_seconds else "0", minute, hour, dom, month, dow, "*"]
    try:
        descriptor = ExpressionDescriptor(" ".join(parts), Options())
        time = str(descriptor.get_description(DescriptionTypeEnum.TIMEOFDAY))
        dom_text = str(descriptor.get_description(DescriptionTypeEnum.DAYOFMONTH))
        month_text = str(descriptor.get_description(DescriptionTypeEnum.MONTH))
        dow_text = str(descriptor.get_description(DescriptionTypeEnum.DAYOFWEEK))
        if dow_text and both_must_match and dom != "*":
            dow_text = dow_text.replace(", or on ", ", only on ", 1)
        elif dow_text and not both_must_match:
            if dow_text.startswith(", only on "):
                dow_text = ", or on " + dow_text[len(", only on ") :]
            elif not dow_text.startswith(", or "):
                dow_text = ", or" + dow_text[1:]
        text = f"{time}{dom_text}{dow_text}{month_text}"
        text = str(descriptor.transform_verbosity(text, use_verbose_format=False))
    except Exception:  # a cron-descriptor gap must not break a schedule that validated
        return f"Cron expression {expression!r}"
    return text[:1].upper() + text[1:]
