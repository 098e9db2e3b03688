"""Python client for isometryd, the Isometry per-node data-transfer daemon.

Run it with Debian's ``/usr/bin/python3`` (python3-grpcio and
python3-protobuf); the build puts this package, together with the generated
stubs ``isometry_pb2`` and ``isometry_pb2_grpc``, in ``build-release/python/isometry``
(the quick start's build directory), from where ``pip install
--no-build-isolation build-release/python`` installs it into an environment:

    PYTHONPATH=build-release/python /usr/bin/python3 -c \\
        'import isometry; print(isometry.Client("/run/isometry/grpc.sock").status())'

See :mod:`isometry.client` for the API and :mod:`isometry.errors` for the
exceptions. The package is typed (PEP 561, ``py.typed``).
"""

from . import datatype as datatype
from .arrays import StrideError
from . import isometry_pb2 as isometry_pb2
from . import isometry_pb2_grpc as isometry_pb2_grpc
from .client import (
    DEFAULT_LOCAL_SOCKET,
    DEFAULT_SOCKET,
    Allocation,
    Client,
    Instance,
    PrivateRange,
    connect,
    native_available,
    native_unavailable_reason,
)
from .errors import (
    Aborted,
    AlreadyExists,
    Cancelled,
    DataLoss,
    DeadlineExceeded,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    IsometryError,
    NotFound,
    OutOfRange,
    PermissionDenied,
    ResourceExhausted,
    TransferError,
    Unauthenticated,
    Unavailable,
    Unimplemented,
    Unknown,
)

try:
    from ._version import __version__ as __version__
except ImportError:  # the source tree, not a build: the build writes _version.py
    __version__ = "0+unknown"

# The client module's public names, the exceptions, and the generated stubs.
__all__ = [
    "Client",
    "connect",
    "native_available",
    "native_unavailable_reason",
    "Allocation",
    "Instance",
    "PrivateRange",
    "DEFAULT_SOCKET",
    "DEFAULT_LOCAL_SOCKET",
    "IsometryError",
    "Cancelled",
    "Unknown",
    "InvalidArgument",
    "OutOfRange",
    "DeadlineExceeded",
    "NotFound",
    "AlreadyExists",
    "PermissionDenied",
    "Unauthenticated",
    "ResourceExhausted",
    "FailedPrecondition",
    "Aborted",
    "Unimplemented",
    "Internal",
    "Unavailable",
    "DataLoss",
    "TransferError",
    "StrideError",
    "datatype",
    "isometry_pb2",
    "isometry_pb2_grpc",
]
