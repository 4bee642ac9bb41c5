"""Back up tickwork's own SQLite database with sqlite3's online backup API, keeping the N
newest copies.

Used by ``examples/tickwork.toml`` through the ``python`` handler as
``examples.backup:backup_database``. It can also be run by hand::

    python -m examples.backup --dest-dir backups --keep 7

The copy is consistent even while the scheduler service writes to the database (the backup
API copies pages under SQLite's own locking), is written to a ``.part`` file first and renamed
into place, so a half-written backup never counts as one.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./tickwork.db"
"""tickwork's default DATABASE_URL (a ``tickwork.db`` file in the service's directory)."""


def sqlite_path(database_url: str) -> Path:
    """The database file of a SQLAlchemy SQLite URL.

    ``sqlite+aiosqlite:///./tickwork.db`` -> ``./tickwork.db`` (relative to the current
    directory); ``sqlite:////var/lib/tickwork/tickwork.db`` -> ``/var/lib/tickwork/tickwork.db``.

    Raises:
        ValueError: not a SQLite file URL (e.g. PostgreSQL, whose backups belong to
            ``pg_dump``, or an in-memory database).
    """
    scheme, sep, rest = database_url.partition(":///")
    if not sep or scheme.split("+", 1)[0] != "sqlite":
        # Only the scheme: the rest may hold a password, and this message becomes the job's
        # error, which every viewer can read.
        shown = database_url.partition(":")[0] or "?"
        raise ValueError(
            f"DATABASE_URL ({shown}://...) is not a SQLite file URL; "
            "back PostgreSQL up with pg_dump instead"
        )
    path = rest.split("?", 1)[0]
    if not path or path == ":memory:":
        raise ValueError(f"DATABASE_URL {database_url!r} names no database file")
    return Path(path)


def backup_database(
    dest_dir: str = "backups",
    keep: int = 7,
    database_url: str | None = None,
    ctx: Any = None,
) -> str:
    """Copy the tickwork SQLite database into ``dest_dir`` and delete all but the ``keep``
    newest copies.

    Args:
        dest_dir (str): folder of the backups, created if missing; relative paths are taken
            from the worker's current directory.
        keep (int): how many backups to keep, at least 1.
        database_url (str | None): the SQLAlchemy URL of the database; default the
            ``DATABASE_URL`` environment variable, else tickwork's default
            ``sqlite+aiosqlite:///./tickwork.db``. A job never gets the service's
            DATABASE_URL (no setting reaches a job), so as a task give it here unless the
            database is the default.
        ctx: the job's context, passed by the ``python`` handler; its ``log`` sends lines to
            the job's output.

    Returns:
        str: one line saying what was written and removed (kept in the job's output tail).

    Raises:
        ValueError: ``keep`` < 1, or the URL is not a SQLite file.
        FileNotFoundError: the database file does not exist (the worker must run on the
            host, and from the directory, that the database URL is relative to).
        sqlite3.Error: the backup failed.
    """
    if keep < 1:
        raise ValueError(f"keep must be at least 1, got {keep}")
    url = database_url or os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL
    source = sqlite_path(url)
    if not source.is_file():
        raise FileNotFoundError(f"database file {source} does not exist (from {url!r})")

    def log(line: str) -> None:
        if ctx is not None:
            ctx.log("stdout", line)

    folder = Path(dest_dir)
    folder.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    target = folder / f"{source.stem}-{stamp}.db"
    partial = target.with_name(target.name + ".part")
    log(f"backing up {source} to {target}")
    try:
        with (
            closing(sqlite3.connect(source)) as src,
            closing(sqlite3.connect(partial)) as dst,
        ):
            src.backup(dst, pages=1024)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    removed = rotate(folder, source.stem, keep)
    for path in removed:
        log(f"removed old backup {path}")
    size = target.stat().st_size
    return f"backup {target} ({size} bytes) written; {len(removed)} old backup(s) removed"


def rotate(folder: Path, stem: str, keep: int) -> list[Path]:
    """Delete all but the ``keep`` newest ``<stem>-<UTC timestamp>.db`` files in ``folder``.

    Returns:
        list[Path]: the files removed, oldest first.
    """
    backups = sorted(folder.glob(f"{stem}-*.db"))  # the timestamp sorts by name
    removed = backups[:-keep]
    for path in removed:
        path.unlink(missing_ok=True)
    return removed


def _main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--dest-dir", default="backups")
    parser.add_argument("--keep", type=int, default=7)
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    print(backup_database(args.dest_dir, args.keep, args.database_url))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
