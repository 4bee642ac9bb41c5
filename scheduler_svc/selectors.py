"""Label selectors: ``key=value`` terms separated by commas, all of which must hold.

A selector picks tasks, schedules or jobs by their labels (ListTasks, ListSchedules,
ListJobs, ApplyConfig's prune). Keys follow the label rules (:func:`validation.labels`);
whitespace around a term, a key or a value is ignored; an empty selector matches all.
"""

from __future__ import annotations

from scheduler_svc import validation
from scheduler_svc.errors import InvalidArgument


def parse(text: str, field: str = "label_selector") -> dict[str, str]:
    """The terms of selector ``text`` as {key: value}; empty for an empty selector.

    Raises:
        InvalidArgument: naming ``field`` for a term without ``=``, a key or value the label
            rules refuse, or a key given twice with different values.
    """
    terms: dict[str, str] = {}
    if not text.strip():
        return terms
    for term in text.split(","):
        key, eq, value = term.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not key:
            raise InvalidArgument(
                f"{term.strip()!r} is not key=value; give comma-separated key=value terms, "
                'e.g. "owner=team-a,env=prod"',
                field=field,
            )
        if terms.get(key, value) != value:
            raise InvalidArgument(f"gives {key!r} two values", field=field)
        terms[key] = value
    try:
        validation.labels(terms)
    except InvalidArgument as err:
        raise InvalidArgument(f"{err.text} ({err.field})", field=field) from None
    return terms


def matches(selector: dict[str, str], labels: dict[str, str] | None) -> bool:
    """True when ``labels`` hold every term of ``selector``."""
    have = labels or {}
    return all(have.get(k) == v for k, v in selector.items())
