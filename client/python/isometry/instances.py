"""Instances of :class:`isometry.Client`: this process's own memory
registered as private ranges, instances registered on allocations, files,
other nodes' memory and private ranges, and datatypes; mixed into Client.
"""

import os
import threading
from typing import TYPE_CHECKING, Any, List, Optional, Tuple, Union

from . import isometry_pb2 as pb
from .arrays import array_address, describe_array
from .datatype import Datatype, as_proto
from .errors import IsometryError
from .local import (DEFAULT_LOCAL_SOCKET, LocalSession, PrivateRange, own_address_space,
                    pin_buffer)
from .native import NativePath
from .records import (Allocation, AllocationLike, BoundsLike, BufferLike, FieldsLike, Instance,
                      InstanceLike, _box, _fields, _id)

__all__ = ["InstancesMixin"]


class InstancesMixin:
    """Registration calls of :class:`isometry.Client`."""

    if TYPE_CHECKING:  # what Client provides
        _closed: bool
        _lock: threading.Lock
        _local: Optional[LocalSession]
        _native: Optional[NativePath]
        _private: List[PrivateRange]

        @property
        def _over_local_socket(self) -> bool: ...

        def _call(self, method: str, request: Any, timeout: Any = ...,
                  stream: bool = False) -> Any: ...

        def _check_open(self) -> None: ...

    def register_private(self, buffer: BufferLike) -> PrivateRange:
        """Registers this process's own memory for copies by the daemon.

        ``buffer`` is any writable, C-contiguous object with the buffer
        protocol: a bytearray, a numpy array, an mmap, a ctypes array, or a
        memoryview of a part of one. The daemon then reads and writes it
        directly (the ``cma`` channel) in copies between instances that
        :meth:`register_instance` puts in it with ``private_range=``.

        The client holds a reference that pins the buffer until the session
        ends (:meth:`close`): it cannot be resized, closed or freed under
        the daemon. Ranges cannot be unregistered earlier. The buffer must
        stay mapped and writable while copies use it.

        Needs a session over the local socket (``Client(...,
        local_socket=PATH)``): the daemon reaches a process only for a
        client that proved, by SO_PEERCRED, which process it is.

        Returns:
            a :class:`PrivateRange` (``id``, ``address``, ``nbytes``,
            ``publish()``).

        Raises:
            TypeError: for a read-only buffer or an object without the
                buffer protocol (nothing is sent to the daemon).
            ValueError: for an empty or non-contiguous buffer.
            IsometryError: ``FAILED_PRECONDITION`` for a client without a
                local socket, or from the daemon (no cma channel in its
                config, ``RESOURCE_EXHAUSTED`` beyond
                ``daemon.max_private_ranges_per_session``, ...).
        """
        if self._closed:
            raise IsometryError("FAILED_PRECONDITION", "this client is closed")
        if not self._over_local_socket:
            raise IsometryError(
                "FAILED_PRECONDITION",
                "private memory needs a session over the daemon's local socket: "
                "Client(..., local_socket=PATH) with its [daemon] local_socket "
                f"(default {DEFAULT_LOCAL_SOCKET}); gRPC sessions carry no process identity",
            )
        view, address, nbytes = pin_buffer(buffer)
        try:
            if self._native is not None:
                native = self._native.session.register_private(address, nbytes)
                range_id, publish = native.id, native.publish
            else:
                assert self._local is not None  # _over_local_socket
                local: LocalSession = self._local
                # This process's own address space, which it may always
                # open: with it the daemon needs no privilege to reach a
                # client of another uid (without it, the daemon opens it).
                mem = own_address_space()
                try:
                    range_id = local.request(
                        tuple(mem),
                        register_private=pb.RegisterPrivateRequest(address=address, bytes=nbytes),
                    ).register_private.private_range
                finally:
                    for fd in mem:
                        os.close(fd)

                def publish() -> None:
                    local.request(
                        publish_private=pb.PublishPrivateRequest(private_range=range_id)
                    )
        except BaseException:
            view.release()
            raise
        rng = PrivateRange(publish, range_id, buffer, view, address)
        with self._lock:
            self._private.append(rng)
        return rng

    # ---- instances ----

    def register_instance(
        self,
        alloc: Optional[AllocationLike] = None,
        bounds: Optional[BoundsLike] = None,
        fields: Optional[FieldsLike] = None,
        layout: str = "",
        offset: int = 0,
        memory: str = "",
        file: str = "",
        datatype: Optional[Datatype] = None,
        count: int = 1,
        private_range: Union[PrivateRange, int, None] = None,
    ) -> Instance:
        """Registers an instance: an index space x fields stored in ``alloc``.

        Other nodes' instances (a cluster): ``memory="node-b:sys0"`` with
        ``alloc`` an allocation published on node-b, or
        ``memory="node-b:dsk0", file="x.bin"`` (``alloc`` 0) for a file of
        its DSK memory. A file of this node's DSK memory: ``memory="dsk0"``.

        Args:
            alloc: the allocation that holds it (its own or a published one).
            bounds: the index space, one entry per dimension (1 to 4): an
                extent ``n`` (meaning [0, n)) or a pair ``(lo, hi)``.
            fields: ``[(name, size_in_bytes), ...]`` in storage order (or a dict).
            layout: the layout text, first component varying fastest, e.g.
                ``"F,x"`` (array of structs), ``"x,F"`` (struct of arrays),
                ``"F,x,y"``, ``"x_in=8,F,x_out"``.
            offset: the instance's first byte within the allocation.
            datatype, count: instead of bounds, fields and layout: ``count``
                elements of an :class:`isometry.datatype.Datatype` whose
                origin (MPI's buf) is ``offset`` bytes into the allocation
                or file. Copies between datatype instances move the packed
                stream (MPI_Pack order).
            private_range: instead of ``alloc``: process memory, a
                :class:`PrivateRange` of this client's
                (:meth:`register_private`) or the id of one that another
                session of this uid published; ``offset`` is then from the
                range's first byte. The whole instance must lie inside the
                range (else ``OUT_OF_RANGE``); a range of another session
                not published, or one whose session ended, is ``NOT_FOUND``.

        Returns:
            an :class:`Instance` with the daemon's id and the storage size.
        """
        if private_range is not None:
            if alloc or file:
                raise ValueError("register_instance: a private_range replaces alloc and file")
            if isinstance(private_range, bool) or not isinstance(
                private_range, (PrivateRange, int)
            ):
                raise TypeError(
                    "register_instance: private_range is a PrivateRange or a range id, got "
                    f"{type(private_range).__name__}"
                )
            alloc = 0
        if datatype is not None:
            if bounds is not None or fields is not None or layout:
                raise ValueError("register_instance: a datatype replaces bounds, fields and layout")
            spec = pb.InstanceSpec(
                allocation=_id(alloc, "register_instance") if alloc else 0,
                offset=offset,
                datatype=as_proto(datatype),
                count=count,
                memory=memory,
                file=file,
                private_range=int(private_range or 0),
            )
        else:
            if bounds is None or fields is None or not layout:
                raise ValueError("register_instance: bounds, fields and layout (or a datatype)")
            spec = pb.InstanceSpec(
                allocation=_id(alloc, "register_instance") if alloc else 0,
                offset=offset,
                bounds=_box(bounds, "bounds"),
                fields=_fields(fields),
                layout=layout,
                memory=memory,
                file=file,
                private_range=int(private_range or 0),
            )
        native = self._register_native(spec)
        if native is not None:
            return Instance(id=native.id, total_bytes=native.total_bytes,
                            allocation=spec.allocation, offset=offset,
                            private_range=spec.private_range)
        r = self._call("RegisterInstance", pb.RegisterInstanceRequest(spec=spec))
        return Instance(
            id=r.instance,
            total_bytes=r.total_bytes,
            allocation=spec.allocation,
            offset=offset,
            private_range=spec.private_range,
        )

    def register_array(self, where: Union[AllocationLike, PrivateRange], array: Any,
                       offset: Optional[int] = None, field: Optional[str] = None) -> Instance:
        """Registers the instance a NumPy array (or view) is: its shape,
        strides and dtype (:mod:`isometry.arrays`). A dense array in any
        axis order becomes a layout instance (``"F,y,x"`` in C order,
        ``"F,x,y"`` in Fortran order), a strided view with gaps a datatype
        instance; axis ``k`` is dimension ``k``, so copies between arrays
        of one shape move ``[i, j]`` to ``[i, j]`` whatever their orders.

        Args:
            where: the storage: a mapped :class:`Allocation` (native path),
                or a :class:`PrivateRange`, that ``array`` views; or any
                allocation (an id too) with ``offset``.
            array: the array; with ``offset`` None it must lie inside
                ``where``, and its place there is the instance's offset.
            offset: the byte offset of ``array[0, ..., 0]`` in ``where``:
                ``array`` is then only a template (shape, strides, dtype).
            field: the one field's name (default ``"v"``; a packed
                structured dtype gives its own fields unless this is set).

        Raises:
            isometry.arrays.StrideError: a stride neither a layout nor a
                datatype expresses (negative, or overlapping elements),
                naming the axis and the stride; it is an
                :class:`InvalidArgument` and a ``ValueError``.
            ValueError: ``array`` does not lie inside ``where``, more than
                4 axes, a structured dtype with gaps.
        """
        d = describe_array(array, field)
        if offset is None:
            base, size = self._array_storage(where)
            offset = array_address(array) - base
            if offset < 0 or offset + d.span > size:
                raise ValueError(
                    f"register_array: the array's bytes [{offset}, {offset}+{d.span}) lie outside "
                    f"the {size} bytes of {where!r}; pass offset= to use the array as a template")
        alloc: Optional[AllocationLike] = None
        rng: Union[PrivateRange, int, None] = None
        if isinstance(where, PrivateRange):
            rng = where
        else:
            alloc = where
        if d.datatype is not None:
            return self.register_instance(alloc, datatype=d.datatype, offset=offset,
                                          private_range=rng)
        return self.register_instance(alloc, d.bounds, d.fields, d.layout, offset=offset,
                                      private_range=rng)

    @staticmethod
    def _array_storage(where: Any) -> Tuple[int, int]:
        """The address and size of the memory ``where`` maps here."""
        if isinstance(where, PrivateRange):
            return where.address, where.nbytes
        if isinstance(where, Allocation) and where.buffer is not None:
            import numpy  # the caller has an array: NumPy is there

            base = numpy.frombuffer(where.buffer, dtype=numpy.uint8)  # type: ignore[call-overload]
            return array_address(base), where.nbytes
        raise ValueError(
            f"register_array: {where!r} is not mapped into this process (only a native "
            "client's allocations and private ranges are); pass offset= with the array's "
            "first byte in it")

    def _register_native(self, spec: Any) -> Any:
        """Registers a layout instance on a mapped allocation or a private
        range through the native session; None for everything else (gRPC
        registers it)."""
        if self._native is None or spec.HasField("datatype") or spec.memory or spec.file:
            return None
        if spec.private_range:
            self._check_open()
            return self._native.register_private(spec.private_range, spec.offset, spec.bounds,
                                                 spec.fields, spec.layout)
        if not spec.allocation:
            return None
        self._check_open()
        return self._native.register(spec.allocation, spec.offset, spec.bounds, spec.fields,
                                     spec.layout)

    def register_datatype(self, datatype: Datatype) -> "pb.RegisterDatatypeResponse":
        """Translates a datatype once for this session (memoized, FALCON-X).

        Returns the daemon's answer: ``handle`` (use
        ``Datatype.registered(handle)`` in later instances), MPI's ``size``,
        ``lb``, ``extent``, ``true_lb``, ``true_extent``, and ``canonical``,
        the normalized form equivalent datatypes share.
        """
        return self._call(
            "RegisterDatatype", pb.RegisterDatatypeRequest(datatype=as_proto(datatype))
        )

    def unregister_instance(self, instance: InstanceLike) -> None:
        """Forgets a registered instance (its bytes stay in the allocation)."""
        iid = _id(instance, "unregister_instance")
        if self._native is not None and self._native.unregister(iid):
            return
        self._call("UnregisterInstance", pb.UnregisterInstanceRequest(instance=iid))
