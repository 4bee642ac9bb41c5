"""Server reflection answers under v1 and v1alpha alike, as clients of either call it."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import descriptor_pb2
from grpc_reflection.v1alpha import reflection_pb2 as pb

from tests.harness import Server
from tests.test_grpcurl import grpcurl


def ask(
    server: Server, version: str, request: pb.ServerReflectionRequest
) -> pb.ServerReflectionResponse:
    """One request on ``grpc.reflection.<version>``; v1 messages are v1alpha's on the wire."""
    with grpc.insecure_channel(server.address) as channel:
        call = channel.stream_stream(
            f"/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo",
            request_serializer=pb.ServerReflectionRequest.SerializeToString,
            response_deserializer=pb.ServerReflectionResponse.FromString,
        )
        [response] = list(call(iter([request]), timeout=10))
        return response


@pytest.mark.parametrize("version", ["v1", "v1alpha"])
def test_reflection_lists_and_describes_under_both_versions(
    api_server: Server, version: str
) -> None:
    listed = ask(api_server, version, pb.ServerReflectionRequest(list_services=""))
    names = {s.name for s in listed.list_services_response.service}
    assert {
        "tickwork.v1.TaskService",
        "tickwork.v1.JobService",
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
    } <= names
    for symbol, package in [
        ("tickwork.v1.TaskService", "tickwork.v1"),
        ("grpc.reflection.v1.ServerReflection", "grpc.reflection.v1"),
    ]:
        found = ask(api_server, version, pb.ServerReflectionRequest(file_containing_symbol=symbol))
        files = [
            descriptor_pb2.FileDescriptorProto.FromString(raw)
            for raw in found.file_descriptor_response.file_descriptor_proto
        ]
        assert package in {f.package for f in files}, (symbol, found)


def test_grpcurl_describes_the_v1_reflection_service(api_server: Server) -> None:
    out = grpcurl(api_server.address, "describe", "grpc.reflection.v1.ServerReflection")
    assert out.returncode == 0, out.stderr
    assert "rpc ServerReflectionInfo ( stream .grpc.reflection.v1.ServerReflectionRequest )" in (
        out.stdout
    )
