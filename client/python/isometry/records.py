"""The records and argument forms of :class:`isometry.Client`: the
:class:`Allocation` and :class:`Instance` it returns, the forms its methods
accept (a record or its integer id; bounds as extents or (lo, hi) pairs;
fields as pairs or a dict), and their conversion to the protobuf messages.
"""

import dataclasses
from typing import Any, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import isometry_pb2 as pb

__all__ = ["Allocation", "Instance", "AllocationLike", "InstanceLike", "TransferLike",
           "TransferInfo", "BufferLike", "BoundsLike", "FieldsLike"]

# The protobuf messages the client returns (isometry_pb2 carries no types,
# so to mypy they are Any): named for the signatures below.
TransferInfo = Any  # isometry.v1.TransferInfo
# Anything with the buffer protocol: bytes, bytearray, memoryview, mmap,
# a NumPy array (Python 3.11's typing has no name for it).
BufferLike = Any


@dataclasses.dataclass(frozen=True)
class Allocation:
    """Pool memory allocated by :meth:`Client.allocate`.

    Attributes:
        id: the daemon's allocation id.
        nbytes: its size in bytes.
        memory: the name of the memory that holds it (e.g. ``"sys0"``).
        buffer: on the native path (:attr:`Client.transport` ``"native"``),
            the allocation mapped into this process: a writable buffer that
            ``memoryview(a.buffer)`` and ``numpy.frombuffer(a.buffer,
            dtype)`` view without a copy (``numpy.from_dlpack(a)`` too).
            None over gRPC. :meth:`Client.free` raises BufferError while
            such views are alive; the mapping outlives the session.
    """

    id: int
    nbytes: int
    memory: str = ""
    buffer: Optional[object] = dataclasses.field(default=None, repr=False, compare=False)

    def __int__(self) -> int:
        return self.id

    def _mapped(self) -> Any:
        if self.buffer is None:
            raise BufferError(
                f"allocation {self.id} is not mapped into this process: only allocations of "
                "a native client are (Client(..., local_socket=PATH, native=True))"
            )
        return self.buffer

    def __dlpack__(self, stream: Any = None, **kwargs: Any) -> Any:
        """A DLPack capsule over the mapped bytes (1-D uint8, CPU)."""
        return self._mapped().__dlpack__(stream, **kwargs)

    def __dlpack_device__(self) -> Tuple[int, int]:
        kind, device = self._mapped().__dlpack_device__()
        return int(kind), int(device)


@dataclasses.dataclass(frozen=True)
class Instance:
    """An instance registered by :meth:`Client.register_instance`.

    Attributes:
        id: the daemon's instance id (what :meth:`Client.copy` takes).
        total_bytes: the storage it covers, padding of partial blocks included.
        allocation: the id of the allocation that holds it (0 for files
            and private ranges).
        offset: its first byte within that allocation (or private range).
        private_range: the id of the private range that holds it, or 0.
    """

    id: int
    total_bytes: int
    allocation: int = 0
    offset: int = 0
    private_range: int = 0

    def __int__(self) -> int:
        return self.id


# What methods accept for an allocation, instance or transfer: the record
# or its integer id.
AllocationLike = Union[Allocation, int]
InstanceLike = Union[Instance, int]
TransferLike = Union[int, TransferInfo]


def _id(obj: Any, what: str) -> int:
    """The integer id of an Allocation, Instance, TransferInfo or int."""
    if isinstance(obj, (Allocation, Instance)):  # first: every copy names two
        return obj.id
    if isinstance(obj, bool):
        raise TypeError(f"{what}: expected an id or a record, got a bool")
    if isinstance(obj, int):
        return obj
    if isinstance(obj, pb.TransferInfo):
        return int(obj.id)
    if isinstance(obj, pb.CopyResponse):
        return int(obj.transfer)
    raise TypeError(f"{what}: expected an int id or a record, got {type(obj).__name__}")


BoundsLike = Union[int, Sequence[Union[int, Tuple[int, int]]]]


def _box(bounds: BoundsLike, what: str) -> "pb.Box":
    """Builds a Box from extents or (lo, hi) pairs, one per dimension.

    ``1000`` and ``[1000]`` mean x in [0, 1000); ``[(0, 4), (2, 8)]`` means
    x in [0, 4) and y in [2, 8). Extents and pairs may be mixed.
    """
    if isinstance(bounds, pb.Box):
        return bounds
    dims: Sequence[Union[int, Tuple[int, int]]] = [bounds] if isinstance(bounds, int) else bounds
    box = pb.Box()
    try:
        for d in dims:
            if isinstance(d, int):
                box.lo.append(0)
                box.hi.append(d)
            else:
                lo, hi = d
                box.lo.append(int(lo))
                box.hi.append(int(hi))
    except (TypeError, ValueError) as e:
        raise TypeError(
            f"{what}: expected extents or (lo, hi) pairs per dimension, got {bounds!r}"
        ) from e
    return box


FieldsLike = Union[Mapping[str, int], Iterable[Tuple[str, int]]]


def _fields(fields: FieldsLike) -> List["pb.Field"]:
    """Fields from ``[(name, size), ...]`` or ``{name: size}`` (in order)."""
    items = fields.items() if isinstance(fields, Mapping) else fields
    out: List["pb.Field"] = []
    for item in items:
        try:
            name, size = item
        except (TypeError, ValueError) as e:
            raise TypeError(f"fields: expected (name, size) pairs, got {item!r}") from e
        out.append(pb.Field(name=str(name), size=int(size)))
    return out

