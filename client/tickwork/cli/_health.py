"""``tickwork health``: the service's gRPC health, for container health checks."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

import grpc

from tickwork.cli._common import EXIT_FAILED, EXIT_OK, client_from_args, positive_seconds
from tickwork.errors import from_rpc_error


def add_parsers(sub: argparse._SubParsersAction[Any], net: argparse.ArgumentParser) -> None:
    """Add ``health``; ``net`` is the parent parser of the connection options."""
    p = sub.add_parser(
        "health",
        parents=[net],
        help="check the service's gRPC health (for container health checks)",
        description="Ask the gRPC health service at --server; exit 0 when SERVING, 1 otherwise.",
    )
    p.add_argument("--timeout", type=positive_seconds, default=3.0, metavar="S", help="default 3")
    p.set_defaults(func=_health)


def _health(args: argparse.Namespace, out: TextIO) -> int:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with client_from_args(args) as client:
        stub = health_pb2_grpc.HealthStub(client._channel)
        try:
            answer = stub.Check(health_pb2.HealthCheckRequest(), timeout=args.timeout)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)
    print(status, file=out)
    return EXIT_OK if answer.status == health_pb2.HealthCheckResponse.SERVING else EXIT_FAILED
