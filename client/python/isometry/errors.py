"""The exceptions of the Python client, shared by its gRPC, local-socket and
native halves, and the one place where the daemon's status codes become
them.

Every failed call raises an :class:`IsometryError`. Its class says what
kind of failure it is, so callers catch by meaning; its ``code`` is the
gRPC status code name and ``message`` the daemon's explanation::

    IsometryError                 any failure (code, message)
    ├── Cancelled                 CANCELLED
    ├── Unknown                   UNKNOWN
    ├── InvalidArgument           INVALID_ARGUMENT
    │   └── OutOfRange            OUT_OF_RANGE (a range outside an allocation, ...)
    ├── DeadlineExceeded          DEADLINE_EXCEEDED
    ├── NotFound                  NOT_FOUND
    ├── AlreadyExists             ALREADY_EXISTS
    ├── PermissionDenied          PERMISSION_DENIED
    │   └── Unauthenticated       UNAUTHENTICATED
    ├── ResourceExhausted         RESOURCE_EXHAUSTED (quota, pool, session limits)
    ├── FailedPrecondition        FAILED_PRECONDITION
    ├── Aborted                   ABORTED
    ├── Unimplemented             UNIMPLEMENTED
    ├── Internal                  INTERNAL
    ├── Unavailable               UNAVAILABLE (no daemon, the session ended)
    ├── DataLoss                  DATA_LOSS (a damaged checkpoint)
    └── TransferError             a transfer that ended failed or cancelled
                                  (``info``: its final TransferInfo); each is
                                  also its code's class (a cancelled one is a
                                  Cancelled, one that failed NOT_FOUND a NotFound)

``IsometryError(code, message)`` itself builds the class of ``code``
(``IsometryError("NOT_FOUND", "...")`` is a :class:`NotFound`), so every
part of the client, the C++ extension included, raises through this
module's table; a code it does not know stays a plain IsometryError.
"""

from typing import Any, Dict, Optional, Tuple, Type, TypeVar, cast

import grpc

__all__ = [
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
    "code_name",
    "error_class",
    "from_rpc_error",
]

_E = TypeVar("_E", bound="IsometryError")


class IsometryError(Exception):
    """A call to isometryd failed.

    Attributes:
        code: the gRPC status code name, e.g. ``"INVALID_ARGUMENT"``,
            ``"NOT_FOUND"``, ``"RESOURCE_EXHAUSTED"``, ``"UNAVAILABLE"``.
        message: the daemon's (or gRPC's) explanation.

    Constructed as ``IsometryError(code, message)``, it is an instance of
    the subclass for ``code`` (:func:`error_class`).
    """

    code: str
    message: str

    def __new__(cls: Type[_E], *args: Any, **kwargs: Any) -> _E:
        target: type = cls
        code = args[0] if args else kwargs.get("code")
        if cls is IsometryError and isinstance(code, str):
            target = error_class(code)
        return cast(_E, Exception.__new__(target))

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message

    def __reduce__(self) -> Tuple[Any, ...]:
        # Pickled as (code, message), which the constructor takes, so an
        # error crosses a multiprocessing pipe as the same class.
        return (IsometryError, (self.code, self.message), self.__dict__)


class Cancelled(IsometryError):
    """CANCELLED: the call or transfer was cancelled (by this client, an
    operator, or the session's end)."""


class Unknown(IsometryError):
    """UNKNOWN: a failure the daemon did not classify."""


class InvalidArgument(IsometryError):
    """INVALID_ARGUMENT: the request is wrong whatever the daemon's state:
    a bad layout, datatype, bounds, or an option out of its range."""


class OutOfRange(InvalidArgument):
    """OUT_OF_RANGE: bytes or indices outside an allocation, range or
    instance."""


class DeadlineExceeded(IsometryError):
    """DEADLINE_EXCEEDED: a timeout ran out (a call, ``wait``, a flush)."""


class NotFound(IsometryError):
    """NOT_FOUND: no such allocation, instance, transfer, memory, file or
    private range (or it is another session's and not published)."""


class AlreadyExists(IsometryError):
    """ALREADY_EXISTS: the thing is there already (a second log reader, a
    rank joined twice)."""


class PermissionDenied(IsometryError):
    """PERMISSION_DENIED: not this session's or uid's, a grant or the
    operator token missing, or the socket not openable by this user."""


class Unauthenticated(PermissionDenied):
    """UNAUTHENTICATED: no valid credential was presented."""


class ResourceExhausted(IsometryError):
    """RESOURCE_EXHAUSTED: a quota, pool, or per-session limit is full."""


class FailedPrecondition(IsometryError):
    """FAILED_PRECONDITION: the call does not fit the state: a closed
    client, private memory without a local socket, the native path
    missing."""


class Aborted(IsometryError):
    """ABORTED: the operation was abandoned midway (e.g. a conflict)."""


class Unimplemented(IsometryError):
    """UNIMPLEMENTED: this daemon does not offer the call or option."""


class Internal(IsometryError):
    """INTERNAL: a broken invariant in the daemon or on the wire."""


class Unavailable(IsometryError):
    """UNAVAILABLE: nothing answers on the socket, or the daemon ended the
    session (shutting down). Worth retrying with a new client."""


class DataLoss(IsometryError):
    """DATA_LOSS: stored data is damaged (a checkpoint chain)."""


_BY_CODE: Dict[str, Type[IsometryError]] = {
    "CANCELLED": Cancelled,
    "UNKNOWN": Unknown,
    "INVALID_ARGUMENT": InvalidArgument,
    "OUT_OF_RANGE": OutOfRange,
    "DEADLINE_EXCEEDED": DeadlineExceeded,
    "NOT_FOUND": NotFound,
    "ALREADY_EXISTS": AlreadyExists,
    "PERMISSION_DENIED": PermissionDenied,
    "UNAUTHENTICATED": Unauthenticated,
    "RESOURCE_EXHAUSTED": ResourceExhausted,
    "FAILED_PRECONDITION": FailedPrecondition,
    "ABORTED": Aborted,
    "UNIMPLEMENTED": Unimplemented,
    "INTERNAL": Internal,
    "UNAVAILABLE": Unavailable,
    "DATA_LOSS": DataLoss,
}


def error_class(code: str) -> Type[IsometryError]:
    """The class for a gRPC status code name (IsometryError for one it
    does not know)."""
    return _BY_CODE.get(code, IsometryError)


class TransferError(IsometryError):
    """A transfer ended in a state other than ``done`` (failed or cancelled).

    Raised by ``copy``, ``wait`` and ``redistribute`` with ``check`` (and
    by futures) after the daemon accepted the transfer. ``TransferError(info)``
    is also an instance of the class of its code (:func:`error_class`: a
    cancelled transfer is a :class:`Cancelled`, one that failed
    ``NOT_FOUND`` a :class:`NotFound`), so ``except NotFound`` catches a
    refusal and a transfer that failed for that reason alike, and
    ``except TransferError`` still tells a failed transfer from a refused
    call. Its ``code`` says why (``"UNKNOWN"`` when the daemon gave none).

    Attributes:
        info: the final ``TransferInfo`` of the transfer.
    """

    info: Any

    def __new__(cls, *args: Any, **kwargs: Any) -> "TransferError":
        target: type = cls
        info = args[0] if args else kwargs.get("info")
        if cls is TransferError and info is not None:
            code = code_name(info.code) if getattr(info, "code", 0) else "UNKNOWN"
            target = _TRANSFER_BY_CODE.get(code, TransferError)
        return cast(TransferError, Exception.__new__(target))

    def __init__(self, info: Any) -> None:
        code = code_name(info.code) if info.code else "UNKNOWN"
        super().__init__(
            code,
            f"transfer {info.id} {info.state}" + (f": {info.message}" if info.message else ""),
        )
        self.info = info

    def __reduce__(self) -> Tuple[Any, ...]:
        # The info travels serialized: protobuf's own pickling looks for
        # the generated module under a name outside this package.
        return (_transfer_error, (self.info.SerializeToString(),))


# TransferError and a code's class, one subclass per code (named like
# "NotFoundTransferError"), which TransferError(info) picks.
_TRANSFER_BY_CODE: Dict[str, Type[TransferError]] = {
    code: cast(Type[TransferError], type(
        f"{base.__name__}TransferError", (TransferError, base),
        {"__module__": __name__,
         "__doc__": f"A transfer that ended failed or cancelled with {code}: a "
                    f":class:`TransferError` and a :class:`{base.__name__}`."}))
    for code, base in _BY_CODE.items()
}


def _transfer_error(info: bytes) -> TransferError:
    from . import isometry_pb2 as pb

    return TransferError(pb.TransferInfo.FromString(info))


def code_name(code: int) -> str:
    """Name of a numeric google.rpc.Code (as in ``TransferInfo.code`` and
    ``LocalResponse.code``)."""
    for c in grpc.StatusCode:
        if c.value[0] == code:
            return str(c.name)
    return f"CODE_{code}"


def from_rpc_error(e: grpc.RpcError, suffix: str = "") -> IsometryError:
    """The IsometryError for a failed gRPC call (its code's class), with
    ``suffix`` appended to the call's details."""
    code: Optional[grpc.StatusCode] = e.code() if hasattr(e, "code") else None
    details = e.details() if hasattr(e, "details") else None
    name = code.name if code is not None else "UNKNOWN"
    return IsometryError(name, (details or "") + suffix)
