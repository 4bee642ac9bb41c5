"""gRPC server reflection under both names clients ask for: ``grpc.reflection.v1`` and
``grpc.reflection.v1alpha``.

grpcio-reflection serves v1alpha only; clients built on v1 (newer grpcurl, grpc-js
reflection clients, Postman) got UNIMPLEMENTED. The v1 protocol is v1alpha's under another
package, message for message and field for field, so the same servicer answers both: the
v1 method is registered with v1alpha's (de)serializers, and v1's descriptor (v1alpha's
with the package renamed) is added to the pool so that reflection can describe itself.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection, reflection_pb2

__all__ = ["SERVICE_NAMES", "enable"]

V1 = "grpc.reflection.v1"
V1_SERVICE = f"{V1}.ServerReflection"
#: The reflection services this module serves.
SERVICE_NAMES = (V1_SERVICE, reflection.SERVICE_NAME)


def _add_v1_descriptor(pool: descriptor_pool.DescriptorPool) -> None:
    """Add ``grpc/reflection/v1/reflection.proto`` (v1alpha's file, renamed) to ``pool``."""
    try:
        pool.FindServiceByName(V1_SERVICE)
        return
    except KeyError:
        pass
    file = descriptor_pb2.FileDescriptorProto()
    reflection_pb2.DESCRIPTOR.CopyToProto(file)
    old = f".{file.package}."
    file.name = "grpc/reflection/v1/reflection.proto"
    file.package = V1
    for message in file.message_type:
        for field in message.field:
            if field.type_name.startswith(old):
                field.type_name = f".{V1}." + field.type_name[len(old) :]
    for service in file.service:
        for method in service.method:
            method.input_type = f".{V1}." + method.input_type[len(old) :]
            method.output_type = f".{V1}." + method.output_type[len(old) :]
    file.options.Clear()
    pool.Add(file)


def enable(service_names: Sequence[str], server: grpc.aio.Server) -> None:
    """Serve reflection v1 and v1alpha on ``server``, listing ``service_names`` and the two
    reflection services.

    Args:
        service_names (Sequence[str]): full names of the application's services.
        server (grpc.aio.Server): the server, before it starts.
    """
    _add_v1_descriptor(descriptor_pool.Default())
    names = (*service_names, *SERVICE_NAMES)
    servicer = reflection.aio.ReflectionServicer(names)  # type: ignore[attr-defined]
    reflection.enable_server_reflection(names, server)
    handler = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(V1_SERVICE, {"ServerReflectionInfo": handler}),)
    )
