"""Labels in SQL: the conditions a label selector puts on a listing (a JSON column of
labels holding every key=value), the same on SQLite (json_extract) and PostgreSQL (->>)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa


def label_terms(column: sa.Column[Any], selector: dict[str, str]) -> list[sa.ColumnElement[bool]]:
    """Conditions on the JSON ``column`` (labels) holding every key=value of ``selector``
    (keys as :func:`scheduler_svc.selectors.parse` checked them)."""
    return [column[key].as_string() == value for key, value in sorted(selector.items())]
