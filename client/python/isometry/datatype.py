"""MPI-style datatypes for isometryd, named as mpi4py names them.

A :class:`Datatype` describes where the elements of a buffer lie, exactly as
the MPI constructors of the same names do (MPI 4.0, with MPICH's lower
bound and extent rules; docs/concepts/datatypes.md "Datatypes" says where Open MPI differs).
It is a value: building one sends nothing. Pass it to
:meth:`isometry.Client.register_instance` (``datatype=..., count=...``)
or register it once with :meth:`isometry.Client.register_datatype` and
pass the returned handle, so the daemon translates it only once.

Example (a column of a 100 x 100 C array of doubles)::

    >>> import isometry
    >>> from isometry.datatype import DOUBLE
    >>> column = DOUBLE.Create_vector(100, 1, 100)
    >>> with isometry.Client("/run/isometry/grpc.sock") as client:
    ...     alloc = client.allocate("sys0", 8 * 100 * 100)
    ...     inst = client.register_instance(alloc, datatype=column, count=1)
    ...     client.register_datatype(column).size            # MPI's size: 100 doubles
    800

Strides and displacements are in elements of the old type's extent for
``Create_vector``, ``Create_indexed`` and ``Create_indexed_block``, in
bytes for the ``h`` variants and ``Create_struct``. Arguments are checked
by the daemon; a bad one fails the call that sends the datatype with
INVALID_ARGUMENT naming the node ("datatype.vector.old: count -1 < 0").
"""

from typing import Optional, Sequence

from . import isometry_pb2 as pb

__all__ = [
    "Datatype",
    "BYTE",
    "CHAR",
    "SHORT",
    "INT",
    "LONG",
    "LONG_LONG",
    "INT8_T",
    "INT16_T",
    "INT32_T",
    "INT64_T",
    "UINT8_T",
    "UINT16_T",
    "UINT32_T",
    "UINT64_T",
    "FLOAT",
    "DOUBLE",
    "LONG_DOUBLE",
    "ORDER_C",
    "ORDER_FORTRAN",
    "DISTRIBUTE_NONE",
    "DISTRIBUTE_BLOCK",
    "DISTRIBUTE_CYCLIC",
    "DISTRIBUTE_DFLT_DARG",
]

ORDER_C = pb.ORDER_C
ORDER_FORTRAN = pb.ORDER_FORTRAN
DISTRIBUTE_NONE = pb.DISTRIBUTE_NONE
DISTRIBUTE_BLOCK = pb.DISTRIBUTE_BLOCK
DISTRIBUTE_CYCLIC = pb.DISTRIBUTE_CYCLIC
DISTRIBUTE_DFLT_DARG = -1


class Datatype:
    """One datatype: a predefined one (``INT``, ``DOUBLE``, ...) or built
    from another by the ``Create_*`` methods. Immutable."""

    __slots__ = ("_msg",)

    def __init__(self, msg: "pb.Datatype"):
        self._msg = msg

    @classmethod
    def registered(cls, handle: int) -> "Datatype":
        """A datatype this session registered (the handle
        :meth:`isometry.Client.register_datatype` returned)."""
        return cls(pb.Datatype(registered=int(handle)))

    def to_proto(self) -> "pb.Datatype":
        """The ``isometry.v1.Datatype`` message (a copy)."""
        out = pb.Datatype()
        out.CopyFrom(self._msg)
        return out

    def __repr__(self) -> str:
        return f"Datatype({self._msg.WhichOneof('type')})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Datatype) and bool(self._msg == other._msg)

    def __hash__(self) -> int:
        return hash(self._msg.SerializeToString(deterministic=True))

    # ---- constructors (MPI_Type_*) ----

    def Create_contiguous(self, count: int) -> "Datatype":
        return Datatype(pb.Datatype(contiguous=pb.TypeContiguous(count=count, old=self._msg)))

    def Create_vector(self, count: int, blocklength: int, stride: int) -> "Datatype":
        """``count`` blocks of ``blocklength`` elements, ``stride`` elements apart."""
        v = pb.TypeVector(count=count, blocklength=blocklength, stride=stride, old=self._msg)
        return Datatype(pb.Datatype(vector=v))

    def Create_hvector(self, count: int, blocklength: int, stride: int) -> "Datatype":
        """As :meth:`Create_vector` with ``stride`` in bytes."""
        v = pb.TypeVector(count=count, blocklength=blocklength, stride=stride, old=self._msg)
        return Datatype(pb.Datatype(hvector=v))

    def Create_indexed(
        self, blocklengths: Sequence[int], displacements: Sequence[int]
    ) -> "Datatype":
        """Blocks at displacements in elements of this type's extent."""
        x = pb.TypeIndexed(
            blocklengths=blocklengths, displacements=displacements, old=self._msg
        )
        return Datatype(pb.Datatype(indexed=x))

    def Create_hindexed(
        self, blocklengths: Sequence[int], displacements: Sequence[int]
    ) -> "Datatype":
        """Blocks at byte displacements."""
        x = pb.TypeIndexed(
            blocklengths=blocklengths, displacements=displacements, old=self._msg
        )
        return Datatype(pb.Datatype(hindexed=x))

    def Create_indexed_block(self, blocklength: int, displacements: Sequence[int]) -> "Datatype":
        x = pb.TypeIndexedBlock(blocklength=blocklength, displacements=displacements, old=self._msg)
        return Datatype(pb.Datatype(indexed_block=x))

    def Create_hindexed_block(self, blocklength: int, displacements: Sequence[int]) -> "Datatype":
        x = pb.TypeIndexedBlock(blocklength=blocklength, displacements=displacements, old=self._msg)
        return Datatype(pb.Datatype(hindexed_block=x))

    @staticmethod
    def Create_struct(
        blocklengths: Sequence[int], displacements: Sequence[int], datatypes: Sequence["Datatype"]
    ) -> "Datatype":
        """Blocks of different types at byte displacements (MPI_Type_create_struct)."""
        s = pb.TypeStruct(
            blocklengths=blocklengths,
            displacements=displacements,
            types=[d._msg for d in datatypes],
        )
        return Datatype(pb.Datatype(struct_type=s))

    def Create_subarray(
        self,
        sizes: Sequence[int],
        subsizes: Sequence[int],
        starts: Sequence[int],
        order: int = ORDER_C,
    ) -> "Datatype":
        s = pb.TypeSubarray(
            sizes=sizes, subsizes=subsizes, starts=starts, order=order, old=self._msg
        )
        return Datatype(pb.Datatype(subarray=s))

    def Create_darray(
        self,
        size: int,
        rank: int,
        gsizes: Sequence[int],
        distribs: Sequence[int],
        dargs: Sequence[int],
        psizes: Sequence[int],
        order: int = ORDER_C,
    ) -> "Datatype":
        """MPI_Type_create_darray; ``dargs`` entries may be DISTRIBUTE_DFLT_DARG."""
        d = pb.TypeDarray(
            size=size,
            rank=rank,
            gsizes=gsizes,
            distribs=distribs,
            dargs=dargs,
            psizes=psizes,
            order=order,
            old=self._msg,
        )
        return Datatype(pb.Datatype(darray=d))

    def Create_resized(self, lb: int, extent: int) -> "Datatype":
        return Datatype(pb.Datatype(resized=pb.TypeResized(lb=lb, extent=extent, old=self._msg)))


def _basic(t: int) -> Datatype:
    return Datatype(pb.Datatype(basic=t))


BYTE = _basic(pb.BASIC_BYTE)
CHAR = _basic(pb.BASIC_CHAR)
INT8_T = _basic(pb.BASIC_INT8)
INT16_T = _basic(pb.BASIC_INT16)
INT32_T = _basic(pb.BASIC_INT32)
INT64_T = _basic(pb.BASIC_INT64)
UINT8_T = _basic(pb.BASIC_UINT8)
UINT16_T = _basic(pb.BASIC_UINT16)
UINT32_T = _basic(pb.BASIC_UINT32)
UINT64_T = _basic(pb.BASIC_UINT64)
SHORT = INT16_T
INT = INT32_T
LONG = INT64_T
LONG_LONG = INT64_T
FLOAT = _basic(pb.BASIC_FLOAT)
DOUBLE = _basic(pb.BASIC_DOUBLE)
LONG_DOUBLE = _basic(pb.BASIC_LONG_DOUBLE)


def as_proto(datatype: Optional[Datatype]) -> Optional["pb.Datatype"]:
    """The message of a Datatype (None stays None); for the client module."""
    if datatype is None:
        return None
    if not isinstance(datatype, Datatype):
        raise TypeError(f"expected an isometry.datatype.Datatype, got {type(datatype).__name__}")
    return datatype._msg
