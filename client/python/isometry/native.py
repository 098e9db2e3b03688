"""The local fast path of :class:`isometry.Client`: the C++ client, wrapped
by the extension module ``isometry._native``, under the Python API.

A client opened with ``native=True`` (or ``native=None`` where the
extension is built; :func:`isometry.connect` does that) opens its session
over the daemon's local socket with the C++ client. Copies between
instances it registered go through the session's shared-memory submission
and completion rings, the way a C++ program's do, instead of a gRPC call
each (copies submitted with ``copy_future`` or ``acopy`` too, their
completions collected by :mod:`isometry.ring`); allocations are mapped into
this process (``Allocation.buffer``).
Instances over private ranges (``register_private``) are registered
natively too, so a waited copy between native instances that touches this
process's own ranges runs its hops here, at memcpy speed, and one out of
another process's published range into an own range reads it directly
(the C++ client's hop windows, direct and served reads; ``in_process=False``
leaves all private memory to the daemon's cma channel).
Everything else (introspection, datatypes, files, Active Access, copies
with a box, hops or a timeout) goes over gRPC with the same session token,
exactly as for the pure-Python local session.

:class:`NativePath` keeps the handles the extension returned, by daemon
id, so that the :class:`isometry.Client` methods, which take ids or small
records, find them again.
"""

import importlib
import threading
import weakref
from types import ModuleType
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

from . import isometry_pb2 as pb
from .errors import IsometryError
from .records import Instance, _id
from .ring import RingFutures

try:
    # By name: `from . import _native` in a package still importing reports
    # a missing module as a circular import.
    _native: Optional[ModuleType] = importlib.import_module(__package__ + "._native")
except ImportError as e:  # not built (no pybind11), or built for another Python
    _native = None
    _WHY = (
        f"the extension isometry._native is not available ({e}); build the tree with "
        "pybind11-dev and python3-pybind11 installed (scripts/install-deps.sh), and run "
        "Debian's /usr/bin/python3, which it is built for"
    )
else:
    _WHY = ""

__all__ = ["available", "why_unavailable", "NativePath"]


def available() -> bool:
    """Whether the extension loads in this interpreter."""
    return _native is not None


def why_unavailable() -> str:
    """Why it does not ("" when it does)."""
    return _WHY


class NativePath:
    """One native session and the handles made through it. Thread-safe."""

    def __init__(self, local_socket: str, name: str,
                 cancel_all: Callable[[], None] = lambda: None, in_process: bool = True,
                 spin_us: int = 50):
        if _native is None:
            raise IsometryError("FAILED_PRECONDITION", _WHY)
        try:
            self.session = _native.Session(local_socket, name, spin_us=spin_us,
                                           in_process=in_process)
        except IsometryError as e:
            if e.code != "UNAVAILABLE" or not e.message.startswith("cannot connect"):
                raise
            # As the pure-Python session words it (local.py): the C++
            # client says UNAVAILABLE with the errno's text.
            why = e.message.rpartition(": ")[2]
            code = "PERMISSION_DENIED" if why == "Permission denied" else "UNAVAILABLE"
            raise IsometryError(
                code,
                f"cannot connect to isometryd's local socket {local_socket} ({why}); is the "
                "daemon running, is this its [daemon] local_socket, and may this user open "
                "it (socket_mode, socket_group)?",
            ) from None
        self._lock = threading.Lock()
        self.ring = RingFutures(self.session, name)  # copies submitted without waiting
        self._cancel_all = cancel_all  # the session's transfers, before it closes
        self._allocations: Dict[int, Any] = {}  # id -> _native.Allocation
        self._instances: Dict[int, Any] = {}  # id -> _native.Instance
        # acopy's lookups and event loops, in the extension (session.acopy).
        # The ring is passed weakly: the session holds what it is given,
        # out of sight of Python's cycle collector.
        ring = weakref.ref(self.ring)

        def watch(loop: Any) -> None:
            r = ring()
            if r is not None:
                r.watch(loop)

        self.session.bind_async(self._instances, Instance, watch, pb.TransferInfo)
        # session.acopy and a waited copy as plain C functions: what
        # Client.acopy and Client.copy call first.
        self.acopy_first = self.session.acopy_function()
        self.copy_first = self.session.copy_function()

    @property
    def token(self) -> str:
        return str(self.session.session)

    @property
    def session_id(self) -> int:
        return int(self.session.session_id)

    @property
    def alive(self) -> bool:
        return bool(self.session.alive)

    def allocate(self, memory: str, nbytes: int) -> Any:
        a = self.session.allocate(memory, nbytes)
        with self._lock:
            self._allocations[a.id] = a
        return a

    def allocation(self, aid: int) -> Any:
        """The mapped allocation of this session with that id, or None."""
        with self._lock:
            return self._allocations.get(aid)

    def free(self, aid: int) -> bool:
        """Frees a native allocation (False: not one of them). BufferError,
        and nothing freed, while views of it are alive."""
        a = self.allocation(aid)
        if a is None:
            return False
        a.free()
        with self._lock:
            self._allocations.pop(aid, None)
        return True

    def register(self, aid: int, offset: int, box: Any, fields: Sequence[Any], layout: str) -> Any:
        """Registers bounds x fields in ``layout`` on a native allocation;
        None when ``aid`` is not one (the caller goes over gRPC)."""
        a = self.allocation(aid)
        if a is None:
            return None
        return self._keep(self.session.register(a, offset, *self._shape(box, fields), layout))

    def register_private(self, range_id: int, offset: int, box: Any, fields: Sequence[Any],
                         layout: str) -> Any:
        """Registers bounds x fields in ``layout`` on a private range (this
        session's own, or one another session of this uid published)."""
        return self._keep(self.session.register_private_instance(
            range_id, offset, *self._shape(box, fields), layout))

    @staticmethod
    def _shape(box: Any, fields: Sequence[Any]) -> Tuple[Any, Any, Any]:
        """A box and fields as the extension's register calls take them."""
        return list(box.lo), list(box.hi), [(f.name, f.size) for f in fields]

    def _keep(self, inst: Any) -> Any:
        """Files a native instance by id (instances())."""
        with self._lock:
            self._instances[inst.id] = inst
        return inst

    def counters(self) -> Dict[str, int]:
        """What this process moved itself so far (Client.native_counters)."""
        return {k: int(v) for k, v in self.session.counters().items()}

    def unregister(self, iid: int) -> bool:
        with self._lock:
            inst = self._instances.pop(iid, None)
        if inst is None:
            return False
        inst.unregister()
        return True

    def instances(self, src: int, dst: int) -> Optional[Tuple[Any, Any]]:
        """Both native instances, or None when either is not one. Every
        copy asks, so without the lock: a dict's get is atomic under the
        GIL, and the writers take the lock among themselves."""
        get = self._instances.get
        s, d = get(src), get(dst)
        return None if s is None or d is None else (s, d)

    def acopy(self, src: Any, dst: Any, priority: int, check: bool) -> Any:
        """Client.acopy through the rings: the future of a copy between two
        native instances, or None when either is not one. Client.acopy asks
        the extension directly first (``session.acopy`` takes Instance
        records and ints, and looks them up without the lock: see
        instances()); this takes the other records ``_id`` knows too."""
        return self.session.acopy(_id(src, "copy src"), _id(dst, "copy dst"), priority, check)

    def copy(self, src: Any, dst: Any, priority: int) -> Any:
        """Client.copy (waited) through the rings, as ``copy_first``
        answers it, or None when either end is not a native instance;
        ``copy_first`` takes Instance records and ints, this the other
        records ``_id`` knows too."""
        return self.copy_first(_id(src, "copy src"), _id(dst, "copy dst"), priority)

    def read(self, aid: int, offset: int, length: int) -> Optional[bytes]:
        """The bytes of a native allocation, from the mapping; None when
        ``aid`` is not one."""
        a = self.allocation(aid)
        if a is None:
            return None
        if offset < 0 or length < 0 or offset + length > a.nbytes:
            raise IsometryError(
                "OUT_OF_RANGE",
                f"bytes [{offset}, {offset}+{length}) lie outside allocation {aid} of "
                f"{a.nbytes} bytes",
            )
        with memoryview(a) as view:
            return bytes(view[offset : offset + length])

    def close(self) -> None:
        """Ends the session: the copies submitted through the rings without
        waiting are cancelled (``cancel_all``) and their futures settled
        first; the allocations stay mapped for the views that still hold
        them."""
        # Copies still in this process (the ring was full) never reach the
        # daemon: their futures fail CANCELLED at once.
        self.session.end_backlog()
        if self.session.ring_pending:
            self._cancel_all()  # else closing waits for them to run out
        self.session.close()
        self.ring.close()
        with self._lock:
            self._instances.clear()
            self._allocations.clear()
