"""Active Access from the Python client (issue #19), over gRPC against a
real isometryd: a hashtable insert by a plain write into a watched region,
counters, deny, dirty pages and flush. Run like test_python_client
(ISOMETRYD, ISOMETRY_PYTHONPATH; Debian's /usr/bin/python3).
"""

import os
import shutil
import struct
import sys
import unittest

import test_python_client as ref  # its tests are not collected here
from test_python_client import ISOMETRYD, SKIP_REASON

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyfixture"))
from isometryd_process import IsometrydProcess  # noqa: E402

if ref._IMPORT_ERROR is None:
    import isometry
    from isometry import IsometryError

CONFIG = """
[[memory]]
name = "sys0"
kind = "SYS"
pool = "64MiB"
client_quota = "32MiB"
staging = "64MiB"

[[memory]]
name = "dsk0"
kind = "DSK"
directory = "{dir}/dsk"

[[channel]]
name = "memcpy0"
kind = "memcpy"
"""

PAGE = 4096


@unittest.skipUnless(ISOMETRYD, SKIP_REASON)
class ActiveAccessTest(unittest.TestCase):
    def setUp(self):
        if ref._IMPORT_ERROR is not None:
            self.fail(f"cannot import the isometry package ({ref._IMPORT_ERROR})")
        try:
            self.dir, self.daemon = IsometrydProcess.started_in_temp_dir(
                ISOMETRYD, CONFIG, "isometry-pyaa-", dirs=["dsk"], daemon=dict(log_level="warn"))
        except AssertionError as e:
            self.fail(str(e))
        self.owner = isometry.Client(self.daemon.socket, name="owner", connect_timeout=10)
        self.other = isometry.Client(self.daemon.socket, name="other", connect_timeout=10)
        self.table = self.owner.allocate("sys0", 8 * PAGE)
        self.owner.write(self.table, 0, bytes(8 * PAGE))
        self.owner.publish(self.table)

    def tearDown(self):
        self.other.close()
        self.owner.close()
        rc = self.daemon.stop(timeout_s=30)
        self.daemon.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        self.assertEqual(rc, 0)

    def test_hashtable_insert_in_one_write(self):
        region = self.owner.watch(self.table, 0, 4 * PAGE, action="log_only",
                                  handler="hash_insert", value_bytes=8)
        records = b"".join(struct.pack("<QQ", k, k * 10) for k in (5, 17, 99))
        self.other.write(self.table, 0, records)  # one operation inserts three keys
        self.other.active_flush(self.table)
        info = self.owner.watch_info(self.table)
        self.assertEqual(info.regions[0].region, region)
        self.assertEqual(info.regions[0].inserts, 3)
        raw = self.owner.read(self.table, 0, 4 * PAGE)
        found = {}
        for at in range(0, 4 * PAGE - 23, 24):
            used, key, value = struct.unpack_from("<QQQ", raw, at)
            if used:
                found[key] = value
        self.assertEqual(found, {5: 50, 17: 170, 99: 990})

    def test_counters_deny_and_dirty_pages(self):
        self.owner.watch(self.table, 0, PAGE, action="apply_log", handler="count")
        self.owner.watch(self.table, PAGE, PAGE, action="deny", handler="count")
        self.owner.watch(self.table, 2 * PAGE, 4 * PAGE, action="apply_log", handler="dirty_pages")
        self.other.write(self.table, 10, b"abc")
        self.assertEqual(self.other.read(self.table, 10, 3), b"abc")
        with self.assertRaises(IsometryError) as e:
            self.other.write(self.table, PAGE - 2, b"xxxx")
        self.assertEqual(e.exception.code, "PERMISSION_DENIED")
        self.assertEqual(self.owner.read(self.table, PAGE - 2, 4), b"\0\0\0\0")
        self.other.write(self.table, 3 * PAGE + 5, b"dirty")
        info = self.owner.watch_info(self.table)
        self.assertEqual((info.regions[0].puts, info.regions[0].gets), (1, 1))
        self.assertEqual(self.owner.dirty_pages(self.table, clear=True), [3])
        self.assertEqual(self.owner.dirty_pages(self.table), [])
        self.assertEqual(self.owner.status().watched_regions, 3)

    def test_only_the_owner_watches(self):
        with self.assertRaises(IsometryError) as e:
            self.other.watch(self.table, 0, PAGE)
        self.assertEqual(e.exception.code, "PERMISSION_DENIED")
        with self.assertRaises(IsometryError) as e:
            self.owner.watch(self.table, 100, PAGE)
        self.assertEqual(e.exception.code, "INVALID_ARGUMENT")

    def test_checkpoint_delta_chain_restore_and_client_pages(self):
        self.owner.watch(self.table, 0, 8 * PAGE, action="apply_log", handler="dirty_pages")
        self.assertTrue(self.owner.checkpoint(self.table, "dsk0", "t.img").full)
        self.other.write(self.table, 3 * PAGE + 10, b"x" * 20)  # tracked by the daemon
        self.owner.write(self.table, 5 * PAGE, b"y" * 8)         # listed by the client
        r = self.owner.checkpoint(self.table, "dsk0", "t.img", client_pages=[(5, 1)])
        self.assertFalse(r.full)
        self.assertEqual((r.pages_written, r.deltas), (2, 1))
        fresh = self.owner.allocate("sys0", 8 * PAGE)
        back = self.owner.restore(fresh, "dsk0", "t.img")
        self.assertEqual((back.image_bytes, back.deltas), (8 * PAGE, 1))
        self.assertEqual(self.owner.read(fresh, 0, 8 * PAGE),
                         self.owner.read(self.table, 0, 8 * PAGE))
        with self.assertRaises(IsometryError) as e:
            self.owner.checkpoint(self.table, "dsk0", "t.img", client_pages=[(8, 1)])
        self.assertEqual(e.exception.code, "INVALID_ARGUMENT")
        delta = os.path.join(self.dir, "dsk", "t.img.delta")
        with open(delta, "r+b") as f:
            f.seek(-3, os.SEEK_END)
            f.write(b"zzz")
        other = self.owner.allocate("sys0", 8 * PAGE)
        with self.assertRaises(IsometryError) as e:
            self.owner.restore(other, "dsk0", "t.img")
        self.assertEqual(e.exception.code, "DATA_LOSS")
        self.assertEqual(self.owner.read(other, 0, 8 * PAGE), bytes(8 * PAGE))


if __name__ == "__main__":
    unittest.main()
