"""Hellos recorded on the path and replayed, and data hellos whose options
an on-path proxy changes (issue #49, items 4 and 11), against real daemons
of a secret-only cluster:

- a's gRPC hello to b, recorded by a proxy in front of b, is refused by a
  third node c and by b after b restarted, and a's sessions and copies go
  on untouched; a fresh hello of a, relayed to c, is refused too;
- a proxy on the data path that strips the checksum option from the hello
  (or from its answer) fails the data link, so no corrupted chunk lands.

Run with Debian's interpreter (see test_cluster.py):

    ISOMETRYD=build/daemon/isometryd ISOMETRY_PYTHONPATH=build/python \\
        /usr/bin/python3 -m unittest -v test_cluster_replay   # in tests/cluster
"""

import os
import struct
import sys
import threading
import time
import unittest
from concurrent import futures

ISOMETRYD = os.environ.get("ISOMETRYD", "")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from data_proxy import DataPathProxy  # noqa: E402 (after the path)

if not ISOMETRYD:
    print("test_cluster_replay: skipped: ISOMETRYD is not set", file=sys.stderr)
else:
    import cluster_fixture as cf
    import grpc

PEER = "/isometry.peer.v4.IsometryPeer/"
HEADER = struct.Struct("<IBBHIIQQQQ")  # net/frame.h, FrameHeader
HELLO, DATA = 1, 2
CHECKSUM = 1  # kFlagChecksum


class PeerProxy:
    """A gRPC proxy of the peer service in front of node `target` (what an
    attacker on the path, or at an address a rogue etcd record names, can
    do): passes every call on as bytes, records the Hello requests, and
    sends hellos (and their challenges) to `divert` instead while it is set."""

    def __init__(self, target):
        self.target, self.divert = target, None
        self.hellos, self.diverted = [], []  # raw Hello requests; diverted ones' outcomes
        self.channels = {}
        self.lock = threading.Lock()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=32))
        self.server.add_generic_rpc_handlers((self,))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def call(self, address, method, request, metadata=(), timeout=10):
        with self.lock:
            if address not in self.channels:
                self.channels[address] = grpc.insecure_channel(address)
            ch = self.channels[address]
        return ch.unary_unary(PEER + method)(request, metadata=metadata, timeout=timeout)

    def service(self, details):  # grpc.GenericRpcHandler
        method = details.method[len(PEER):]

        def forward(request, context):
            hello = method in ("Hello", "HelloChallenge")
            divert = self.divert if hello else None
            if method == "Hello":
                self.hellos.append(request)
            md = [(k, v) for k, v in context.invocation_metadata() if k.startswith("isometry-")]
            try:
                answer = self.call((divert or self.target).address, method, request, md,
                                   timeout=min(context.time_remaining() or 600, 600))
                if divert and method == "Hello":
                    self.diverted.append("accepted")
                return answer
            except grpc.RpcError as e:
                if divert and method == "Hello":
                    self.diverted.append(f"{e.code().name}: {e.details()}")
                context.abort(e.code(), e.details())
        return grpc.unary_unary_rpc_method_handler(forward)

    def close(self):
        self.server.stop(0)
        for ch in self.channels.values():
            ch.close()


class DataProxy(DataPathProxy):
    """A TCP proxy on the data path to a node: clears the checksum flag of
    the HELLO that opens each connection ("request") or of the HELLO that
    accepts it ("answer"), and flips a byte of every DATA frame of chunk 2."""

    def __init__(self, strip):
        self.strip = strip
        self.data_frames = 0
        super().__init__()

    @staticmethod
    def recv(sock, n):
        out = b""
        while len(out) < n:
            got = sock.recv(n - len(out))
            if not got:
                raise ConnectionError("closed")
            out += got
        return out

    def pump(self, src, dst, outgoing):
        try:
            while True:
                fields = list(HEADER.unpack(self.recv(src, HEADER.size)))
                body = bytearray(self.recv(src, fields[8]))
                if fields[1] == HELLO and outgoing == (self.strip == "request"):
                    fields[2] &= ~CHECKSUM
                if outgoing and fields[1] == DATA:
                    self.data_frames += 1
                    if fields[7] == 2 and body:
                        body[0] ^= 0xFF
                dst.sendall(HEADER.pack(*fields) + bytes(body))
        except struct.error:
            pass


def peer_of(node, name):
    with node.client() as c:
        return {p.name: p for p in c.peers().peers}[name]


@unittest.skipUnless(ISOMETRYD, "ISOMETRYD is not set")
class HelloReplay(unittest.TestCase):
    """a, b and c; a reaches b through a recording proxy. b and c send at
    32 MiB/s, so a 64 MiB copy runs while the replays do."""

    def setUp(self):
        self.cluster = cf.Cluster(ISOMETRYD, ["a", "b", "c"], request="1MiB",
                                  extra_cluster='rate_limit = "32MiB"')
        a, b = self.cluster["a"], self.cluster["b"]
        self.proxy = PeerProxy(b)
        a.replace_in_config(f'address = "{b.address}"', f'address = "{self.proxy.address}"')
        self.cluster.start()

    def tearDown(self):
        self.cluster.stop_checked(self)
        self.proxy.close()

    def start_copy(self, src, dst, n=64 << 20):
        """A copy of n random bytes from src's sys0 to dst's, started on src:
        (client, transfer, data, destination)."""
        with dst.client() as cd:
            alloc = cd.allocate("sys0", n)
            cd.publish(alloc)
        c = src.client().__enter__()
        data = os.urandom(n)
        s_alloc = c.allocate("sys0", n)
        c.write(s_alloc, 0, data)
        s = c.register_instance(s_alloc, [n], [("v", 1)], "F,x")
        d = c.register_instance(alloc.id, [n], [("v", 1)], "F,x", memory=f"{dst.name}:sys0")
        return c, c.copy(s, d, wait=False), data, alloc

    def finish_copy(self, copy, dst):
        c, t, data, alloc = copy
        try:
            info = c.wait(t, timeout_ms=60000, check=False)
        finally:
            c.__exit__(None, None, None)
        if info.state != "done":
            for n in self.cluster.nodes:
                print(f"--- {n.name}'s log (tail) ---\n{n.log_text()[-4000:]}", file=sys.stderr)
        self.assertEqual(info.state, "done", info.message)
        with dst.client() as cd:
            self.assertEqual(cd.read(alloc, 0, len(data)), data)

    def replay(self, node, hello):
        """Sends a recorded hello to `node`; the refusal's details."""
        with self.assertRaises(grpc.RpcError, msg=f"{node.name} accepted a replayed hello") as e:
            self.proxy.call(node.address, "Hello", hello, timeout=5)
        self.assertEqual(e.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        return e.exception.details()

    def test_a_hello_replayed_to_a_third_node_or_relayed_to_it_is_refused(self):
        a, b, c = self.cluster["a"], self.cluster["b"], self.cluster["c"]
        self.assertTrue(self.proxy.hellos)
        recorded = self.proxy.hellos[-1]
        copies = [self.start_copy(c, a), self.start_copy(a, c)]
        time.sleep(0.3)
        # Recorded on its way to b: no good at c, nor at b a second time.
        self.assertIn("for node 'b'", self.replay(c, recorded))
        self.assertIn("replayed", self.replay(b, recorded))
        # a's sessions with c went on untouched: both copies end whole.
        self.finish_copy(copies[0], a)
        self.finish_copy(copies[1], c)
        # A fresh hello of a (restarted), relayed to c as a rogue "b" would
        # relay it: refused too, and a's own session with c stands.
        self.proxy.divert = c
        a.stop()
        a.start()
        deadline = time.time() + 15
        while not self.proxy.diverted and time.time() < deadline:
            time.sleep(0.05)
        self.proxy.divert = None
        self.assertTrue(self.proxy.diverted, "a sent no hello through the proxy")
        self.assertTrue(all(d.startswith("UNAUTHENTICATED") for d in self.proxy.diverted),
                        self.proxy.diverted)
        self.cluster.wait_up()
        self.finish_copy(self.start_copy(a, c, 4 << 20), c)
        self.finish_copy(self.start_copy(c, a, 4 << 20), a)
        log = c.log_text()
        self.assertRegex(log, r"peer hello from 'a' \(ipv4:127\.0\.0\.1:\d+\) refused")
        self.assertNotRegex(log, r"peer call .* \(claims 'a'\) refused")

    def test_a_hello_replayed_after_a_restart_is_refused(self):
        a, b = self.cluster["a"], self.cluster["b"]
        self.assertTrue(self.proxy.hellos)
        recorded = self.proxy.hellos[-1]
        b.stop()
        b.start()
        self.cluster.wait_up()
        copy = self.start_copy(a, b)
        time.sleep(0.3)
        self.assertIn("not made by this node since it started", self.replay(b, recorded))
        self.finish_copy(copy, b)
        self.assertEqual(peer_of(a, "b").state, "up")
        self.assertNotRegex(b.log_text(), r"peer call .* \(claims 'a'\) refused")


@unittest.skipUnless(ISOMETRYD, "ISOMETRYD is not set")
class StrippedChecksumRequest(unittest.TestCase):
    """a asks for checksums, b does not; b's welcome sends a's data
    connections through a proxy that strips the option."""

    strip = "request"

    def setUp(self):
        self.proxy = DataProxy(self.strip)
        self.cluster = cf.Cluster(ISOMETRYD, ["a", "b"], request="256KiB",
                                  node_opts=[{"checksum": True}, {"checksum": False}],
                                  env=[None, {"ISOMETRY_FAULT_DATA_ADDRESS": self.proxy.address}])
        self.cluster.start(wait_up=False)
        self.proxy.wait_for_target(self.cluster["b"])

    def tearDown(self):
        self.cluster.stop_checked(self)
        self.proxy.close()

    def test_the_link_fails_and_no_corrupt_chunk_lands(self):
        a, b = self.cluster["a"], self.cluster["b"]
        deadline = time.time() + 20
        while True:
            p = peer_of(a, "b")
            if p.state == "up" and p.data_out > 0 or time.time() > deadline:
                break
            if p.state == "refused" and "changed on the way" in p.last_error:
                break
            time.sleep(0.1)
        if p.state == "up":
            info, data, got = self.cluster.copy_bytes("a", "b", 4 << 20)
            self.assertFalse(info.state == "done" and got != data,
                             "a corrupted chunk ended 'done'")
            self.fail(f"the data link came up through the proxy: {p.data_link}")
        self.assertEqual(p.state, "refused", p.last_error)
        self.assertIn("changed on the way", p.last_error)
        self.assertEqual(self.proxy.data_frames, 0)
        self.assertIn("refused", a.log_text() if self.strip == "answer" else b.log_text())


class StrippedChecksumAnswer(StrippedChecksumRequest):
    """The same, the option stripped from b's answer."""

    strip = "answer"


if __name__ == "__main__":
    unittest.main()
