"""isometryd's local (shared-memory handshake) socket spoken by hand, for
tests that attack it: the framing of proto/local_wire.h (a little-endian
uint32 length, then a serialized LocalRequest / LocalResponse). File
descriptors the daemon passes along (a hello's control segment and
eventfds, an allocation's memfd) are closed on arrival.

Needs the ``isometry`` package (its generated isometry_pb2) on sys.path.
"""

import os
import socket
import struct

_FD_SPACE = socket.CMSG_SPACE(16 * 4)
RING_ABI_VERSION = 2  # proto/ring_abi.h kAbiVersion


def _pb():
    from isometry import isometry_pb2

    return isometry_pb2


class LocalConnection:
    def __init__(self, path, timeout_s=5):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout_s)
        self.sock.connect(path)
        self.fds_received = 0  # descriptors the daemon passed (closed on arrival)

    def send_raw(self, data):
        self.sock.sendall(data)

    def send(self, req):
        body = req.SerializeToString()
        self.sock.sendall(struct.pack("<I", len(body)) + body)

    def request(self, req):
        """Sends `req`; its LocalResponse, or None if the daemon closed."""
        self.send(req)
        return self.response()

    def response(self):
        """The next LocalResponse, or None if the daemon closed first."""
        head = self._exact(4)
        if head is None:
            return None
        (n,) = struct.unpack("<I", head)
        body = self._exact(n)
        if body is None:
            raise AssertionError("the daemon closed the local socket mid-frame")
        resp = _pb().LocalResponse()
        resp.ParseFromString(body)
        return resp

    def hello(self, name="raw"):
        pb = _pb()
        return self.request(
            pb.LocalRequest(tag=1, hello=pb.HelloRequest(abi_version=RING_ABI_VERSION,
                                                          client_name=name)))

    def closed_by_daemon(self, timeout_s):
        """True if the daemon closes the connection within timeout_s."""
        self.sock.settimeout(timeout_s)
        try:
            while self._recv(4096):
                pass
            return True
        except socket.timeout:
            return False
        except OSError:
            return True

    def _recv(self, n):
        data, ancdata, _, _ = self.sock.recvmsg(n, _FD_SPACE)
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                count = len(payload) // 4
                for fd in struct.unpack(f"{count}i", payload[: count * 4]):
                    os.close(fd)
                    self.fds_received += 1
        return data

    def _exact(self, n):
        out = b""
        while len(out) < n:
            chunk = self._recv(n - len(out))
            if not chunk:
                return None
            out += chunk
        return out

    def close(self):
        self.sock.close()
