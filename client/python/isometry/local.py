"""isometryd's local socket as the Python client speaks it, for private memory.

The local socket (``[daemon] local_socket``) is where a client proves which
process it is: the daemon reads the peer's pid, uid and gid with
SO_PEERCRED, which is why only a session opened there may register ranges
of its own process memory (the daemon reaches them with the ``cma``
channel). The token that ``Hello`` returns is valid over gRPC too, so
:class:`isometry.Client` opens its session here when given a local socket
and makes every other call over gRPC with this token.

The framing is proto/local_wire.h's: a little-endian uint32 length, then a
serialized ``LocalRequest`` / ``LocalResponse``. The daemon passes the
shared-memory ring's fds with the hello answer; this client does not use
the rings (copies go over gRPC) and closes them on arrival.

The socket is the session: closing it ends the session, its transfers and
its private ranges.
"""

import ctypes
import os
import socket
import struct
import threading
from typing import Any, Callable, List, Optional, Tuple

from . import isometry_pb2 as pb
from .errors import IsometryError, code_name

__all__ = ["DEFAULT_LOCAL_SOCKET", "PrivateRange"]

DEFAULT_LOCAL_SOCKET = "/run/isometry/isometry.sock"
RING_ABI_VERSION = 2  # proto/ring_abi.h kAbiVersion: checked by the daemon at hello
_FD_SPACE = socket.CMSG_SPACE(16 * 4)
# proto/local_wire.h kMaxFrameBytes: a longer announced frame is a broken stream.
_MAX_FRAME = 1 << 20


def pin_buffer(buf: Any) -> Tuple[memoryview, int, int]:
    """A memoryview that pins ``buf`` and its address and size in bytes.

    While the view lives, ``buf`` cannot be resized (a bytearray or numpy
    array refuses), closed (an mmap refuses) or freed, so the address the
    daemon holds stays this object's memory. Raises TypeError for objects
    without the buffer protocol and for read-only buffers (the daemon
    would write into them), ValueError for empty or non-contiguous ones.
    """
    try:
        view = memoryview(buf)
    except TypeError:
        raise TypeError(
            "register_private: expected a writable object supporting the buffer protocol "
            f"(bytearray, numpy array, mmap, ctypes array), got {type(buf).__name__}"
        ) from None
    if view.readonly:
        view.release()
        raise TypeError(
            f"register_private: the {type(buf).__name__} buffer is read-only; the daemon "
            "writes into private ranges, so pass a writable buffer (e.g. a bytearray)"
        )
    if view.nbytes == 0:
        view.release()
        raise ValueError("register_private: the buffer is empty")
    if not view.c_contiguous:
        view.release()
        raise ValueError(
            "register_private: the buffer is not C-contiguous (a strided slice?); register "
            "the whole array and describe the part with the instance's offset and layout"
        )
    # from_buffer holds its own export only while `anchor` lives; `view`
    # keeps the object pinned afterwards.
    anchor = ctypes.c_char.from_buffer(view)
    address = ctypes.addressof(anchor)
    del anchor
    return view, address, view.nbytes


def own_address_space() -> List[int]:
    """[/proc/self/mem opened for reading and writing, /proc/self/maps] as
    fds, or [] where they cannot be opened; the caller closes them."""
    fds: List[int] = []
    try:
        fds.append(os.open("/proc/self/mem", os.O_RDWR | os.O_CLOEXEC))
        fds.append(os.open("/proc/self/maps", os.O_RDONLY | os.O_CLOEXEC))
    except OSError:
        for fd in fds:
            os.close(fd)
        return []
    return fds


class LocalSession:
    """One session over the local socket: hello, then requests answered in
    order. Thread-safe (one request at a time)."""

    def __init__(self, path: str, name: str, timeout: Optional[float]):
        self.path = path
        self._lock = threading.Lock()
        self._tag = 1
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        self._sock.settimeout(timeout)
        try:
            self._sock.connect(path)
        except OSError as e:
            self._sock.close()
            code = "PERMISSION_DENIED" if isinstance(e, PermissionError) else "UNAVAILABLE"
            raise IsometryError(
                code,
                f"cannot connect to isometryd's local socket {path} ({os.strerror(e.errno)}); "
                "is the daemon running, is this its [daemon] local_socket, and may this "
                "user open it (socket_mode, socket_group)?",
            ) from None
        try:
            hello = self.request(
                hello=pb.HelloRequest(abi_version=RING_ABI_VERSION, client_name=name)
            ).hello
        except BaseException:
            self._sock.close()
            raise
        self.session = hello.session
        self.session_id = hello.session_id

    def request(self, _fds: Tuple[int, ...] = (), **body: Any) -> "pb.LocalResponse":
        """Sends one LocalRequest with ``body`` (one field of its oneof) and
        returns the answer; IsometryError with the daemon's code when it
        refuses, UNAVAILABLE when the socket fails. ``_fds`` go with the
        frame (SCM_RIGHTS)."""
        with self._lock:
            if self._sock.fileno() < 0:
                raise IsometryError("FAILED_PRECONDITION", "the local session is closed")
            tag = self._tag
            self._tag += 1
            frame = pb.LocalRequest(tag=tag, **body).SerializeToString()
            try:
                data = struct.pack("<I", len(frame)) + frame
                sent = socket.send_fds(self._sock, [data], list(_fds)) if _fds else 0
                self._sock.sendall(data[sent:])
                resp = self._response()
            except OSError as e:
                raise IsometryError(
                    "UNAVAILABLE", f"isometryd's local socket {self.path} failed: {e}"
                ) from None
        if resp is None:
            raise IsometryError(
                "UNAVAILABLE",
                f"isometryd closed the local socket {self.path} (it refused this client or "
                "is shutting down; its log says why)",
            )
        if resp.code != 0:
            # Tag 0: the daemon's refusal at accept (too many sessions), sent
            # before it read anything.
            raise IsometryError(code_name(resp.code), resp.message)
        if resp.tag != tag:
            raise IsometryError(
                "INTERNAL", f"local socket answered request {resp.tag}, expected {tag}"
            )
        return resp

    def _response(self) -> Optional["pb.LocalResponse"]:
        head = self._exact(4)
        if head is None:
            return None
        (n,) = struct.unpack("<I", head)
        if n > _MAX_FRAME:
            raise OSError(f"a frame of {n} bytes announced")
        body = self._exact(n)
        if body is None:
            raise OSError("the daemon closed the socket mid-frame")
        resp = pb.LocalResponse()
        resp.ParseFromString(body)
        return resp

    def _exact(self, n: int) -> Optional[bytes]:
        out = b""
        while len(out) < n:
            data, ancdata, _, _ = self._sock.recvmsg(n - len(out), _FD_SPACE)
            for level, kind, payload in ancdata:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    count = len(payload) // 4
                    for fd in struct.unpack(f"{count}i", payload[: count * 4]):
                        os.close(fd)
            if not data:
                return None
            out += data
        return out

    @property
    def alive(self) -> bool:
        """False once either side closed the socket."""
        with self._lock:
            if self._sock.fileno() < 0:
                return False
            timeout = self._sock.gettimeout()
            # A socket with a timeout would wait for data despite MSG_DONTWAIT.
            self._sock.setblocking(False)
            try:
                return self._sock.recv(1, socket.MSG_PEEK) != b""
            except BlockingIOError:
                return True
            except OSError:
                return False
            finally:
                self._sock.settimeout(timeout)

    def close(self) -> None:
        with self._lock:
            self._sock.close()


class PrivateRange:
    """A range of this process's own memory registered with the daemon by
    :meth:`isometry.Client.register_private`.

    Instances over it (``register_instance(private_range=r, ...)``) are
    copied by the daemon with CMA straight into and out of the buffer: no
    pool allocation, no extra copy. The range lives until its client's
    session ends; until then the client keeps a reference that pins the
    buffer (it cannot be resized, closed or freed).

    Attributes:
        id: the daemon's range id (what another session of this uid passes
            as ``private_range`` once the range is published).
        address: the buffer's first byte in this process.
        nbytes: its size in bytes.
        buffer: the object that was registered.
        published: whether :meth:`publish` was called.
    """

    def __init__(self, publish: Callable[[], None], range_id: int, buffer: Any,
                 view: memoryview, address: int) -> None:
        self._publish = publish  # tells the session that made it (pure-Python or native)
        self._view = view
        self.id = range_id
        self.address = address
        self.nbytes = view.nbytes
        self.buffer = buffer
        self.published = False

    def publish(self) -> None:
        """Lets other sessions of this uid register instances over the
        range (never a session of another uid: to it the range does not
        exist). Raises IsometryError (e.g. ``UNAVAILABLE`` once the session
        has ended)."""
        self._publish()
        self.published = True

    def _release(self) -> None:
        try:
            self._view.release()
        except BufferError:  # re-exported by someone: the GC releases it later
            pass

    def __int__(self) -> int:
        return self.id

    def __repr__(self) -> str:
        return (
            f"PrivateRange(id={self.id}, address={self.address:#x}, nbytes={self.nbytes}, "
            f"buffer={type(self.buffer).__name__}, published={self.published})"
        )
