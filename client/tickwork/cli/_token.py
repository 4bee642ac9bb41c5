"""``tickwork token new``: make a token and the server's entry for it."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from tickwork.cli._common import EXIT_OK
from tickwork.tokens import ROLES, new_token, token_entry


def add_parsers(sub: argparse._SubParsersAction[Any], net: argparse.ArgumentParser) -> None:
    """Add ``token`` and its action ``new`` (offline: ``net`` is not used)."""
    token = sub.add_parser("token", help="make access tokens")
    toksub = token.add_subparsers(dest="token_command", metavar="ACTION", required=True)
    p = toksub.add_parser(
        "new",
        help="make a random token and its TICKWORK_TOKENS entry",
        description="Print a new random token (give it to the client as TICKWORK_TOKEN) and "
        "the entry for the server's TICKWORK_TOKENS or TICKWORK_TOKENS_FILE, which holds "
        "only its SHA-256. The token is not stored anywhere.",
    )
    p.add_argument("role", choices=ROLES, metavar="ROLE")
    p.add_argument("--label", default="", help="a name shown in the server's logs")
    p.set_defaults(func=_new)


def _new(args: argparse.Namespace, out: TextIO) -> int:
    token = new_token()
    entry = token_entry(args.role, token, args.label)
    print(f"token (give it to the client as TICKWORK_TOKEN; shown once): {token}", file=out)
    print(f"entry (for the server's TICKWORK_TOKENS_FILE or TICKWORK_TOKENS): {entry}", file=out)
    return EXIT_OK
