"""Generated protobuf and gRPC stubs of tickwork.v1 (do not edit)."""
