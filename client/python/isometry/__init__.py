"""Python client for isometryd, the Isometry per-node data-transfer daemon.

Run it with Debian's ``/usr/bin/python3`` (python3-grpcio and
python3-protobuf); the build puts this package, together with the generated
stubs ``isometry_pb2`` and ``isometry_pb2_grpc``, in ``build-release/python/isometry``
(the quick start's build directory):

    PYTHONPATH=build-release/python /usr/bin/python3 -c \\
        'import isometry; print(isometry.Client("/run/isometry/grpc.sock").status())'

See :mod:`isometry.client` for the API.
"""

from . import datatype, isometry_pb2, isometry_pb2_grpc
from .client import (
    DEFAULT_LOCAL_SOCKET,
    DEFAULT_SOCKET,
    Allocation,
    Client,
    Instance,
    IsometryError,
    PrivateRange,
    TransferError,
    connect,
    native_available,
    native_unavailable_reason,
)

from . import client as _client

# The client module's public names, and the generated stubs.
__all__ = _client.__all__ + ["datatype", "isometry_pb2", "isometry_pb2_grpc"]
