"""The native gRPC front end (``halfmq.v1.Broker``): translation between protobuf and the core."""

from broker.grpc_api.server import create_server

__all__ = ["create_server"]
