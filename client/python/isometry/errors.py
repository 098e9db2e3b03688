"""The one exception type of the Python client, shared by the gRPC and
local-socket halves of :mod:`isometry.client`."""

import grpc

__all__ = ["IsometryError", "code_name"]


class IsometryError(Exception):
    """A call to isometryd failed.

    Attributes:
        code: the gRPC status code name, e.g. ``"INVALID_ARGUMENT"``,
            ``"NOT_FOUND"``, ``"RESOURCE_EXHAUSTED"``, ``"UNAVAILABLE"``.
        message: the daemon's (or gRPC's) explanation.
    """

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def code_name(code: int) -> str:
    """Name of a numeric google.rpc.Code (as in ``TransferInfo.code`` and
    ``LocalResponse.code``)."""
    for c in grpc.StatusCode:
        if c.value[0] == code:
            return c.name
    return f"CODE_{code}"
