"""What every command of the ``tickwork`` command line shares: exit codes, argument types,
the connection options, and the client they make."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Mapping
from typing import TextIO

from tickwork._channel import TlsConfig
from tickwork._sync import Client
from tickwork.errors import InvalidArgument
from tickwork.v1.common_pb2 import SkipReason
from tickwork.v1.job_pb2 import JobStatus

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_ABORTED = 3
EXIT_CANCELLED = 4
EXIT_STILL_RUNNING = 5

#: ``tasks run --wait`` and ``jobs watch``: the exit status for each outcome of the (last
#: attempt of the) job.
WAIT_EXIT_CODES = {
    JobStatus.JOB_STATUS_SUCCEEDED: EXIT_OK,
    JobStatus.JOB_STATUS_FAILED: EXIT_FAILED,
    JobStatus.JOB_STATUS_ABORTED: EXIT_ABORTED,
    JobStatus.JOB_STATUS_CANCELLED: EXIT_CANCELLED,
}

#: A command: the parsed arguments and the (terminal-safe) stdout in, the exit status out.
Command = Callable[[argparse.Namespace, TextIO], int]

SKIP_TEXT = {
    SkipReason.SKIP_REASON_ALREADY_QUEUED: "already queued",
    SkipReason.SKIP_REASON_ALREADY_RUNNING: "already running",
    SkipReason.SKIP_REASON_TASK_DISABLED: "task disabled",
    SkipReason.SKIP_REASON_BUFFER_FULL: "buffer full",
}


# -- argument types -----------------------------------------------------------------------


def positive_int(text: str) -> int:
    """An integer from 1 to 2**63 - 1 (argparse type)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if not 1 <= value < 2**63:
        raise argparse.ArgumentTypeError(f"expected a positive 64-bit integer, got {text!r}")
    return value


def seconds(text: str) -> float:
    """Seconds >= 0 (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected seconds >= 0, got {text!r}")
    return value


def positive_seconds(text: str) -> float:
    """Seconds > 0 and finite (argparse type)."""
    value = seconds(text)
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected seconds > 0, got {text!r}")
    return value


def count(text: str) -> int:
    """An integer from 1 to 1000 (argparse type)."""
    value = positive_int(text)
    if value > 1000:
        raise argparse.ArgumentTypeError(f"at most 1000, got {value}")
    return value


# -- connection ---------------------------------------------------------------------------


def connection_options(parser: argparse.ArgumentParser, default: object) -> None:
    """Add --token and the TLS options (each also read from its environment variable)."""
    parser.add_argument(
        "--token",
        default=default,
        metavar="TOKEN",
        help="bearer token for a server with access control (default $TICKWORK_TOKEN)",
    )
    parser.add_argument(
        "--tls",
        action="store_true",
        default=default if default is not None else False,
        help="connect with TLS, trusting the system's roots ($TICKWORK_TLS)",
    )
    for flag, env, what in (
        ("--tls-ca", "TICKWORK_TLS_CA_FILE", "CA certificate (PEM) that signed the server's"),
        ("--tls-cert", "TICKWORK_TLS_CLIENT_CERT_FILE", "client certificate (PEM), mutual TLS"),
        ("--tls-key", "TICKWORK_TLS_CLIENT_KEY_FILE", "client certificate's key (PEM)"),
    ):
        parser.add_argument(
            flag, default=default, metavar="FILE", help=f"{what}; implies --tls (${env})"
        )
    parser.add_argument(
        "--tls-server-name",
        default=default,
        metavar="NAME",
        help="name to verify in the server's certificate ($TICKWORK_TLS_SERVER_NAME)",
    )


def tls_from_args(args: argparse.Namespace) -> TlsConfig | None:
    """TLS from the environment, overridden by the options given; None for plaintext.

    Raises:
        InvalidArgument: TICKWORK_TLS is not a boolean, or a certificate has no key.
    """
    from_env = TlsConfig.from_env()
    given = {
        field: value
        for field, value in (
            ("ca_file", args.tls_ca),
            ("cert_file", args.tls_cert),
            ("key_file", args.tls_key),
            ("server_name", args.tls_server_name),
        )
        if value
    }
    if not given and not args.tls:
        return from_env
    return dataclasses.replace(from_env or TlsConfig(), **given)


def client_from_args(args: argparse.Namespace) -> Client:
    """A blocking client of the server at ``args.server`` with the connection options."""
    tls = tls_from_args(args)
    return Client(args.server, token=args.token, tls=tls if tls is not None else False)


def selector_option(parser: argparse.ArgumentParser, what: str) -> None:
    """Add ``--selector K=V[,K=V...]`` to a list command of ``what``."""
    parser.add_argument(
        "--selector",
        default="",
        metavar="K=V[,K=V...]",
        help=f"only {what} whose labels hold every key=value given",
    )


def labels_text(labels: Mapping[str, str]) -> str:
    """Labels as ``k=v,k2=v2`` (sorted), or ``-`` for none."""
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "-"


def label_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--label K=V`` (repeatable) and ``--clear`` to a command that sets labels."""
    parser.add_argument(
        "--label",
        type=label_pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a label (VALUE as text); repeatable; the labels given replace the stored ones",
    )
    parser.add_argument("--clear", action="store_true", help="remove every label")


def label_pair(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` as (key, value) (argparse type: ``--label``, ``--param``); the key must
    not be empty."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def labels_of(args: argparse.Namespace) -> dict[str, str]:
    """The labels ``--label`` gave (``--clear``: none). Raises InvalidArgument when neither
    or both were given."""
    if bool(args.label) == bool(args.clear):
        raise InvalidArgument("give --label KEY=VALUE (repeatable) or --clear")
    return dict(args.label)
