"""Active Access across nodes (issue #19): copies from another node into or
out of a watched allocation are active puts and gets at its node, between
real isometryd daemons on loopback.

Run with Debian's interpreter:

    ISOMETRYD=build/daemon/isometryd ISOMETRY_PYTHONPATH=build/python \\
        /usr/bin/python3 -m unittest -v test_cluster_active      # in tests/cluster

Node "a" (id 1) owns a published allocation with watched regions; clients
on node "b" (id 2) copy into and out of it. The built-in file_log handler
writes each access's log entry (active/log_abi.h's LogEntry, then its
data) into a file of a's DSK directory, which the tests read back.
"""

import os
import signal
import struct
import subprocess
import sys
import time
import unittest

ISOMETRYD = os.environ.get("ISOMETRYD", "")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

if not ISOMETRYD:
    print("test_cluster_active: skipped: ISOMETRYD is not set (point it at the isometryd "
          "binary)", file=sys.stderr)
else:
    import cluster_fixture as cf
    from isometry import IsometryError

PAGE = 4096
ENTRY = struct.Struct("<IHHQQQQQQQIIQ")  # active::LogEntry, 80 bytes
LOG_PUT, LOG_GET = 1, 2
APPLIED, HAS_DATA, NOTIFY = 1, 2, 4


HEADER = struct.Struct("<8sIIQ")  # active::FileLogHeader, 24 bytes


def read_log(path):
    """The entries of a file_log handler's file (after its header, checked):
    dicts with the data."""
    with open(path, "rb") as f:
        raw = f.read()
    magic, version, entry_bytes, _ = HEADER.unpack_from(raw, 0)
    assert (magic, version, entry_bytes) == (b"ISOFLOG\0", 1, ENTRY.size), (magic, version)
    out, at = [], HEADER.size
    names = ("record_bytes", "op", "flags", "seq", "offset", "size", "transfer", "region", "tag",
             "source_session", "source_node", "reserved", "data_bytes")
    while at + ENTRY.size <= len(raw):
        e = dict(zip(names, ENTRY.unpack_from(raw, at)))
        at += ENTRY.size
        e["data"] = raw[at:at + e["data_bytes"]]
        at += e["data_bytes"]
        out.append(e)
    return out


@unittest.skipUnless(ISOMETRYD, "ISOMETRYD is not set")
class RemoteActiveTest(unittest.TestCase):
    opts = {"request": "256KiB"}

    def setUp(self):
        self.cluster = cf.Cluster(ISOMETRYD, ["a", "b"], **self.opts)
        self.cluster.start()
        self.a, self.b = self.cluster["a"], self.cluster["b"]
        self.ca = self.a.client("owner")
        self.cb = self.b.client("remote")
        self.table = self.ca.allocate("sys0", 16 * PAGE)
        self.ca.write(self.table, 0, bytes(16 * PAGE))
        self.ca.publish(self.table)

    def tearDown(self):
        self.cb.close()
        self.ca.close()
        codes = self.cluster.stop()
        for name, code in codes.items():
            if code not in (0, -9):
                print(self.cluster[name].log_text()[-4000:], file=sys.stderr)
            self.assertIn(code, (0, -9), f"{name} exited with {code}")

    # ---- helpers ----

    def watch_log(self, page, action, name, pages=1):
        return self.ca.watch(self.table, page * PAGE, pages * PAGE, action=action,
                             handler="file_log", file_memory="dsk0", file=name, tag=page + 100)

    def remote(self, client, offset, n):
        """A 1-D byte instance of the table on node a, seen from `client`."""
        return client.register_instance(self.table.id, [n], [("v", 1)], "F,x", offset=offset,
                                        memory="a:sys0")

    def local_bytes(self, client, data):
        alloc = client.allocate("sys0", len(data))
        client.write(alloc, 0, data)
        return alloc, client.register_instance(alloc, [len(data)], [("v", 1)], "F,x")

    def remote_put(self, offset, data, wait=True, check=True):
        _, src = self.local_bytes(self.cb, data)
        return self.cb.copy(src, self.remote(self.cb, offset, len(data)), wait=wait, check=check)

    def log(self, name):
        return read_log(os.path.join(self.a.dsk, name))

    # ---- tests ----

    def test_remote_put_into_each_action(self):
        regions = {
            "apply_log": self.watch_log(0, "apply_log", "apply.log"),
            "log_only": self.watch_log(1, "log_only", "only.log"),
            "apply_notify": self.watch_log(2, "apply_notify", "notify.log"),
        }
        for page, (action, name) in enumerate(
                [("apply_log", "apply.log"), ("log_only", "only.log"),
                 ("apply_notify", "notify.log")]):
            with self.subTest(action=action):
                data = os.urandom(300)
                offset = page * PAGE + 100
                info = self.remote_put(offset, data)
                self.assertEqual(info.state, "done")
                got = self.ca.read(self.table, offset, len(data))
                self.assertEqual(got, bytes(300) if action == "log_only" else data)
                # The copy completed at b after a published its entries.
                entries = self.log(name)
                self.assertEqual(len(entries), 1)
                e = entries[0]
                self.assertEqual((e["op"], e["offset"], e["size"]), (LOG_PUT, offset, 300))
                self.assertEqual(e["region"], regions[action])
                self.assertEqual(e["tag"], page + 100)
                self.assertEqual(e["source_node"], self.b.node_id)
                self.assertEqual(e["source_session"], self.cb.session_id)
                self.assertEqual(e["transfer"], info.id)
                self.assertEqual(bool(e["flags"] & APPLIED), action != "log_only")
                self.assertEqual(bool(e["flags"] & NOTIFY), action == "apply_notify")
                # apply_notify entries say where, not what (the owner reads it)
                self.assertEqual(e["data"], b"" if action == "apply_notify" else data)

    def test_put_across_regions_is_split(self):
        self.watch_log(0, "apply_log", "apply.log")
        self.watch_log(1, "log_only", "only.log")
        data = os.urandom(2 * PAGE)
        self.remote_put(PAGE // 2, data)  # half of page 0, page 1, half of page 2
        entries = self.log("apply.log") + self.log("only.log")
        self.assertEqual([(e["offset"], e["size"]) for e in entries],
                         [(PAGE // 2, PAGE // 2), (PAGE, PAGE)])
        got = self.ca.read(self.table, 0, 3 * PAGE)
        self.assertEqual(got[PAGE // 2:PAGE], data[:PAGE // 2])
        self.assertEqual(got[PAGE:2 * PAGE], bytes(PAGE))  # log_only: not applied
        self.assertEqual(got[2 * PAGE:5 * PAGE // 2], data[3 * PAGE // 2:])  # unwatched

    def test_deny_leaves_the_target_unchanged(self):
        self.ca.watch(self.table, PAGE, PAGE, action="deny", handler="count")
        before = self.ca.read(self.table, 0, 3 * PAGE)
        with self.assertRaises(IsometryError) as e:
            self.remote_put(PAGE - 10, os.urandom(PAGE))
        self.assertEqual(e.exception.code, "PERMISSION_DENIED")
        self.assertIn("den", str(e.exception))
        self.assertEqual(self.ca.read(self.table, 0, 3 * PAGE), before)
        # A get of the denied range is refused too; its neighbour is served.
        out, dst = self.local_bytes(self.cb, bytes(16))
        with self.assertRaises(IsometryError) as e:
            self.cb.copy(self.remote(self.cb, PAGE + 8, 16), dst)
        self.assertEqual(e.exception.code, "PERMISSION_DENIED")
        self.cb.copy(self.remote(self.cb, 8, 16), dst)

    def test_remote_get_is_logged(self):
        self.watch_log(0, "apply_log", "get.log")
        data = os.urandom(512)
        self.ca.write(self.table, 64, data)
        out, dst = self.local_bytes(self.cb, bytes(512))
        info = self.cb.copy(self.remote(self.cb, 64, 512), dst)
        self.assertEqual(self.cb.read(out, 0, 512), data)
        entries = [e for e in self.log("get.log") if e["op"] == LOG_GET]
        self.assertEqual(len(entries), 1)
        e = entries[0]
        self.assertEqual((e["offset"], e["size"], e["transfer"]), (64, 512, info.id))
        self.assertEqual((e["source_node"], e["source_session"]),
                         (self.b.node_id, self.cb.session_id))

    def test_owner_side_cross_copies_are_active(self):
        """A copy started on a between its watched allocation and b's memory."""
        self.watch_log(0, "apply_log", "own.log")
        dst = self.cb.allocate("sys0", PAGE)
        self.cb.publish(dst)
        far = self.ca.register_instance(dst.id, [PAGE], [("v", 1)], "F,x", memory="b:sys0")
        mine = self.ca.register_instance(self.table, [PAGE], [("v", 1)], "F,x")
        self.ca.write(self.table, 0, b"x" * PAGE)
        got = self.ca.copy(mine, far)
        self.assertEqual(self.cb.read(dst, 0, PAGE), b"x" * PAGE)
        self.cb.write(dst, 0, b"y" * PAGE)
        put = self.ca.copy(far, mine)
        self.assertEqual(self.ca.read(self.table, 0, PAGE), b"y" * PAGE)
        entries = self.log("own.log")
        self.assertEqual([(e["op"], e["transfer"], e["source_node"], e["source_session"])
                          for e in entries],
                         [(LOG_GET, got.id, 0, self.ca.session_id),
                          (LOG_PUT, put.id, 0, self.ca.session_id)])

    def test_flush_after_remote_puts_covers_them(self):
        region = self.ca.watch(self.table, 0, 4 * PAGE, action="apply_log", handler="count")
        ids = [self.remote_put(i * 1000, os.urandom(100), wait=False) for i in range(8)]
        for t in ids:
            self.cb.wait(t)
        self.ca.active_flush(self.table)
        info = self.ca.watch_info(self.table)
        self.assertEqual(info.regions[0].region, region)
        self.assertEqual((info.regions[0].puts, info.regions[0].bytes_accessed), (8, 800))
        self.assertEqual(info.pending_copies, 0)

    def test_hashtable_insert_from_the_remote_node(self):
        self.ca.watch(self.table, 0, 4 * PAGE, action="log_only", handler="hash_insert",
                      value_bytes=8)
        records = b"".join(struct.pack("<QQ", k, k * 7) for k in (3, 41, 1000))
        self.remote_put(0, records)
        self.remote_put(0, struct.pack("<QQ", 5, 55))
        self.ca.active_flush(self.table)
        self.assertEqual(self.ca.watch_info(self.table).regions[0].inserts, 4)
        raw = self.ca.read(self.table, 0, 4 * PAGE)
        found = {}
        for at in range(0, 4 * PAGE - 23, 24):
            used, key, value = struct.unpack_from("<QQQ", raw, at)
            if used:
                found[key] = value
        self.assertEqual(found, {3: 21, 41: 287, 1000: 7000, 5: 55})

    def test_remote_client_killed_mid_way(self):
        """A client on b dies with large puts in flight: the watch goes on."""
        self.ca.watch(self.table, 0, 16 * PAGE, action="apply_log", handler="count")
        big = self.cb.allocate("sys0", 16 * PAGE)
        self.cb.publish(big)
        script = f"""
import sys, time
sys.path.insert(0, {os.environ.get('ISOMETRY_PYTHONPATH', '')!r})
import isometry
c = isometry.Client({self.b.socket!r}, name="doomed", connect_timeout=10)
src = c.register_instance({big.id}, [{16 * PAGE}], [("v", 1)], "F,x")
dst = c.register_instance({self.table.id}, [{16 * PAGE}], [("v", 1)], "F,x", memory="a:sys0")
for _ in range(64):
    c.copy(src, dst, wait=False)
print("started", flush=True)
time.sleep(60)
"""
        child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
        try:
            self.assertEqual(child.stdout.readline().strip(), b"started")
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
            child.stdout.close()
        # Every copy of the dead session ends (done or cancelled) and the
        # watch is free: a flush returns and a new remote put goes through.
        # Ended means on b too: a copy b had started but a had not yet
        # seen is not pending at a, and may still land (as "done").
        deadline = time.time() + 30
        while time.time() < deadline and (self.ca.watch_info(self.table).pending_copies
                                          or self.cb.status().transfers_active
                                          or self.ca.status().transfers_active):
            time.sleep(0.1)
        self.assertEqual(self.cb.status().transfers_active, 0)
        self.assertEqual(self.ca.watch_info(self.table).pending_copies, 0)
        self.ca.active_flush(self.table, timeout_ms=10000)
        data = os.urandom(64)
        self.remote_put(PAGE, data)
        self.assertEqual(self.ca.read(self.table, PAGE, 64), data)
        self.assertEqual(self.ca.watch_info(self.table).pending_copies, 0)


class EagerRemoteActiveTest(RemoteActiveTest):
    """The same with cluster.eager_put_size: small puts go whole in one
    PutBytes call, and act the same at a watched end."""
    opts = {"request": "256KiB", "extra_cluster": 'eager_put_size = "16KiB"'}

    def test_small_puts_go_in_one_call(self):
        self.watch_log(0, "apply_log", "eager.log")
        small = self.remote_put(8, b"s" * 64)
        self.assertIn("one call", small.path)
        big = self.remote_put(0, os.urandom(32 * 1024))
        self.assertNotIn("one call", big.path)
        self.assertEqual([(e["transfer"], e["source_node"]) for e in self.log("eager.log")],
                         [(small.id, self.b.node_id), (big.id, self.b.node_id)])
        # An allocation that is not published is refused as by a half.
        hidden = self.ca.allocate("sys0", PAGE)
        _, src = self.local_bytes(self.cb, b"h" * 16)
        dst = self.cb.register_instance(hidden.id, [16], [("v", 1)], "F,x", memory="a:sys0")
        with self.assertRaises(IsometryError) as e:
            self.cb.copy(src, dst)
        self.assertEqual(e.exception.code, "PERMISSION_DENIED")

    def test_a_cancelled_put_that_landed_is_done(self):
        """Issue #49, item 10: a put cancelled while its one call is in
        flight is reported by what happened at the peer, never "cancelled"
        over bytes that landed."""
        wrong, states = [], []
        for i in range(40):
            data = os.urandom(64)
            t = self.remote_put(i * 64, data, wait=False)
            self.cb.cancel(t)
            info = self.cb.wait(t, timeout_ms=10000, check=False)
            landed = self.ca.read(self.table, i * 64, 64) == data
            states.append(info.state)
            if landed and info.state != "done":
                wrong.append((i, info.state, info.message))
        self.assertEqual(wrong, [], f"landed but not done (states: {states})")


if __name__ == "__main__":
    unittest.main()
