"""Datatype copies and private ranges across nodes, between real isometryd
daemons on loopback (docs/guides/cluster.md, "Cluster: peers and cross-node copies").

Each end packs or unpacks itself by its canonical form; the form of the far
end is sent to its node once per (peer, form hash) and named by hash after.
Contents are checked byte for byte against MPI_Pack/MPI_Unpack semantics
written out here (a vector's blocks in order).

Run like test_cluster (ISOMETRYD, ISOMETRY_PYTHONPATH, /usr/bin/python3).
"""

import os
import sys
import unittest

ISOMETRYD = os.environ.get("ISOMETRYD", "")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

if ISOMETRYD:
    import cluster_fixture as cf
    from isometry import IsometryError, TransferError
    from isometry.datatype import DOUBLE

N = 64  # a 64 x 64 matrix of doubles
CMA = '\n[[channel]]\nname = "cma0"\nkind = "cma"\n'


def matrix():
    return bytes((i * 7 + 3) % 251 for i in range(N * N * 8))


def vector_blocks(origin, count, block, stride, size=8):
    """(offset, length) of each block of MPI_Type_vector(count, block, stride)
    of `size`-byte elements at `origin`, in pack order."""
    return [(origin + i * stride * size, block * size) for i in range(count)]


def pack(data, blocks):
    return b"".join(bytes(data[o:o + n]) for o, n in blocks)


def unpack(buf, packed, blocks):
    out, at = bytearray(buf), 0
    for o, n in blocks:
        out[o:o + n] = packed[at:at + n]
        at += n
    return bytes(out)


@unittest.skipUnless(ISOMETRYD, "ISOMETRYD is not set")
class DatatypesAcrossNodes(unittest.TestCase):
    def setUp(self):
        self.cluster = cf.Cluster(ISOMETRYD, ["a", "b"], request="64KiB", extra_channels=CMA)
        self.cluster.start()

    def tearDown(self):
        codes = self.cluster.stop()
        for name, code in codes.items():
            if code != 0:
                print(self.cluster[name].log_text()[-4000:], file=sys.stderr)
            self.assertEqual(code, 0, f"{name} exited with {code}")

    def published(self, client, data):
        a = client.allocate("sys0", len(data))
        client.write(a, 0, data)
        client.publish(a)
        return a

    def placed(self, client, data):
        a = client.allocate("sys0", len(data))
        client.write(a, 0, data)
        return a

    def test_datatype_and_layout_both_ways(self):
        data = matrix()
        col = DOUBLE.Create_vector(N, 1, N)
        with self.cluster["a"].client() as ca, self.cluster["b"].client() as cb:
            m = self.placed(ca, data)
            out = self.published(cb, bytes(N * 8))
            # Column 5 on a -> a 1-D layout instance on b.
            src = ca.register_instance(m, datatype=col, offset=5 * 8)
            remote = ca.register_instance(out.id, bounds=[N], fields=[("v", 8)], layout="F,x",
                                          memory="b:sys0")
            info = ca.copy(src, remote)
            self.assertEqual(info.state, "done")
            self.assertIn("b:sys0", info.path)
            want = pack(data, vector_blocks(5 * 8, N, 1, N))
            self.assertEqual(cb.read(out, 0, N * 8), want)
            # ... and back from b's layout into column 9 on a.
            back = ca.register_instance(m, datatype=col, offset=9 * 8)
            ca.copy(remote, back)
            self.assertEqual(ca.read(m, 0, len(data)),
                             unpack(data, want, vector_blocks(9 * 8, N, 1, N)))

    def test_datatype_to_datatype_both_ways(self):
        data = matrix()
        with self.cluster["a"].client() as ca, self.cluster["b"].client() as cb:
            m = self.placed(ca, data)
            far = bytes(range(256)) * 16  # 4 KiB on b, its own bytes kept between blocks
            out = self.published(cb, far)
            # Column 3 on a (64 doubles) -> 32 blocks of 2 doubles every 5 on b.
            src = ca.register_instance(m, datatype=DOUBLE.Create_vector(N, 1, N), offset=24)
            theirs = DOUBLE.Create_vector(32, 2, 5)
            remote = ca.register_instance(out.id, datatype=theirs, offset=40, memory="b:sys0")
            ca.copy(src, remote)
            packed = pack(data, vector_blocks(24, N, 1, N))
            b_blocks = vector_blocks(40, 32, 2, 5)
            got = cb.read(out, 0, len(far))
            self.assertEqual(got, unpack(far, packed, b_blocks))
            # b's datatype -> a's rows 10..11 as one contiguous run (a copy
            # whose source is on the other node).
            row = ca.register_instance(m, datatype=DOUBLE.Create_contiguous(N), offset=10 * N * 8)
            ca.copy(remote, row)
            self.assertEqual(ca.read(m, 10 * N * 8, N * 8), pack(got, b_blocks))
            # Started by b, with a's instance as the remote end.
            a_out = self.published(ca, bytes(N * 8))
            from_b = cb.register_instance(out, datatype=theirs, offset=40)
            to_a = cb.register_instance(a_out.id, datatype=DOUBLE.Create_contiguous(N),
                                        memory="a:sys0")
            cb.copy(from_b, to_a)
            self.assertEqual(ca.read(a_out, 0, N * 8), packed)

    def test_both_ends_on_the_other_node_forwarded(self):
        data = matrix()
        with self.cluster["a"].client() as ca, self.cluster["b"].client() as cb:
            m = self.published(cb, data)
            far = bytes(range(256)) * 16
            out = self.published(cb, far)
            # Column 3 of b's matrix -> 32 blocks of 2 doubles every 5, both
            # on b, asked by a: b runs it whole from the two forms.
            src = ca.register_instance(m.id, datatype=DOUBLE.Create_vector(N, 1, N), offset=24,
                                       memory="b:sys0")
            dst = ca.register_instance(out.id, datatype=DOUBLE.Create_vector(32, 2, 5),
                                       offset=40, memory="b:sys0")
            info = ca.copy(src, dst)
            self.assertNotIn("a:", info.path)
            want = unpack(far, pack(data, vector_blocks(24, N, 1, N)), vector_blocks(40, 32, 2, 5))
            self.assertEqual(cb.read(out, 0, len(far)), want)
            self.assertEqual(cb.transfer(info.id).remote_half,
                             f"forwarded copy of a:{info.id}, run whole on this node")
            # Ends that pack to different sizes: refused, nothing written.
            short = ca.register_instance(out.id, datatype=DOUBLE.Create_contiguous(N - 1),
                                         memory="b:sys0")
            with self.assertRaises((IsometryError, TransferError)):
                ca.copy(src, short)
            self.assertEqual(cb.read(out, 0, len(far)), want)

    def test_private_range_and_pool_memory_across_nodes(self):
        data = matrix()
        with self.cluster["a"].client(local=True) as ca, self.cluster["b"].client() as cb:
            mine = bytearray(data)
            rng = ca.register_private(mine)
            out = self.published(cb, bytes(len(data)))
            # A layout private range -> b's pool, then a datatype on each side.
            src = ca.register_instance(private_range=rng, bounds=[N * N], fields=[("v", 8)],
                                       layout="F,x")
            dst = ca.register_instance(out.id, bounds=[N * N], fields=[("v", 8)], layout="F,x",
                                       memory="b:sys0")
            info = ca.copy(src, dst)
            self.assertEqual(info.state, "done")
            self.assertIn("cma0", info.path)
            self.assertEqual(cb.read(out, 0, len(data)), data)
            cb.write(out, 0, bytes(reversed(data)))
            col = ca.register_instance(private_range=rng, datatype=DOUBLE.Create_vector(N, 1, N),
                                       offset=8)
            far = ca.register_instance(out.id, datatype=DOUBLE.Create_contiguous(N),
                                       memory="b:sys0")
            ca.copy(far, col)  # b's pool -> a's private column 1
            want = unpack(data, bytes(reversed(data))[:N * 8], vector_blocks(8, N, 1, N))
            self.assertEqual(bytes(mine), want)

    def status(self, node):
        with self.cluster[node].client("status") as c:
            return c.status()

    def test_forms_are_sent_once_and_again_to_a_restarted_peer(self):
        data = matrix()
        theirs = DOUBLE.Create_vector(16, 4, 7)
        with self.cluster["a"].client() as ca:
            m = self.placed(ca, data[:16 * 4 * 8])
            src = ca.register_instance(m, datatype=DOUBLE.Create_contiguous(64))
            for i in range(2):
                with self.cluster["b"].client() as cb:
                    out = self.published(cb, bytes(4096))
                    remote = ca.register_instance(out.id, datatype=theirs, memory="b:sys0")
                    ca.copy(src, remote)
                    self.assertEqual(cb.read(out, 0, 4096),
                                     unpack(bytes(4096), data[:512], vector_blocks(0, 16, 4, 7)))
            sa, sb = self.status("a"), self.status("b")
            self.assertEqual((sa.forms_sent, sa.forms_referred, sa.forms_resent), (1, 1, 0))
            self.assertEqual((sb.forms_received, sb.form_memo_hits), (1, 1))
            self.assertGreater(sb.form_memo_bytes, 0)
            # b restarts: its memo is gone; a names the form by hash, hears
            # that b does not know it and sends it once more.
            b = self.cluster["b"]
            self.assertEqual(b.stop(), 0)
            b.start()
            self.cluster.wait_up()
            with b.client() as cb:
                out = self.published(cb, bytes(4096))
                remote = ca.register_instance(out.id, datatype=theirs, memory="b:sys0")
                ca.copy(src, remote)
                self.assertEqual(cb.read(out, 0, 512 * 2)[:32], data[:32])
            sa, sb = self.status("a"), self.status("b")
            self.assertEqual(sa.forms_resent, 1)
            self.assertEqual(sa.forms_sent, 2)
            self.assertEqual((sb.forms_received, sb.form_memo_misses), (1, 1))

    def test_mismatched_and_out_of_range_ends_are_refused(self):
        with self.cluster["a"].client() as ca, self.cluster["b"].client() as cb:
            m = self.placed(ca, matrix())
            out = self.published(cb, bytes(1024))
            src = ca.register_instance(m, datatype=DOUBLE.Create_vector(N, 1, N))
            short = ca.register_instance(out.id, datatype=DOUBLE.Create_contiguous(N - 1),
                                         memory="b:sys0")
            with self.assertRaises(IsometryError) as cm:
                ca.copy(src, short)
            self.assertEqual(cm.exception.code, "INVALID_ARGUMENT")
            self.assertIn("packs to", cm.exception.message)
            # 64 doubles every 2: 1 KiB of data spread over 1016+ bytes past
            # offset 512 of b's 1 KiB allocation: b refuses it.
            wide = ca.register_instance(out.id, datatype=DOUBLE.Create_vector(N, 1, 2),
                                        offset=512, memory="b:sys0")
            with self.assertRaises((IsometryError, TransferError)) as cm:
                ca.copy(src, wide)
            self.assertIn("does not fit allocation", str(cm.exception))

    def test_isoctl_plans_a_datatype_across_nodes_and_shows_the_counters(self):
        import subprocess

        isoctl = os.environ.get("ISOCTL")
        if not isoctl:
            self.skipTest("ISOCTL is not set")
        a = self.cluster["a"]
        plan = subprocess.run([isoctl, "--socket", a.socket, "plan", "sys0", "b:sys0",
                               "--src-type", "vector(1024, 8, 16, byte)",
                               "--dst-type", "contiguous(8192, byte)"],
                              capture_output=True, text=True)
        self.assertEqual(plan.returncode, 0, plan.stderr)
        self.assertIn("b:sys0", plan.stdout)
        self.assertIn("8@0 x1024/16", plan.stdout)
        status = subprocess.run([isoctl, "--socket", a.socket, "status"], capture_output=True,
                                text=True, check=True).stdout
        self.assertIn("forms to peers", status)
        self.assertIn("forms from peers", status)


if __name__ == "__main__":
    unittest.main()
