"""Membership through etcd ([cluster.etcd]): daemons with no [[peer]] list
register under a lease and find each other in a real etcd (Debian's
etcd-server, started here on a free loopback port); a daemon that joins
later is used, one stopped cleanly leaves at once (its lease revoked), one
killed disappears after its lease's TTL, and a daemon with the wrong
secret, though registered, is still refused (etcd grants no trust).

Run with Debian's interpreter (see test_cluster.py):

    ISOMETRYD=build/daemon/isometryd ISOMETRY_PYTHONPATH=build/python \\
        /usr/bin/python3 -m unittest -v test_cluster_etcd   # in tests/cluster
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

ISOMETRYD = os.environ.get("ISOMETRYD", "")
ETCD = shutil.which("etcd") or ("/usr/bin/etcd" if os.path.exists("/usr/bin/etcd") else None)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SKIP = None
if not ISOMETRYD:
    SKIP = "ISOMETRYD is not set"
elif not ETCD:
    SKIP = "no etcd binary (apt-get install etcd-server)"
if SKIP:
    print(f"test_cluster_etcd: skipped: {SKIP}", file=sys.stderr)
else:
    import cluster_fixture as cf

TTL_S = 2
POLL_MS = 200
N = 3 << 20


class Etcd:
    """A single-member etcd in a temporary directory on loopback."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="iso-etcd-")
        self.port, peer = cf.free_port(), cf.free_port()
        client, peer_url = f"http://127.0.0.1:{self.port}", f"http://127.0.0.1:{peer}"
        self.log = open(os.path.join(self.dir, "etcd.log"), "w")
        self.proc = subprocess.Popen(
            [ETCD, "--name", "iso", "--data-dir", os.path.join(self.dir, "data"),
             "--listen-client-urls", client, "--advertise-client-urls", client,
             "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
             "--initial-cluster", f"iso={peer_url}"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 20
        while not self.healthy():
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("etcd did not start: " + open(self.log.name).read()[-2000:])
            time.sleep(0.1)

    @property
    def endpoint(self):
        return f"127.0.0.1:{self.port}"

    def healthy(self):
        import urllib.request

        try:
            with urllib.request.urlopen(f"http://{self.endpoint}/health", timeout=1) as r:
                return b"true" in r.read()
        except OSError:
            return False

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def peers_of(node):
    with node.client("etcd-test") as c:
        return {p.name: p for p in c.peers().peers}


@unittest.skipIf(SKIP, SKIP or "")
class EtcdMembershipTest(unittest.TestCase):
    """One etcd and up to seven daemons: a..e start together, f joins
    later, g has the wrong secret. The cases run in order (test_N_)."""

    @classmethod
    def setUpClass(cls):
        cls.etcd = Etcd()
        extra = (f'\n[cluster.etcd]\nendpoints = ["{cls.etcd.endpoint}"]\n'
                 f'prefix = "/iso-test/nodes/"\nlease_ttl_s = {TTL_S}\npoll_ms = {POLL_MS}\n')
        names = ["a", "b", "c", "d", "e", "f", "g"]
        secrets = [None] * 6 + ["a different secret of the wrong node"]
        cls.cluster = cf.Cluster(ISOMETRYD, names, static_peers=False, secrets=secrets,
                                 extra_cluster=extra, request="1MiB", pool="64MiB",
                                 timeout_ms=1500, keepalive_ms=200)
        for n in "abcde":
            cls.cluster[n].start()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()
        cls.etcd.stop()

    def node(self, name):
        return self.cluster[name]

    def wait_mesh(self, names, timeout=30):
        """Until each named node sees every other one up, data links open."""
        deadline = time.time() + timeout
        while True:
            missing = []
            for n in names:
                seen = peers_of(self.node(n))
                for m in names:
                    p = seen.get(m)
                    if m != n and (not p or p.state != "up" or p.data_out == 0 or p.data_in == 0):
                        missing.append(f"{n}->{m}:{p.state if p else 'unknown'}")
            if not missing:
                return
            if time.time() > deadline:
                self.fail(f"no full mesh: {missing}\n{self.node(names[0]).log_text()[-3000:]}")
            time.sleep(0.1)

    def copy(self, src, dst, n=N):
        info, data, got = self.cluster.copy_bytes(src, dst, n, timeout_ms=30000)
        return info, got == data

    def wait_gone(self, observer, name, timeout):
        deadline = time.time() + timeout
        while name in peers_of(self.node(observer)):
            if time.time() > deadline:
                self.fail(f"'{name}' still listed by '{observer}': {peers_of(self.node(observer))}")
            time.sleep(0.05)

    def test_1_five_daemons_discover_each_other_and_copy(self):
        self.wait_mesh("abcde")
        for p in peers_of(self.node("a")).values():
            self.assertEqual(p.source, "etcd", p.name)
        for src, dst in (("a", "b"), ("c", "d"), ("e", "a"), ("b", "e")):
            info, same = self.copy(src, dst)
            self.assertEqual(info.state, "done", f"{src}->{dst}: {info.message}")
            self.assertTrue(same, f"{src}->{dst}: the destination differs from the source")
        out = subprocess.run([os.environ.get("ISOCTL", "isoctl"), "--socket",
                              self.node("a").socket, "peers"], capture_output=True, text=True)
        if out.returncode == 0:
            self.assertIn("etcd", out.stdout)

    def test_2_a_daemon_that_joins_later_is_used(self):
        self.node("f").start()
        self.wait_mesh("abcdef")
        for src, dst in (("f", "a"), ("c", "f")):
            info, same = self.copy(src, dst)
            self.assertEqual(info.state, "done", f"{src}->{dst}: {info.message}")
            self.assertTrue(same, f"{src}->{dst}")

    def test_3_a_registered_daemon_with_the_wrong_secret_is_refused(self):
        self.node("g").start()
        deadline = time.time() + 2 + 3 * POLL_MS / 1000
        while time.time() < deadline:  # listed (etcd said where), never up
            g = peers_of(self.node("a")).get("g")
            if g:
                self.assertNotEqual(g.state, "up")
            time.sleep(0.1)
        self.assertIn("g", peers_of(self.node("a")))
        self.assertNotEqual(peers_of(self.node("a"))["g"].state, "up")
        # Refused on its secret, whichever side said hello first.
        self.assertRegex(self.node("a").log_text(),
                         "(peer hello from 'g'|hello to peer 'g').*(wrong secret|proof)")
        self.assertNotEqual(peers_of(self.node("g")).get("a", None) and
                            peers_of(self.node("g"))["a"].state, "up")
        self.node("g").stop()
        self.wait_gone("a", "g", timeout=3)

    def test_4_a_daemon_stopped_cleanly_leaves_at_once(self):
        t0 = time.time()
        self.assertEqual(self.node("f").stop(), 0)
        self.wait_gone("a", "f", timeout=TTL_S - 0.5)  # revoked: before the TTL
        self.wait_gone("c", "f", timeout=1)
        self.assertLess(time.time() - t0, TTL_S + 1)
        self.assertIn("peer 'f' left the cluster", self.node("a").log_text())

    def test_5_a_killed_daemon_is_marked_down_and_disappears_after_its_ttl(self):
        self.node("e").kill()
        deadline = time.time() + 5
        while True:
            p = peers_of(self.node("a")).get("e")
            if p is None or p.state != "up":
                break
            self.assertLess(time.time(), deadline, "a still sees e up")
            time.sleep(0.05)
        self.wait_gone("a", "e", timeout=TTL_S + 3)
        self.wait_gone("b", "e", timeout=1)
        self.assertIn("peer 'e' left the cluster (etcd lease expired", self.node("a").log_text())
        with self.node("a").client() as ca:
            src = ca.allocate("sys0", 4096)
            s = ca.register_instance(src, [4096], [("v", 1)], "F,x")
            with self.assertRaises(Exception) as e:
                d = ca.register_instance(1, [4096], [("v", 1)], "F,x", memory="e:sys0")
                ca.copy(s, d)
            self.assertIn("e", str(e.exception))
        # The rest of the cluster works on.
        info, same = self.copy("b", "a")
        self.assertEqual(info.state, "done", info.message)
        self.assertTrue(same)


def etcd_call(etcd, verb, body):
    """etcd's JSON gateway (/v3/kv/VERB); keys and values in base64."""
    import base64
    import json
    import urllib.request

    enc = {k: base64.b64encode(v.encode()).decode() if isinstance(v, str) else v
           for k, v in body.items()}
    req = urllib.request.Request(f"http://{etcd.endpoint}/v3/kv/{verb}",
                                 data=json.dumps(enc).encode())
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read())


def records(etcd, prefix):
    """{key: (value, lease)} under `prefix`."""
    import base64

    end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    out = etcd_call(etcd, "range", {"key": prefix, "range_end": end})
    return {base64.b64decode(kv["key"]).decode(): (base64.b64decode(kv.get("value", "")).decode(),
                                                   int(kv.get("lease", 0)))
            for kv in out.get("kvs", [])}


@unittest.skipIf(SKIP, SKIP or "")
class EtcdRecordsUnderAttackTest(unittest.TestCase):
    """Records overwritten or deleted behind the nodes' backs (issue #49,
    item 8): each node writes its own record again, and a record that does
    not authenticate never removes or replaces a peer that answers, nor
    fails a copy running to it. The cases run in order (test_N_)."""

    PREFIX = "/iso-attack/"

    @classmethod
    def setUpClass(cls):
        cls.etcd = Etcd()
        extra = (f'\nrate_limit = "16MiB"\n[cluster.etcd]\nendpoints = ["{cls.etcd.endpoint}"]\n'
                 f'prefix = "{cls.PREFIX}"\nlease_ttl_s = 5\npoll_ms = {POLL_MS}\n')
        cls.cluster = cf.Cluster(ISOMETRYD, ["a", "b", "c"], static_peers=False,
                                 extra_cluster=extra, request="1MiB", pool="128MiB",
                                 timeout_ms=1500, keepalive_ms=200)
        cls.cluster.start(wait_up=False)

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()
        cls.etcd.stop()

    wait_mesh = EtcdMembershipTest.wait_mesh

    def node(self, name):
        return self.cluster[name]

    def wait_records(self, want, timeout=5):
        """Until `want` ({key: value}) is what etcd holds, each under a lease."""
        deadline = time.time() + timeout
        while True:
            now = records(self.etcd, self.PREFIX)
            if {k: v for k, (v, lease) in now.items() if lease} == want:
                return
            if time.time() > deadline:
                self.fail(f"etcd holds {now}, not {want} under leases")
            time.sleep(0.05)

    def test_1_an_overwritten_record_leaves_the_peer_and_its_copy_working(self):
        self.wait_mesh("abc")
        original = {k: v for k, (v, _) in records(self.etcd, self.PREFIX).items()}
        self.assertEqual(len(original), 3, original)
        a, b = self.node("a"), self.node("b")
        n = 48 << 20  # 3 s at the rate limit: the overwrite lands mid-copy
        data = os.urandom(n)
        with b.client() as cb:
            dst = cb.allocate("sys0", n)
            cb.publish(dst)
        with a.client() as ca:
            src = ca.allocate("sys0", n)
            ca.write(src, 0, data)
            s = ca.register_instance(src, [n], [("v", 1)], "F,x")
            d = ca.register_instance(dst.id, [n], [("v", 1)], "F,x", memory="b:sys0")
            t = ca.copy(s, d, wait=False)
            time.sleep(0.5)
            # Over and over for a while: every node reads it (b writes its
            # own back within a poll). On a loaded machine a's poll can miss
            # a second of them: on, until a has read one (at most 10 s).
            seen = "peer 'b' has a record naming 127.0.0.1:1, but it answers"
            until, at_most = time.time() + 1.0, time.time() + 10.0
            while time.time() < until or (seen not in a.log_text() and time.time() < at_most):
                etcd_call(self.etcd, "put", {"key": self.PREFIX + "b",
                                             "value": "node=2\naddress=127.0.0.1:1\nidentity=\n"})
                time.sleep(0.02)
            info = ca.wait(t, timeout_ms=30000, check=False)
        self.assertEqual(info.state, "done", info.message)
        self.wait_records(original)  # b wrote its own back, under its lease
        with b.client() as cb:
            self.assertTrue(cb.read(dst, 0, n) == data, "the destination differs")
        for n_ in "ac":
            p = peers_of(self.node(n_))["b"]
            self.assertEqual(p.state, "up", f"{n_}: {p}")
            self.assertNotEqual(p.address, "127.0.0.1:1")
            self.assertNotIn("peer 'b' left the cluster", self.node(n_).log_text())
        self.assertIn(seen, a.log_text())
        self.assertIn(f"this node's record '{self.PREFIX}b' was changed", b.log_text())

    def test_2_a_deleted_prefix_comes_back_and_no_peer_leaves(self):
        original = {k: v for k, (v, _) in records(self.etcd, self.PREFIX).items()}
        end = self.PREFIX[:-1] + chr(ord(self.PREFIX[-1]) + 1)  # etcdctl del --prefix
        etcd_call(self.etcd, "deleterange", {"key": self.PREFIX, "range_end": end})
        self.wait_records(original)
        self.wait_mesh("abc", timeout=5)
        for n_ in "abc":
            self.assertNotIn("left the cluster", self.node(n_).log_text(), n_)
        info, data, got = self.cluster.copy_bytes("c", "a", 1 << 20, timeout_ms=30000)
        self.assertEqual(info.state, "done", info.message)
        self.assertTrue(got == data)

    def test_3_a_peer_that_stopped_still_leaves(self):
        # Its record gone and no answer: it leaves as before.
        self.assertEqual(self.node("c").stop(), 0)
        deadline = time.time() + 3
        while "c" in peers_of(self.node("a")):
            self.assertLess(time.time(), deadline, "a still lists c")
            time.sleep(0.05)


@unittest.skipIf(SKIP, SKIP or "")
class EtcdWithTlsTest(unittest.TestCase):
    """Mutual TLS, no secret: a and b (one CA) find each other in etcd and
    come up over TLS; c, registered too but with a certificate of another CA, is
    refused both ways."""

    def test_peers_from_etcd_authenticate_by_certificate(self):
        etcd = Etcd()
        extra = (f'\n[cluster.etcd]\nendpoints = ["{etcd.endpoint}"]\n'
                 f'lease_ttl_s = {TTL_S}\npoll_ms = {POLL_MS}\n')
        cluster = cf.Cluster(ISOMETRYD, ["a", "b", "c"], static_peers=False, secrets=[False] * 3,
                             tls=["ca", "ca", "other"], extra_cluster=extra, pool="64MiB")
        try:
            cluster.start(wait_up=False)
            deadline = time.time() + 30
            while True:
                seen = peers_of(cluster["a"])
                if seen.get("b") and seen["b"].state == "up" and seen["b"].data_in > 0:
                    break
                self.assertLess(time.time(), deadline, f"a never saw b up: {seen}")
                time.sleep(0.1)
            self.assertIn("TLS", seen["b"].data_link)
            time.sleep(1)
            for n in ("a", "b"):
                c = peers_of(cluster[n]).get("c")
                self.assertIsNotNone(c, f"{n} did not learn of c from etcd")
                self.assertNotEqual(c.state, "up", f"{n} accepted c")
            self.assertNotEqual(peers_of(cluster["c"])["a"].state, "up")
        finally:
            cluster.stop()
            etcd.stop()


if __name__ == "__main__":
    unittest.main()
