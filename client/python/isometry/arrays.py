"""Instances described by a NumPy array's shape, strides and dtype
(:meth:`isometry.Client.register_array`).

Axis ``k`` of the array is dimension ``k`` of the instance (``x`` is axis
0, ``y`` axis 1, ...), so two arrays of the same shape describe the same
index space whatever their memory order, and a copy between them moves
element ``[i, j]`` to element ``[i, j]``, as ``dst[...] = src`` would:

* a dense array in any axis order (C order, Fortran order, a transpose of
  either) becomes a **layout**: ``F`` then the axes from the smallest
  stride up (``"F,y,x"`` for a C-order 2-D array, ``"F,x,y"`` for a
  Fortran-order one);
* a strided view that leaves gaps (``a[::2]``, ``a[:, 1:5]``,
  ``a[::2].T``) becomes a **datatype** (nested ``hvector``\\ s in C order,
  the order a layout instance packs in: docs/concepts/datatypes.md);
* strides that neither can express raise :class:`StrideError` (an
  ``InvalidArgument`` and a ``ValueError``) naming the axis and the
  stride: a negative stride (a reversed view), or elements that overlap
  (a broadcast axis of stride 0, ``as_strided`` views).

The record (``dtype``) is one field named ``"v"`` of ``itemsize`` bytes,
or a packed structured dtype's own fields in order (``field=`` names the
single field instead, which also takes a padded structured dtype whole).

Example (this process's memory; a native client's ``Allocation.buffer``
viewed with ``np.frombuffer`` registers the same way)::

    >>> import numpy as np
    >>> import isometry
    >>> grid = np.arange(6000.0).reshape(100, 60)                 # C order
    >>> out = np.zeros((60, 100)).T                                 # that shape, Fortran order
    >>> with isometry.connect("/run/isometry/grpc.sock",
    ...                       local_socket="/run/isometry/isometry.sock") as c:
    ...     mine, theirs = c.register_private(grid), c.register_private(out.T)
    ...     src = c.register_array(mine, grid)                      # layout "F,y,x"
    ...     c.copy(src, c.register_array(theirs, out)).state        # into "F,x,y"
    ...     column = c.register_array(mine, grid[:, 7])   # a datatype: 100 doubles 480 bytes apart
    'done'
    >>> bool((out == grid).all())
    True
"""

import dataclasses
from typing import Any, List, Optional, Sequence, Tuple

from .datatype import BYTE, Datatype
from .errors import InvalidArgument

__all__ = ["StrideError", "ArrayDescription", "describe_array", "array_address"]

_DIMS = "xyzw"


class StrideError(InvalidArgument, ValueError):
    """An array's strides cannot be expressed as a layout or a datatype.

    Attributes:
        axis: the axis whose stride it is.
        stride: that stride in bytes.
    """

    axis: int
    stride: int

    def __init__(self, axis: int, stride: int, why: str) -> None:
        super().__init__("INVALID_ARGUMENT", f"array axis {axis}, stride {stride} bytes: {why}")
        self.axis = axis
        self.stride = stride

    def __reduce__(self) -> Tuple[Any, ...]:
        return (_stride_error, (self.axis, self.stride, self.message))


def _stride_error(axis: int, stride: int, message: str) -> StrideError:
    e = StrideError(axis, stride, "")
    e.message = message
    e.args = (f"INVALID_ARGUMENT: {message}",)
    return e


@dataclasses.dataclass(frozen=True)
class ArrayDescription:
    """How :meth:`isometry.Client.register_array` registers an array.

    Attributes:
        bounds: one extent per axis (a 0-d array is one point of 1-D).
        fields: ``[(name, size), ...]`` of one element.
        layout: the layout text, or "" for a datatype instance.
        datatype: the datatype (one element of it covers the array), or None.
        span: bytes from the array's first element to one past its last.
    """

    bounds: List[int]
    fields: List[Tuple[str, int]]
    layout: str
    datatype: Optional[Datatype]
    span: int


def _element_fields(dtype: Any, field: Optional[str]) -> List[Tuple[str, int]]:
    size = int(dtype.itemsize)
    if field is not None or not dtype.names:
        return [(field or "v", size)]
    fields = sorted(((int(dtype.fields[n][1]), n, int(dtype.fields[n][0].itemsize))
                     for n in dtype.names))
    at = 0
    for offset, name, nbytes in fields:
        if offset != at:
            raise ValueError(
                f"register_array: the structured dtype's field {name!r} starts at byte "
                f"{offset}, not {at}: fields are packed without gaps or overlaps; pass "
                "field=NAME to copy each record whole as one field")
        at += nbytes
    if at != size:
        raise ValueError(
            f"register_array: the structured dtype's fields end at byte {at} of its {size}-byte "
            "records (trailing padding); pass field=NAME to copy each record whole")
    return [(name, nbytes) for _, name, nbytes in fields]


def describe_array(array: Any, field: Optional[str] = None) -> ArrayDescription:
    """The layout or datatype instance that ``array`` (anything with
    NumPy's ``shape``, ``strides`` and ``dtype``) is; raises
    :class:`StrideError` for strides that neither expresses, ValueError
    for more than 4 axes or a structured dtype with gaps."""
    shape: Sequence[int] = tuple(int(n) for n in array.shape) or (1,)
    strides: Sequence[int] = tuple(int(s) for s in array.strides) or (int(array.dtype.itemsize),)
    if len(shape) > len(_DIMS):
        raise ValueError(f"register_array: {len(shape)} axes; an instance has 1 to 4 dimensions")
    fields = _element_fields(array.dtype, field)
    item = int(array.dtype.itemsize)
    if item == 0:
        raise ValueError("register_array: elements of 0 bytes")
    empty = any(n == 0 for n in shape)
    moving = [k for k in range(len(shape)) if shape[k] > 1]  # axes whose stride matters
    for k in moving:
        if strides[k] < 0:
            raise StrideError(k, strides[k], "a negative stride (a reversed view, a[::-1]) is "
                              "neither a layout nor a datatype here; register the forward view "
                              "and reverse it in NumPy, or copy np.ascontiguousarray(view)")
    # Each axis must step past everything the faster-stepping axes cover:
    # then no two elements share a byte.
    span = item
    dense = True
    for k in sorted(moving, key=lambda k: (strides[k], k)):
        if strides[k] < span:
            raise StrideError(k, strides[k], "elements overlap: "
                              + ("a broadcast axis; " if strides[k] == 0 else "")
                              + f"it steps less than the {span} bytes that one element and the "
                              "axes of smaller strides cover (an instance's elements are "
                              "distinct bytes)")
        dense = dense and strides[k] == span
        span = strides[k] * (shape[k] - 1) + span
    if empty:
        span = 0
    if dense or empty:
        order = sorted(range(len(shape)), key=lambda k: (shape[k] <= 1, strides[k], k))
        layout = ",".join(["F"] + [_DIMS[k] for k in order])
        return ArrayDescription(list(shape), fields, layout, None, span)
    return ArrayDescription(list(shape), fields, "", _hvectors(shape, strides, item), span)


def _hvectors(shape: Sequence[int], strides: Sequence[int], item: int) -> Datatype:
    """Nested hvectors over the axes, the last innermost (C order), with
    runs of dense axes merged."""
    block = item  # contiguous bytes at the bottom
    axes = list(range(len(shape)))
    while axes and (shape[axes[-1]] == 1 or strides[axes[-1]] == block):
        block *= shape[axes.pop()]
    t = BYTE.Create_contiguous(block)
    while axes:
        k = axes.pop()
        count, stride = shape[k], strides[k]
        while axes and (shape[axes[-1]] == 1 or strides[axes[-1]] == stride * count):
            count *= shape[axes.pop()]
        t = t.Create_hvector(count, 1, stride)
    return t


def array_address(array: Any) -> int:
    """The address of the array's element ``[0, ..., 0]``."""
    iface = getattr(array, "__array_interface__", None)
    if iface is None:
        raise TypeError(f"register_array: expected a NumPy array, got {type(array).__name__}")
    return int(iface["data"][0])
