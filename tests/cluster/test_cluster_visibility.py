"""What users see of cross-node copies on every node they touch.

Run with Debian's interpreter (in tests/cluster):

    ISOMETRYD=build/daemon/isometryd ISOMETRY_PYTHONPATH=build/python \\
        ISOCTL=build/tools/isoctl/isoctl /usr/bin/python3 -m unittest -v test_cluster_visibility

Checks: both halves of a copy listed on both nodes under one id (the
initiator's, node-qualified) with per-hop chunk progress, the remote half
marked as such and counted as active; the path and hops in Wait; ids that
two nodes never share; tcp:<peer> channel rows with their edges and real
bounds; refusals naming another node's files as "b:dsk0:<file>"; a peer
that stops answering reported as a timeout, with its address in the log.
"""

import os
import re
import signal
import subprocess
import sys
import time
import unittest

ISOMETRYD = os.environ.get("ISOMETRYD", "")
ISOCTL = os.environ.get("ISOCTL", "")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

if not ISOMETRYD:
    print("test_cluster_visibility: skipped: ISOMETRYD is not set", file=sys.stderr)
else:
    import cluster_fixture as cf
    from isometry import IsometryError

MiB = 1 << 20
NODE_SHIFT = 40  # transfer ids: the node in the top 24 bits


@unittest.skipUnless(ISOMETRYD, "ISOMETRYD is not set")
class Visibility(unittest.TestCase):
    # A capped link keeps a 48 MiB copy running for about a second.
    opts = {"request": "256KiB", "extra_cluster": 'rate_limit = "48MiB"', "timeout_ms": 1000}

    def setUp(self):
        self.cluster = cf.Cluster(ISOMETRYD, ["a", "b"], **self.opts)
        self.cluster.start()

    def tearDown(self):
        codes = self.cluster.stop()
        for name, code in codes.items():
            if code not in (0, -9):
                print(self.cluster[name].log_text()[-4000:], file=sys.stderr)
            self.assertIn(code, (0, -9), f"{name} exited with {code}")

    def isoctl(self, node, *args):
        r = subprocess.run([ISOCTL, "--socket", node.socket, *args], capture_output=True,
                           text=True, timeout=30)
        return r.stdout + r.stderr

    def instances_a_to_b(self, ca, cb, nbytes):
        """Instances of nbytes of random data on a and a published
        allocation on b, both registered by ca: (source, destination)."""
        src = ca.allocate("sys0", nbytes)
        ca.write(src, 0, os.urandom(nbytes))
        dst = cb.allocate("sys0", nbytes)
        cb.publish(dst)
        s = ca.register_instance(src, [nbytes // 8], [("v", 8)], "F,x")
        d = ca.register_instance(dst.id, [nbytes // 8], [("v", 8)], "F,x", memory="b:sys0")
        return s, d

    def start_copy(self, ca, cb, nbytes):
        return ca.copy(*self.instances_a_to_b(ca, cb, nbytes), wait=False)

    def test_both_halves_listed_on_both_nodes(self):
        a, b = self.cluster["a"], self.cluster["b"]
        with a.client() as ca, b.client() as cb:
            t = self.start_copy(ca, cb, 48 * MiB)
            tid = int(t)
            self.assertEqual(tid >> NODE_SHIFT, a.node_id, "the id carries the initiator's node")
            seen_a = seen_b = None
            deadline = time.time() + 10
            while time.time() < deadline and not (seen_a and seen_b):
                seen_a = seen_a or next((x for x in ca.transfers() if x.id == tid and x.hops), None)
                seen_b = seen_b or next((x for x in cb.transfers() if x.id == tid), None)
                if seen_b:
                    active_b = cb.status().transfers_active
                    isoctl_b = self.isoctl(b, "transfers") if ISOCTL else ""
                    one_b = cb.transfer(tid)
                time.sleep(0.02)
            self.assertIsNotNone(seen_a, "the initiator lists its copy with hops")
            self.assertIsNotNone(seen_b, "the other node lists its half under the same id")
            # The initiator: its own half's hops, the network one included.
            self.assertEqual(seen_a.state, "running")
            self.assertEqual(seen_a.remote_half, "")
            self.assertIn("tcp:b", [h.channel for h in seen_a.hops])
            self.assertGreater(seen_a.hops[0].chunks_total, 0)
            # The remote half: marked, with its hops and the whole path.
            self.assertEqual(seen_b.remote_half, f"remote half of a:{tid}, receiving from a")
            self.assertIn("a:sys0", seen_b.path)
            self.assertIn("b:sys0", seen_b.path)
            self.assertEqual([(h.channel, h.src_memory, h.dst_memory) for h in seen_b.hops],
                             [("tcp:a", "a:sys0", "b:sys0")])
            self.assertGreater(seen_b.hops[0].chunks_total, 0)
            self.assertGreaterEqual(active_b, 1, "the remote half counts as active")
            self.assertEqual(one_b.id, tid)
            self.assertEqual(one_b.remote_half, seen_b.remote_half)
            if ISOCTL:
                self.assertIn(f"remote half of a:{tid}", isoctl_b)
                self.assertIn("tcp:a", isoctl_b)
            info = ca.wait(t)
            self.assertEqual(info.state, "done")
            self.assertIn("a:sys0", info.path)
            self.assertIn("b:sys0", info.path)
            self.assertTrue(info.hops)
            self.assertTrue(all(h.chunks_done == h.chunks_total for h in info.hops))
            # Ended: gone from both lists, still found by id on both nodes.
            self.assertNotIn(tid, [x.id for x in cb.transfers()])
            self.assertEqual(cb.transfer(tid).state, "done")
            self.assertEqual(cb.status().transfers_active, 0)

    def test_each_copys_halves_found_by_its_id_among_many_ended_ones(self):
        # Each node keeps its ended halves a while and finds a copy's own
        # by its id (an index, not a scan of them all): the first, a middle
        # and the last of many small copies, on both nodes.
        a, b = self.cluster["a"], self.cluster["b"]
        with a.client() as ca, b.client() as cb:
            s, d = self.instances_a_to_b(ca, cb, 64 << 10)
            infos = [ca.copy(s, d) for _ in range(200)]
            self.assertEqual(len({int(i.id) for i in infos}), 200)
            for info in infos:
                self.assertEqual(info.state, "done")
                self.assertIn("tcp:b", [h.channel for h in info.hops], "its own half's hops")
            for info in (infos[0], infos[100], infos[-1]):
                tid = int(info.id)
                here, there = ca.transfer(tid), cb.transfer(tid)
                self.assertEqual((here.id, here.state), (tid, "done"))
                self.assertIn("tcp:b", [h.channel for h in here.hops])
                self.assertEqual((there.id, there.state), (tid, "done"))
                self.assertEqual(there.remote_half, f"remote half of a:{tid}, receiving from a")
                self.assertEqual([h.channel for h in there.hops], ["tcp:a"])

    def test_ids_unique_across_the_cluster(self):
        a, b = self.cluster["a"], self.cluster["b"]
        with a.client() as ca, b.client() as cb:
            ids = []
            for src_c, dst_c, dst_name in ((ca, cb, "b"), (cb, ca, "a")):
                src = src_c.allocate("sys0", MiB)
                dst = dst_c.allocate("sys0", MiB)
                dst_c.publish(dst)
                s = src_c.register_instance(src, [MiB // 8], [("v", 8)], "F,x")
                d = src_c.register_instance(dst.id, [MiB // 8], [("v", 8)], "F,x",
                                            memory=f"{dst_name}:sys0")
                ids.append(src_c.copy(s, d).id)
                # A local copy on the same node: an id of its own too.
                loc = src_c.allocate("sys0", MiB)
                ids.append(src_c.copy(s, src_c.register_instance(loc, [MiB // 8], [("v", 8)],
                                                                 "F,x")).id)
            self.assertEqual(len(set(ids)), len(ids), ids)
            self.assertEqual([i >> NODE_SHIFT for i in ids], [1, 1, 2, 2])

    def test_network_channel_rows(self):
        a = self.cluster["a"]
        with a.client() as ca:
            row = next(c for c in ca.channels() if c.name == "tcp:b")
            self.assertEqual(row.max_in_flight, 0, "credits bound it, not a request count")
            self.assertIn("4 connections", row.limits)
            self.assertIn("256 KiB chunks", row.limits)
            self.assertIn("48 MiB/s", row.limits)
            self.assertIn("sys0->b:sys0", list(row.edges))
            self.assertIn("b:sys0->sys0", list(row.edges))
        if ISOCTL:
            out = self.isoctl(a, "channels")
            self.assertNotIn("1048576", out)
            self.assertIn("sys0->b:sys0", out)
            self.assertIn("tcp:b: 4 connections", out)

    def test_refusals_name_the_other_nodes_files_as_users_do(self):
        a, b = self.cluster["a"], self.cluster["b"]
        with a.client() as ca:
            src = ca.allocate("sys0", MiB)
            loc = ca.register_instance(src, [MiB // 8], [("v", 8)], "F,x")
            f = ca.register_instance(0, [MiB // 8], [("v", 8)], "F,x", memory="b:dsk0",
                                     file="missing.bin")
            with self.assertRaises(IsometryError) as e:
                ca.copy(f, loc)
            self.assertIn("b:dsk0:missing.bin", str(e.exception))
            self.assertNotIn(b.dsk, str(e.exception))
            os.makedirs(os.path.join(b.dsk, "adir"))
            g = ca.register_instance(0, [MiB // 8], [("v", 8)], "F,x", memory="b:dsk0",
                                     file="adir")
            with self.assertRaises(IsometryError) as e:
                ca.copy(loc, g)
            self.assertIn("b:dsk0:adir", str(e.exception))
            self.assertNotIn(b.dir, str(e.exception))

    def test_a_silent_peer_is_a_timeout_in_users_names(self):
        a, b = self.cluster["a"], self.cluster["b"]
        with a.client() as ca, b.client() as cb:
            t = self.start_copy(ca, cb, 48 * MiB)
            time.sleep(0.2)
            os.kill(b.process.proc.pid, signal.SIGSTOP)
            down = re.compile(rf"peer 'b' \({re.escape(b.address)}\) is down")
            try:
                with self.assertRaises(IsometryError) as e:
                    ca.wait(t, timeout_ms=20000)
                # The data link's ping may fail the transfer before the
                # control plane's heartbeat gives up on b: b stays stopped
                # until a's log says so (b resumed earlier would answer it).
                deadline = time.monotonic() + 10
                while not down.search(a.log_text()) and time.monotonic() < deadline:
                    time.sleep(0.05)
            finally:
                os.kill(b.process.proc.pid, signal.SIGCONT)
            msg = str(e.exception)
            self.assertIn(f"transfer {int(t)}", msg)
            self.assertRegex(msg, r"did not answer|unreachable")
            self.assertNotIn("Broken pipe", msg)
            self.assertNotRegex(msg, r"memory \d+ of node")
            self.assertRegex(a.log_text(), down)


if __name__ == "__main__":
    unittest.main()
