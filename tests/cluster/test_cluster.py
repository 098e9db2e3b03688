"""Cross-node transfers between real isometryd daemons on loopback.

Run with Debian's interpreter:

    ISOMETRYD=build/daemon/isometryd ISOMETRY_PYTHONPATH=build/python \\
        /usr/bin/python3 -m unittest -v test_cluster      # in tests/cluster

Each test builds its own cluster (own ports, sockets, state and DSK
directories, one shared secret) and stops it with SIGTERM, requiring exit
status 0 from every daemon still running.
"""

import os
import re
import sys
import time
import unittest

ISOMETRYD = os.environ.get("ISOMETRYD", "")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

if not ISOMETRYD:
    print("test_cluster: skipped: ISOMETRYD is not set (point it at the isometryd binary)",
          file=sys.stderr)
else:
    import cluster_fixture as cf
    from isometry import IsometryError, TransferError

FIELDS = [("a", 4), ("b", 8), ("c", 2)]
ENTRY = 14
# Every layout family: AOS, SOA, transposed, hybrid (blocked fields), 2-D blocked.
LAYOUTS = ["F,x,y", "x,y,F", "F,y,x", "y,x,F", "x_in=8,F,x_out,y", "x_in=8,y_in=4,F,x_out,y_out"]


@unittest.skipUnless(ISOMETRYD, "ISOMETRYD is not set")
class ClusterTest(unittest.TestCase):
    names = ["a", "b"]
    opts = {"request": "256KiB"}

    def setUp(self):
        self.cluster = cf.Cluster(ISOMETRYD, self.names, **self.opts)
        self.cluster.start()

    def tearDown(self):
        self.cluster.stop_checked(self)

    # ---- helpers ----

    def published(self, client, nbytes, data=None):
        a = client.allocate("sys0", nbytes)
        if data is not None:
            client.write(a, 0, data)
        client.publish(a)
        return a

    def refused_too_small(self, ca, cb, src, bounds, fields):
        """A copy from `src` into a 1 KiB allocation b published: b refuses
        it with the sizes."""
        small = self.published(cb, 1024)
        d = ca.register_instance(small.id, bounds, fields, "F,x", memory="b:sys0")
        with self.assertRaises(TransferError) as e:
            ca.copy(src, d)
        self.assertIn("does not fit", e.exception.info.message)

    def assert_nothing_held(self, *clients):
        """No staging in use and no transfer running on the clients' nodes."""
        for c in clients:
            mems = {m.name: m for m in c.memories()}
            self.assertEqual(mems["sys0"].staging_used, 0)
            self.assertEqual(c.status().transfers_active, 0)

    def to_aos(self, client, alloc, bounds, layout, nbytes):
        """The instance's contents in AOS order, by a local copy on its node."""
        check = client.allocate("sys0", nbytes)
        src = client.register_instance(alloc, bounds, FIELDS, layout)
        dst = client.register_instance(check, bounds, FIELDS, "F,x,y")
        client.copy(src, dst)
        return client.read(check, 0, nbytes)


class LayoutFamilies(ClusterTest):
    def test_every_layout_family_crosses_both_ways(self):
        bounds = [1000, 301]  # 301 rows: edge chunks, not a multiple of any block
        nbytes = 1000 * 301 * ENTRY
        data = os.urandom(nbytes)
        a, b = self.cluster["a"], self.cluster["b"]
        with a.client() as ca, b.client() as cb:
            src = ca.allocate("sys0", nbytes)
            ca.write(src, 0, data)
            src_i = ca.register_instance(src, bounds, FIELDS, "F,x,y")
            for layout in LAYOUTS:
                with self.subTest(layout=layout):
                    size = 1024 * 304 * ENTRY  # room for blocked padding
                    dst = self.published(cb, size)
                    remote = ca.register_instance(dst.id, bounds, FIELDS, layout, memory="b:sys0")
                    info = ca.copy(src_i, remote)
                    self.assertEqual(info.state, "done")
                    self.assertIn("a:sys0", info.path)
                    self.assertIn("b:sys0", info.path)
                    self.assertEqual(self.to_aos(cb, dst, bounds, layout, nbytes), data)
                    # remote -> local, started by a
                    back = ca.allocate("sys0", nbytes)
                    back_i = ca.register_instance(back, bounds, FIELDS, "F,x,y")
                    ca.copy(remote, back_i)
                    self.assertEqual(ca.read(back, 0, nbytes), data)

    def test_sub_box_and_checksums_counted(self):
        bounds = [512, 512]
        nbytes = 512 * 512 * ENTRY
        data = os.urandom(nbytes)
        a, b = self.cluster["a"], self.cluster["b"]
        with a.client() as ca, b.client() as cb:
            src = ca.allocate("sys0", nbytes)
            ca.write(src, 0, data)
            dst = self.published(cb, nbytes, b"\0" * nbytes)
            s = ca.register_instance(src, bounds, FIELDS, "F,x,y")
            d = ca.register_instance(dst.id, bounds, FIELDS, "F,x,y", memory="b:sys0")
            ca.copy(s, d, box=[(100, 300), (7, 500)])
            got = cb.read(dst, 0, nbytes)
            row = 512 * ENTRY
            for y in (0, 6, 7, 250, 499, 500, 511):
                for x in (0, 99, 100, 299, 300):
                    off = y * row + x * ENTRY
                    inside = 100 <= x < 300 and 7 <= y < 500
                    want = data[off:off + ENTRY] if inside else b"\0" * ENTRY
                    self.assertEqual(got[off:off + ENTRY], want, (x, y))
            peers = {p.name: p for p in ca.peers().peers}
            self.assertEqual(peers["b"].state, "up")
            self.assertGreater(peers["b"].bytes_sent, 0)


class Tools(ClusterTest):
    def test_isoctl_peers_and_the_cpp_client(self):
        import json
        import subprocess

        a, b = self.cluster["a"], self.cluster["b"]
        isoctl = os.environ.get("ISOCTL")
        if isoctl:
            out = subprocess.run([isoctl, "--socket", a.socket, "peers"], capture_output=True,
                                 text=True, check=True).stdout
            self.assertIn("node 'a'", out)
            self.assertRegex(out, r"\bb\s+127\.0\.0\.1:\d+\s+up\b")
            self.assertRegex(out, r"\bLINK\b.*\n.*\bplain\b")
            js = json.loads(subprocess.run([isoctl, "--socket", a.socket, "--json", "peers"],
                                           capture_output=True, text=True, check=True).stdout)
            self.assertEqual(js["peers"][0]["state"], "up")
            # Plans across nodes by node name; the conversion stays off the network hop.
            plan = subprocess.run([isoctl, "--socket", a.socket, "plan", "sys0", "b:sys0",
                                   "--extents", "1024x1024", "--fields", "a:4,b:8",
                                   "--src-layout", "F,x,y", "--dst-layout", "x,y,F"],
                                  capture_output=True, text=True)
            self.assertEqual(plan.returncode, 0, plan.stderr)
            self.assertIn("a:sys0", plan.stdout)
            self.assertIn("b:sys0", plan.stdout)
            self.assertIn("tcp", plan.stdout)
            bad = subprocess.run([isoctl, "--socket", a.socket, "plan", "sys0", "zz:sys0",
                                  "--extents", "64"], capture_output=True, text=True)
            self.assertEqual(bad.returncode, 1)
            self.assertIn("no node 'zz'", bad.stderr)
        example = os.environ.get("ISOMETRY_CLUSTER_COPY")
        if example:
            with b.client() as cb:
                dst = self.published(cb, 100000 * 12)
                out = subprocess.run([example, os.path.join(a.dir, "local.sock"), "b:sys0",
                                      str(dst.id)], capture_output=True, text=True)
                self.assertEqual(out.returncode, 0, out.stderr)
                ids = cb.read(dst, 0, 100000 * 4)  # SOA: the ids come first
                self.assertEqual(ids[4 * 99999:], (99999).to_bytes(4, "little"))
                self.assertEqual(ids[:8], bytes([0, 0, 0, 0, 1, 0, 0, 0]))


class Disks(ClusterTest):
    def test_file_to_remote_memory_and_memory_to_remote_file(self):
        n = 3 << 20  # 3M entries of 1 field, 12 MiB: several chunks
        fields = [("v", 4)]
        data = os.urandom(n * 4)
        a, b = self.cluster["a"], self.cluster["b"]
        with open(os.path.join(a.dsk, "in.bin"), "wb") as f:
            f.write(data)
        with a.client() as ca, b.client() as cb:
            dst = self.published(cb, n * 4)
            src = ca.register_instance(0, [n], fields, "F,x", memory="dsk0", file="in.bin")
            d = ca.register_instance(dst.id, [n], fields, "F,x", memory="b:sys0")
            info = ca.copy(src, d)
            self.assertIn("a:dsk0", info.path)
            self.assertEqual(cb.read(dst, 0, n * 4), data)
            # a's part read the file into a ring of four 256 KiB chunks
            # (cluster.request_size): the network hop gives a slot back a
            # round trip after its chunk left, and two kept the disk waiting.
            peak = {m.name: m for m in ca.memories()}["sys0"].staging_peak
            self.assertEqual(peak, 4 * (256 << 10))

    def test_local_memory_to_remote_file(self):
        n = 1 << 20
        fields = [("v", 8)]
        data = os.urandom(n * 8)
        a, b = self.cluster["a"], self.cluster["b"]
        with a.client() as ca:
            src = ca.allocate("sys0", n * 8)
            ca.write(src, 0, data)
            s = ca.register_instance(src, [n], fields, "F,x")
            out = ca.register_instance(0, [n], fields, "F,x", memory="b:dsk0", file="out.bin")
            ca.copy(s, out)
        with open(os.path.join(b.dsk, "out.bin"), "rb") as f:
            self.assertEqual(f.read(), data)
        self.assertEqual([f for f in os.listdir(b.dsk) if f != "out.bin"], [])


class ThirdParty(ClusterTest):
    names = ["a", "b", "c"]

    def test_a_asks_b_to_send_to_c(self):
        n = 2 << 20
        fields = [("v", 4)]
        data = os.urandom(n * 4)
        a, b, c = self.cluster["a"], self.cluster["b"], self.cluster["c"]
        with a.client() as ca, b.client() as cb, c.client() as cc:
            src = self.published(cb, n * 4, data)
            dst = self.published(cc, n * 4)
            s = ca.register_instance(src.id, [n], fields, "F,x", memory="b:sys0")
            d = ca.register_instance(dst.id, [n], fields, "F,x", memory="c:sys0")
            info = ca.copy(s, d)
            self.assertEqual(info.state, "done")
            self.assertEqual(cc.read(dst, 0, n * 4), data)


class Forwarding(ClusterTest):
    """A copy whose ends are both on another node runs there, whole."""

    def test_both_ends_on_b_with_a_layout_change(self):
        bounds = [1000, 301]
        nbytes = 1000 * 301 * ENTRY
        data = os.urandom(nbytes)
        a, b = self.cluster["a"], self.cluster["b"]
        with a.client() as ca, b.client() as cb:
            src = self.published(cb, nbytes, data)
            for layout in ("x,y,F", "x_in=8,F,x_out,y"):
                with self.subTest(layout=layout):
                    dst = self.published(cb, 1024 * 304 * ENTRY)
                    s = ca.register_instance(src.id, bounds, FIELDS, "F,x,y", memory="b:sys0")
                    d = ca.register_instance(dst.id, bounds, FIELDS, layout, memory="b:sys0")
                    info = ca.copy(s, d)
                    self.assertEqual(info.state, "done")
                    self.assertIn("b:sys0", info.path)
                    self.assertNotIn("a:", info.path, "no byte crosses to a")
                    self.assertEqual(self.to_aos(cb, dst, bounds, layout, nbytes), data)
                    # b lists the forwarded copy under a's id, run whole there.
                    half = cb.transfer(info.id)
                    self.assertEqual(half.state, "done")
                    self.assertEqual(half.remote_half,
                                     f"forwarded copy of a:{info.id}, run whole on this node")
                    self.assertTrue(half.hops)
                    self.assertTrue(all(h.chunks_done == h.chunks_total for h in half.hops))
            peers = {p.name: p for p in ca.peers().peers}
            self.assertEqual(peers["b"].bytes_sent, 0, "the data never left b")
            for c in (ca, cb):
                self.assertEqual(c.status().transfers_active, 0)

    def test_file_to_memory_and_a_sub_box(self):
        n = 1 << 18
        fields = [("v", 8)]
        data = os.urandom(n * 8)
        a, b = self.cluster["a"], self.cluster["b"]
        with open(os.path.join(b.dsk, "in.bin"), "wb") as f:
            f.write(data)
        with a.client() as ca, b.client() as cb:
            dst = self.published(cb, n * 8, b"\0" * (n * 8))
            s = ca.register_instance(0, [n], fields, "F,x", memory="b:dsk0", file="in.bin")
            d = ca.register_instance(dst.id, [n], fields, "F,x", memory="b:sys0")
            self.assertEqual(ca.copy(s, d, box=[(1000, 9000)]).state, "done")
            got = cb.read(dst, 0, n * 8)
            self.assertEqual(got[1000 * 8:9000 * 8], data[1000 * 8:9000 * 8])
            self.assertEqual(got[:1000 * 8], b"\0" * (1000 * 8))
            self.assertEqual(got[9000 * 8:], b"\0" * ((n - 9000) * 8))
            # And back into a new file on b.
            out = ca.register_instance(0, [n], fields, "F,x", memory="b:dsk0", file="out.bin")
            self.assertEqual(ca.copy(d, out).state, "done")
        with open(os.path.join(b.dsk, "out.bin"), "rb") as f:
            self.assertEqual(f.read(), got)

    def test_refusals_change_nothing(self):
        n = 4096
        fields = [("v", 8)]
        a, b = self.cluster["a"], self.cluster["b"]
        with a.client() as ca, b.client() as cb:
            src = self.published(cb, n * 8, os.urandom(n * 8))
            private = cb.allocate("sys0", n * 8)
            before = cb.read(private, 0, n * 8)
            s = ca.register_instance(src.id, [n], fields, "F,x", memory="b:sys0")
            # b has not published the destination: b refuses, nothing written.
            d = ca.register_instance(private.id, [n], fields, "F,x", memory="b:sys0")
            with self.assertRaises(TransferError) as e:
                ca.copy(s, d)
            self.assertIn("not published", e.exception.info.message)
            self.assertEqual(cb.read(private, 0, n * 8), before)
            # Nor as the source.
            with self.assertRaises(TransferError) as e:
                ca.copy(d, s)
            self.assertIn("not published", e.exception.info.message)
            # Too small there: refused with the sizes.
            self.refused_too_small(ca, cb, s, [n], fields)
            self.assert_nothing_held(ca, cb)


class BadInput(ClusterTest):
    def test_refusals_change_nothing(self):
        a, b = self.cluster["a"], self.cluster["b"]
        with a.client() as ca, b.client() as cb:
            src = ca.allocate("sys0", 4096)
            s = ca.register_instance(src, [512], [("v", 8)], "F,x")
            with self.assertRaises(IsometryError) as e:
                ca.register_instance(1, [512], [("v", 8)], "F,x", memory="nowhere:sys0")
            self.assertEqual(e.exception.code, "NOT_FOUND")
            with self.assertRaises(IsometryError) as e:
                ca.register_instance(0, [512], [("v", 8)], "F,x", memory="b:dsk0", file="../x")
            self.assertEqual(e.exception.code, "PERMISSION_DENIED")
            # An allocation b has not published: b refuses its half.
            private = cb.allocate("sys0", 4096)
            d = ca.register_instance(private.id, [512], [("v", 8)], "F,x", memory="b:sys0")
            with self.assertRaises(TransferError) as e:
                ca.copy(s, d)
            self.assertIn("not published", e.exception.info.message)
            # Too small on b: refused there with the sizes.
            self.refused_too_small(ca, cb, s, [512], [("v", 8)])
            # Nothing leaked on either node; both still serve.
            self.assert_nothing_held(ca, cb)
            # The TCP port serves peers only: the client API is not there.
            import grpc
            import isometry_peer_pb2 as peer_pb
            import isometry_peer_pb2_grpc as peer_grpc
            from isometry import isometry_pb2 as pb, isometry_pb2_grpc as pb_grpc
            with grpc.insecure_channel(a.address) as ch:
                with self.assertRaises(grpc.RpcError) as e:
                    pb_grpc.IsometryStub(ch).GetStatus(pb.StatusRequest(), timeout=5)
                self.assertEqual(e.exception.code(), grpc.StatusCode.UNIMPLEMENTED)
                with self.assertRaises(grpc.RpcError) as e:  # no token
                    peer_grpc.IsometryPeerStub(ch).Ping(peer_pb.PeerPing(), timeout=5)
                self.assertEqual(e.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
            ok = self.published(cb, 4096)
            d = ca.register_instance(ok.id, [512], [("v", 8)], "F,x", memory="b:sys0")
            self.assertEqual(ca.copy(s, d).state, "done")


class Concurrency(ClusterTest):
    def test_both_directions_at_once_and_cancel_at_once(self):
        # Each direction has more chunks (128 of 256 KiB) than any per-peer
        # budget once had: pulls both ways at once must both finish.
        n = 32 << 20
        a, b = self.cluster["a"], self.cluster["b"]
        with a.client() as ca, b.client() as cb:
            da, db = os.urandom(n), os.urandom(n)
            pa = self.published(ca, n, da)
            pb = self.published(cb, n, db)
            into_a = ca.allocate("sys0", n)
            into_b = cb.allocate("sys0", n)
            ta = ca.copy(ca.register_instance(pb.id, [n], [("v", 1)], "F,x", memory="b:sys0"),
                         ca.register_instance(into_a, [n], [("v", 1)], "F,x"), wait=False)
            tb = cb.copy(cb.register_instance(pa.id, [n], [("v", 1)], "F,x", memory="a:sys0"),
                         cb.register_instance(into_b, [n], [("v", 1)], "F,x"), wait=False)
            self.assertEqual(ca.wait(ta, timeout_ms=60000).state, "done")
            self.assertEqual(cb.wait(tb, timeout_ms=60000).state, "done")
            self.assertEqual(ca.read(into_a, 0, n), db)
            self.assertEqual(cb.read(into_b, 0, n), da)
            # Cancelled the moment it is submitted: it ends, and frees all.
            s = ca.register_instance(pa, [n], [("v", 1)], "F,x")
            d = ca.register_instance(pb.id, [n], [("v", 1)], "F,x", memory="b:sys0")
            for _ in range(5):
                t = ca.copy(s, d, wait=False)
                ca.cancel(t)
                info = ca.wait(t, timeout_ms=20000, check=False)
                self.assertIn(info.state, ("cancelled", "done"))
            for c in (ca, cb):
                self.assertEqual({m.name: m for m in c.memories()}["sys0"].staging_used, 0)


class HelloReplay(ClusterTest):
    def test_a_recorded_hello_is_good_once(self):
        import hashlib
        import hmac
        import grpc
        import isometry_peer_pb2 as pb
        import isometry_peer_pb2_grpc as pb_grpc

        a = self.cluster["a"]
        secret = b"correct horse battery staple 42"  # the fixture's
        nonce, ms = os.urandom(16).hex(), int(time.time() * 1000)
        with grpc.insecure_channel(a.address) as ch:
            stub = pb_grpc.IsometryPeerStub(ch)
            challenge = stub.HelloChallenge(pb.PeerChallengeRequest(), timeout=5).challenge
            parts = [b"hello", b"b", b"2", b"4", nonce.encode(), str(ms).encode(), b"a", challenge]
            mac = hmac.new(secret, b"".join(p + b"\x1f" for p in parts), hashlib.sha256).digest()
            hello = pb.PeerHello(node_name="b", node=2, protocol_version=4, nonce=nonce.encode(),
                                 unix_ms=ms, to_node_name="a", challenge=challenge, mac=mac)
            welcome = stub.Hello(hello, timeout=5)
            self.assertEqual(welcome.node_name, "a")
            self.assertTrue(welcome.token)
            with self.assertRaises(grpc.RpcError) as e:
                stub.Hello(hello, timeout=5)
            self.assertEqual(e.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
            self.assertIn("replayed", e.exception.details())
            bad = pb.PeerHello(node_name="b", node=2, protocol_version=4, nonce=b"x" * 32,
                               unix_ms=ms, to_node_name="a", challenge=challenge, mac=mac)
            with self.assertRaises(grpc.RpcError) as e:
                stub.Hello(bad, timeout=5)
            self.assertEqual(e.exception.code(), grpc.StatusCode.UNAUTHENTICATED)


class Checksums(ClusterTest):
    opts = {"request": "256KiB", "checksum": True}

    def setUp(self):
        self.cluster = cf.Cluster(ISOMETRYD, self.names, env=[None, {"ISOMETRY_FAULT_CORRUPT_CHUNK": "2"}],
                                  **self.opts)
        self.cluster.start()

    def test_corrupted_chunk_is_caught(self):
        n = 1 << 20
        data = os.urandom(n * 4)
        a, b = self.cluster["a"], self.cluster["b"]
        with a.client() as ca, b.client() as cb:
            src = ca.allocate("sys0", n * 4)
            ca.write(src, 0, data)
            s = ca.register_instance(src, [n], [("v", 4)], "F,x")
            dst = self.published(cb, n * 4)
            d = ca.register_instance(dst.id, [n], [("v", 4)], "F,x", memory="b:sys0")
            with self.assertRaises(TransferError) as e:
                ca.copy(s, d)
            self.assertEqual(e.exception.info.code, 15)  # DATA_LOSS
            self.assertIn("checksum", e.exception.info.message)
            # One transfer, named by one id: the client's (issue #49, item 12).
            ids = set(re.findall(r"transfer (\d+)", e.exception.info.message))
            self.assertEqual(ids, {str(e.exception.info.id)}, e.exception.info.message)
            # Both nodes name both memories as users write them, node-
            # qualified (#11, #17), never "memory 0 of node 1".
            self.assertRegex(e.exception.info.message,
                             r"\(a:sys0 -> b:sys0 on channel .tcp:[ab].\)")
            self.assertNotIn(" of node ", e.exception.info.message)
            # b -> a is not corrupted (a injects nothing) and checks out.
            back = ca.allocate("sys0", n * 4)
            bi = ca.register_instance(back, [n], [("v", 4)], "F,x")
            cb.write(dst, 0, data)
            ca.copy(d, bi)
            self.assertEqual(ca.read(back, 0, n * 4), data)
            for c in (ca, cb):
                self.assertEqual({m.name: m for m in c.memories()}["sys0"].staging_used, 0)


class PeerFailure(ClusterTest):
    # b sends at 32 MiB/s, so a 64 MiB copy takes about 2 s.
    opts = {"request": "1MiB", "timeout_ms": 1500, "keepalive_ms": 200,
            "extra_cluster": 'rate_limit = "32MiB"'}

    def test_kill_mid_transfer_then_recover(self):
        n = 16 << 20
        a, b = self.cluster["a"], self.cluster["b"]
        with a.client() as ca:
            with b.client() as cb:
                src = self.published(cb, n * 4, b"\x17" * (n * 4))
                s = ca.register_instance(src.id, [n], [("v", 4)], "F,x", memory="b:sys0")
            dst = ca.allocate("sys0", n * 4)
            d = ca.register_instance(dst, [n], [("v", 4)], "F,x")
            t = ca.copy(s, d, wait=False)
            time.sleep(0.5)
            running = ca.transfer(t)
            self.assertEqual(running.state, "running")
            killed = time.time()
            b.kill()
            info = ca.wait(t, check=False)
            took = time.time() - killed
            self.assertEqual(info.state, "failed")
            self.assertEqual(info.code, 14, info.message)  # UNAVAILABLE
            self.assertLess(took, 1.5 + 1.0)  # within peer_timeout_ms (+ slack)
            mems = {m.name: m for m in ca.memories()}
            self.assertEqual(mems["sys0"].staging_used, 0)
            self.assertEqual(ca.status().transfers_active, 0)
            # The transfer fails on the first sign of b's end (a broken data
            # connection or AwaitHalf); a marks b down on its cluster worker
            # just after, so the state may lag the failure by a moment.
            deadline = time.time() + 1.5 + 1.0
            while True:
                state = {p.name: p.state for p in ca.peers().peers}["b"]
                if state in ("down", "connecting") or time.time() > deadline:
                    break
                time.sleep(0.02)
            self.assertIn(state, ("down", "connecting"))
            # a keeps serving its own clients meanwhile.
            here = ca.allocate("sys0", 1 << 20)
            ca.write(here, 0, b"\x42" * (1 << 20))
            h1 = ca.register_instance(here, [1 << 20], [("v", 1)], "F,x")
            h2 = ca.register_instance(dst, [1 << 20], [("v", 1)], "F,x")
            self.assertEqual(ca.copy(h1, h2).state, "done")
            self.assertEqual(ca.read(dst, 0, 16), b"\x42" * 16)
            # b comes back: new copies work without restarting a.
            b.start()
            self.cluster.wait_up()
            with b.client() as cb:
                data = os.urandom(1 << 20)
                src = self.published(cb, len(data), data)
                s = ca.register_instance(src.id, [len(data)], [("v", 1)], "F,x", memory="b:sys0")
                d = ca.register_instance(dst, [len(data)], [("v", 1)], "F,x")
                self.assertEqual(ca.copy(s, d).state, "done")
                self.assertEqual(ca.read(dst, 0, len(data)), data)


class Refusals(unittest.TestCase):
    def run_pair(self, secrets=None, env=None):
        cluster = cf.Cluster(ISOMETRYD, ["a", "b"], secrets=secrets, env=env)
        cluster.start(wait_up=False)
        try:
            deadline = time.time() + 10
            while time.time() < deadline:
                with cluster["a"].client() as ca:
                    p = {p.name: p for p in ca.peers().peers}["b"]
                if p.state == "refused":
                    break
                time.sleep(0.1)
            return p, {n.name: n.log_text() for n in cluster.nodes}
        finally:
            self.assertEqual(set(cluster.stop().values()), {0})

    @unittest.skipUnless(ISOMETRYD, "ISOMETRYD is not set")
    def test_wrong_secret_is_refused_and_logged(self):
        p, logs = self.run_pair(secrets=[None, "another secret entirely, 123"])
        self.assertEqual(p.state, "refused")
        self.assertIn("secret", p.last_error)
        self.assertIn("authentication failed", logs["b"])

    @unittest.skipUnless(ISOMETRYD, "ISOMETRYD is not set")
    def test_wrong_protocol_version_is_refused_and_logged(self):
        p, logs = self.run_pair(env=[{"ISOMETRY_FAULT_PEER_PROTOCOL": "99"}, None])
        self.assertEqual(p.state, "refused")
        self.assertIn("protocol version 99", p.last_error)
        self.assertIn("protocol version 99", logs["b"])

    @unittest.skipUnless(ISOMETRYD, "ISOMETRYD is not set")
    def test_a_peer_of_another_version_is_named_as_such(self):
        # Node b is a gRPC server that serves no IsometryPeer of this
        # version, as a daemon of an older release serves only its own
        # (isometry.v1.IsometryPeer before the peer protocol had a package).
        from concurrent import futures

        import grpc

        cluster = cf.Cluster(ISOMETRYD, ["a", "b"])
        other = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        other.add_insecure_port(cluster["b"].address)
        other.start()
        try:
            cluster["a"].start()
            deadline, p = time.time() + 15, None
            while time.time() < deadline:
                with cluster["a"].client() as ca:
                    p = {p.name: p for p in ca.peers().peers}["b"]
                if "another isometryd version" in p.last_error:
                    break
                time.sleep(0.1)
            self.assertEqual(p.state, "refused")
            self.assertIn("runs another isometryd version", p.last_error)
            self.assertIn("isometry.peer.v4.IsometryPeer", p.last_error)
        finally:
            other.stop(0)
            self.assertEqual(set(cluster.stop().values()), {0})


if __name__ == "__main__":
    unittest.main()
