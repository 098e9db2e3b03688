"""RDMA where there is none: real daemons on loopback with [rdma].

Every machine: two daemons with `[rdma] enable = "auto"` still copy over
TCP, and their logs, `isoctl peers` and `isoctl status` say why RDMA was
not used; a daemon whose [rdma] names a device the machine lacks, with
enable = "on", refuses to start (and --check-config says the same).
Machines without RDMA: enable = "on" alone refuses to start with the
probe's reason (skipped, exit 77, where a device exists). The RDMA link
exchange (ConnectRdma) is a signed peer call: refused unsigned or with a
forged signature, and, signed, by a node without RDMA with its reason.

    ISOMETRYD=build/daemon/isometryd ISOCTL=build/tools/isoctl/isoctl \\
      ISOMETRY_PYTHONPATH=build/python /usr/bin/python3 -m unittest -v test_cluster_rdma
"""

import os
import re
import subprocess
import sys
import unittest

ISOMETRYD = os.environ.get("ISOMETRYD", "")
ISOCTL = os.environ.get("ISOCTL", "")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

if ISOMETRYD:
    import cluster_fixture as cf
    import grpc
    import isometry_peer_pb2 as pb
    from test_cluster_security import Impostor


def rdma_devices():
    """Names in /sys/class/infiniband (what the kernel offers to verbs)."""
    try:
        return sorted(os.listdir("/sys/class/infiniband"))
    except OSError:
        return []


def isoctl(node, *args):
    r = subprocess.run([ISOCTL, "--socket", node.socket, *args], capture_output=True, text=True,
                       timeout=30)
    if r.returncode != 0:
        raise AssertionError(f"isoctl {' '.join(args)}: {r.returncode}\n{r.stdout}{r.stderr}")
    return r.stdout


@unittest.skipUnless(ISOMETRYD, "ISOMETRYD is not set")
class AutoFallsBackToTcp(unittest.TestCase):
    def setUp(self):
        self.cluster = cf.Cluster(ISOMETRYD, ["a", "b"], request="256KiB",
                                  extra_channels='\n[rdma]\nenable = "auto"\nqps_per_peer = 2\n')
        self.cluster.start()

    def tearDown(self):
        self.cluster.stop_checked(self)

    def test_copy_runs_over_tcp_and_the_reason_is_shown(self):
        info, sent, got = self.cluster.copy_bytes("a", "b", 5 << 20)
        self.assertEqual(info.state, "done", info)
        self.assertEqual(got, sent)
        # The network hop ran on TCP: no RDMA link was attached.
        channels = [h.channel for h in info.hops]
        self.assertIn("tcp:b", channels, info)
        self.assertNotIn("rdma:b", channels, info)
        a = self.cluster["a"]
        log = a.log_text()
        # The probe's own line, and the choice.
        self.assertRegex(log, r"RDMA: (absent: )?.*GPU memory registration: nvidia-peermem")
        self.assertIn("RDMA for network hops:", log)
        self.assertRegex(log, r"peer 'b' is up: .*; network hops over TCP: ")
        channels = isoctl(a, "channels")
        self.assertIn("tcp:b", channels)
        # The planner's network edge: TCP (no RDMA link is connected).
        plan = isoctl(a, "plan", "sys0", "b:sys0", "--extents", "1024x1024", "--fields",
                      "a:4,b:8", "--src-layout", "F,x,y", "--dst-layout", "x,y,F")
        self.assertIn("tcp", plan)
        self.assertNotIn("rdma", plan)
        peers = isoctl(a, "peers")
        self.assertRegex(peers, r"network hops with b: TCP: ")
        status = isoctl(a, "status")
        self.assertRegex(status, r"rdma\s+(used|not used): ")
        if not rdma_devices():
            # This machine: no kernel RDMA at all. The reason is the probe's.
            self.assertIn("RDMA: absent: no RDMA devices: ibv_get_device_list", log)
            self.assertIn("RDMA for network hops: not used: no RDMA devices", log)
            self.assertRegex(peers, r"network hops with b: TCP: no RDMA device on this node "
                                    r"\(no RDMA devices: ibv_get_device_list")
            self.assertRegex(status, r"rdma\s+not used: no RDMA devices")
        # The daemon still serves: a second copy, the other way.
        info, sent, got = self.cluster.copy_bytes("b", "a", 1 << 20)
        self.assertEqual(info.state, "done", info)
        self.assertEqual(got, sent)


@unittest.skipUnless(ISOMETRYD, "ISOMETRYD is not set")
class ConnectRdmaIsSigned(unittest.TestCase):
    def setUp(self):
        # c is a configured peer that never runs: the test speaks as c.
        self.cluster = cf.Cluster(ISOMETRYD, ["a", "b", "c"],
                                  extra_channels='\n[rdma]\nenable = "auto"\n')
        self.cluster.start(wait_up=False)
        self.cluster["c"].stop()
        self.cluster.wait_up(nodes=[self.cluster["a"], self.cluster["b"]])

    def tearDown(self):
        self.cluster.stop_checked(self)

    def offer(self, rkey):
        qps = [pb.PeerRdmaQp(qpn=17 + i, psn=5, gid=bytes(range(16)), mtu_bytes=1024)
               for i in range(4)]
        ring = pb.PeerRdmaRing(addr=4096, rkey=rkey, slot_bytes=1 << 20, slots=32,
                               region_addr=4096, region_length=32 << 20)
        return pb.PeerRdmaLink(qps=qps, ring=ring, generation=0, nonce=os.urandom(16).hex().encode())

    def test_refused_unsigned_forged_and_without_rdma(self):
        a = self.cluster["a"]
        me = Impostor(a, "c", 3)
        try:
            offer = self.offer(9)
            with self.assertRaises(grpc.RpcError) as e:
                me.stub.ConnectRdma(offer, timeout=5)
            self.assertEqual(e.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
            self.assertIn("not signed", e.exception.details())
            # Signed for another ring's rkey, sent with this one.
            md = me.signed("ConnectRdma", self.offer(10))
            with self.assertRaises(grpc.RpcError) as e:
                me.stub.ConnectRdma(offer, metadata=md, timeout=5)
            self.assertEqual(e.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
            self.assertIn("MAC", e.exception.details())
            # Signed: accepted as c's call, refused for want of RDMA.
            with self.assertRaises(grpc.RpcError) as e:
                me.stub.ConnectRdma(offer, metadata=me.signed("ConnectRdma", offer), timeout=5)
            if not rdma_devices():
                self.assertEqual(e.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)
                self.assertIn("node 'a' does not use RDMA: no RDMA devices", e.exception.details())
        finally:
            me.close()
        # a still serves its peers.
        info, sent, got = self.cluster.copy_bytes("a", "b", 1 << 20)
        self.assertEqual(info.state, "done", info)
        self.assertEqual(got, sent)


@unittest.skipUnless(ISOMETRYD, "ISOMETRYD is not set")
class OnRefusesToStart(unittest.TestCase):
    def setUp(self):
        self.cluster = cf.Cluster(ISOMETRYD, ["a"], static_peers=False)
        self.node = self.cluster["a"]

    def tearDown(self):
        self.cluster.stop()

    def refused(self, rdma):
        """Writes `rdma` after the node's config; both --check-config and a
        start must fail naming rdma.enable. Returns their output."""
        with open(self.node.config) as f:
            base = f.read()
        with open(self.node.config, "w") as f:
            f.write(base + "\n[rdma]\n" + rdma)
        line = (base + "\n[rdma]\n").count("\n") + 1 + rdma.split("\n").index(
            next(l for l in rdma.split("\n") if l.startswith("enable")))
        outs = []
        for args in (["--check-config"], []):
            r = subprocess.run([ISOMETRYD, "--config", self.node.config, *args],
                               capture_output=True, text=True, timeout=30,
                               stdin=subprocess.DEVNULL)
            out = r.stdout + r.stderr
            self.assertNotEqual(r.returncode, 0, out)
            self.assertIn(f"{self.node.config}:{line}: key 'rdma.enable'", out)
            self.assertIn('is "on" but RDMA cannot be used: ', out)
            outs.append(out)
        return outs

    def test_ring_out_of_range(self):
        with open(self.node.config) as f:
            base = f.read()
        for rdma, key in (("ring_slots = 0\n", "rdma.ring_slots"),
                          ("slot_kib = 2\n", "rdma.slot_kib"),
                          ("ring_slots = 1024\nslot_kib = 1048576\n", "rdma.slot_kib")):
            with open(self.node.config, "w") as f:
                f.write(base + "\n[rdma]\n" + rdma)
            r = subprocess.run([ISOMETRYD, "--config", self.node.config, "--check-config"],
                               capture_output=True, text=True, timeout=30,
                               stdin=subprocess.DEVNULL)
            self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn(f"key '{key}'", r.stdout + r.stderr)

    def test_on_with_a_device_this_machine_lacks(self):
        for out in self.refused('enable = "on"\ndevices = ["isometry_no_such_dev"]\n'):
            self.assertIn("rdma.devices names isometry_no_such_dev, which this machine does not "
                          "have", out)

    def test_on_without_any_device(self):
        if rdma_devices():
            print(f"skipped: this machine has RDMA devices ({', '.join(rdma_devices())})",
                  file=sys.stderr)
            self.skipTest("this machine has RDMA devices")
        for out in self.refused('enable = "on"\n'):
            self.assertTrue(re.search(r"no RDMA devices: ibv_get_device_list", out), out)
            self.assertIn('set enable = "auto" to fall back to TCP', out)


if __name__ == "__main__":
    unittest.main()
