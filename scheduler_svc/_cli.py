"""The scheduler service's commands of the ``tickwork`` command line: ``serve`` and
``db upgrade`` / ``db current``, added through the entry point group ``tickwork.commands``
(see :mod:`tickwork.cli._plugins`).

Importing this module stays cheap (every ``tickwork`` run does): the server, the database
and the migrations are imported by the commands that use them.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, TextIO

from scheduler_svc.settings import DEFAULT_DATABASE_URL, database_url_from_env
from tickwork.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from tickwork.logs import LOG_FORMATS

__all__ = ["add_db", "add_serve"]


def add_serve(sub: argparse._SubParsersAction[Any], net: argparse.ArgumentParser) -> None:
    """Add ``tickwork serve``."""
    p = sub.add_parser(
        "serve",
        help="run the scheduler service (API, queue, scheduler loop, embedded worker)",
        description="Run the scheduler service until SIGINT or SIGTERM.",
    )
    p.add_argument("--listen", metavar="HOST:PORT", help="address to listen on")
    p.add_argument("--config", metavar="FILE", help="TOML config to apply once started")
    p.add_argument(
        "--insecure",
        action="store_true",
        help="serve a non-loopback address even without access control or TLS "
        "(TICKWORK_INSECURE=true); anyone who reaches it can run commands",
    )
    p.add_argument(
        "--log-format", choices=LOG_FORMATS, help="log lines (default $TICKWORK_LOG_FORMAT)"
    )
    p.set_defaults(func=_serve)


def add_db(sub: argparse._SubParsersAction[Any], net: argparse.ArgumentParser) -> None:
    """Add ``tickwork db upgrade`` and ``tickwork db current``."""
    db = sub.add_parser(
        "db",
        help="show or upgrade the database schema ($DATABASE_URL)",
        description="Operate the schema of the database at $DATABASE_URL (default "
        f"{DEFAULT_DATABASE_URL}), for operators who migrate explicitly; "
        "`tickwork serve` also upgrades on start.",
    )
    dsub = db.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    p = dsub.add_parser(
        "upgrade",
        help="migrate the database to the newest schema this tickwork knows",
        description="Migrate the database to the newest schema revision this tickwork knows. "
        "Exit status 1 when the database is at a revision this tickwork does not know (a "
        "newer tickwork migrated it) or cannot be reached.",
    )
    p.set_defaults(func=_db_upgrade)
    p = dsub.add_parser(
        "current",
        help="show the database's schema revision",
        description="Print the database's schema revision and whether it is the newest this "
        "tickwork knows. Exit status 1 when the revision is unknown to this tickwork (a newer "
        "tickwork migrated it) or the database cannot be reached.",
    )
    p.set_defaults(func=_db_current)


def _serve(args: argparse.Namespace, out: TextIO) -> int:
    from scheduler_svc.server import main as serve_main

    return serve_main(args.listen, args.config, insecure=args.insecure, log_format=args.log_format)


def _on_database(url: str, action: str) -> tuple[str | None, str | None]:
    """Run ``action`` ("current" or "upgrade") on the database at ``url``.

    Returns the revision before and after (None: empty database). Raises the service's
    ServiceError (unknown revision, StorageError), SQLAlchemyError or OSError (unreachable).
    """
    import asyncio

    from scheduler_svc import migrate
    from scheduler_svc.db import Database

    async def go() -> tuple[str | None, str | None]:
        db = Database(url)
        try:
            before = await migrate.current_revision(db)
            after = await migrate.upgrade(db) if action == "upgrade" else before
            return before, after
        finally:
            await db.dispose()

    return asyncio.run(go())


def _db(action: str, out: TextIO) -> int:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, SQLAlchemyError

    from scheduler_svc import errors, migrate
    from scheduler_svc.server import DatabaseUnreachable
    from scheduler_svc.settings import check_database_url

    database_url = database_url_from_env()
    try:
        check_database_url(database_url)  # the one-line refusals of tickwork serve
        url = make_url(database_url)
    except (ArgumentError, errors.SettingsError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    shown = url.render_as_string(hide_password=True)
    if action == "current" and url.get_backend_name() == "sqlite":
        path = url.database or ""
        if path and path != ":memory:" and not os.path.exists(path):
            print(f"none (no database file at {path}; run tickwork db upgrade)", file=out)
            return EXIT_OK
    try:
        before, after = _on_database(database_url, action)
    except errors.StorageError as err:
        print(f"error: {DatabaseUnreachable(database_url, err)}", file=sys.stderr)
        return EXIT_FAILED
    except errors.ServiceError as err:
        print(f"error: {err.message}", file=sys.stderr)
        return EXIT_FAILED
    except (SQLAlchemyError, OSError) as err:
        # one line, as serve says it (SQLAlchemy's text adds a "Background on this error" line)
        print(f"error: {DatabaseUnreachable(database_url, err)}", file=sys.stderr)
        return EXIT_FAILED
    head = migrate.head_revision()
    if action == "upgrade":
        if before == after:
            print(f"database at {shown} already at revision {after} (head)", file=out)
        else:
            print(
                f"database at {shown} upgraded from {before or 'none'} to {after} (head)", file=out
            )
        return EXIT_OK
    if after is None:
        print("none (empty database; run tickwork db upgrade)", file=out)
    elif after == head:
        print(f"{after} (head)", file=out)
    elif after in migrate.known_revisions():
        print(f"{after} (behind head {head}; run tickwork db upgrade)", file=out)
    else:
        print(
            f"error: database schema is at revision {after}, which this tickwork does not "
            f"know (newest known: {head}); upgrade tickwork",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return EXIT_OK


def _db_upgrade(args: argparse.Namespace, out: TextIO) -> int:
    return _db("upgrade", out)


def _db_current(args: argparse.Namespace, out: TextIO) -> int:
    return _db("current", out)
