"""The files of a SQLite database: its folder must exist, and a marker beside it tells a
tickwork database that lost its tables from a new one.

A database file whose write-ahead log was deleted (or that was replaced by an empty file)
opens as an empty database, which migrations would silently turn into a new tickwork
database with no tasks, no schedules and no history. Tickwork therefore writes a marker
file ``<database>-tickwork`` beside the database once it holds tickwork's schema, and
refuses to start on a database without tickwork's version table while its marker exists.
"""

from __future__ import annotations

from pathlib import Path

from scheduler_svc.errors import FailedPrecondition, SettingsError

#: The marker's suffix, appended to the database file's name.
MARKER_SUFFIX = "-tickwork"
_MARKER_TEXT = (
    "This file marks {name} as a tickwork database. tickwork refuses to start on {name} "
    "when its tables are gone while this file exists. Delete this file only to start over "
    "with an empty database.\n"
)


def marker_path(database: str) -> Path:
    """The marker file of the SQLite database file ``database``."""
    path = Path(database).expanduser()
    return path.with_name(path.name + MARKER_SUFFIX)


def check_folder(database: str) -> None:
    """The database's folder must exist (a mistyped folder must not create a new, empty
    database somewhere else).

    Raises:
        SettingsError: naming DATABASE_URL and the missing folder.
    """
    folder = Path(database).expanduser().resolve().parent
    if not folder.is_dir():
        raise SettingsError(
            f"DATABASE_URL: the folder {folder} of the SQLite database does not exist; "
            "create it first (tickwork does not create folders, so that a mistyped path is "
            "not a new, empty database)"
        )


def check_marker(database: str, has_schema: bool) -> None:
    """Refuse a database without tickwork's tables whose marker says it had them.

    Raises:
        FailedPrecondition: the message names the file and the way out.
    """
    marker = marker_path(database)
    if not has_schema and marker.exists():
        raise FailedPrecondition(
            f"the SQLite database {database} has no tickwork tables, but {marker} says "
            "tickwork created them: the database file was replaced or its write-ahead log "
            f"({Path(database).name}-wal) was lost. Restore the database from a backup; "
            f"delete {marker} only to start over with an empty database"
        )


def write_marker(database: str) -> None:
    """Write the marker of a database that holds tickwork's schema (if it is missing)."""
    marker = marker_path(database)
    if not marker.exists():
        marker.write_text(_MARKER_TEXT.format(name=Path(database).name))
