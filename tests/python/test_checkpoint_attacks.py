"""Attacks on incremental checkpoints (Active Access, issue #48) against a
real isometryd: a sparse huge delta file, a damaged payload, `..` in a
checkpoint name, another uid reading or forging records, one session's slow
restores in front of another session's checkpoint. Each asserts the clear
refusal AND that the victim's allocation and checkpoints are unaffected.

Run like test_python_client (ISOMETRYD, ISOMETRY_PYTHONPATH); as root, for
the second-uid test (it runs a child as `nobody`).
"""

import os
import shutil
import stat
import struct
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyfixture"))
from attack_case import ISOMETRYD, NOBODY, SKIP_REASON, rss_of, run_as_nobody  # noqa: E402
from isometryd_process import IsometrydProcess  # noqa: E402

_IMPORT_ERROR = None
try:
    import isometry
    from isometry import IsometryError
except ImportError as e:
    _IMPORT_ERROR = e


DAEMON = dict(log_level="warn", shutdown_grace_ms=500, extra=[
    ("socket_mode", '"0666"'),
    ("checkpoint_max_deltas", 4),
    ("checkpoint_threads", 4),
    ("max_checkpoint_calls_per_session", 2),
])
CONFIG = """
[[memory]]
name = "sys0"
kind = "SYS"
pool = "320MiB"
client_quota = "160MiB"
staging = "64MiB"

[[memory]]
name = "dsk0"
kind = "DSK"
directory = "{dir}/dsk"

[[channel]]
name = "memcpy0"
kind = "memcpy"

# DSK copies (an intruder's copies from and over checkpoint files).
[[channel]]
name = "disk_read0"
kind = "disk_read"

[[channel]]
name = "disk_write0"
kind = "disk_write"
"""

PAGE = 4096
TABLE = 64 * PAGE


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def forged_record(version, image_bytes, sequence, pages):
    """A delta record with correct CRCs for `pages` {page: bytes} — what
    anyone who can write the file can make; version 2's MAC is guessed."""
    index = b"".join(struct.pack("<Q", p) for p in sorted(pages))
    data = b"".join(pages[p] for p in sorted(pages))
    payload = index + data
    head = struct.pack("<8sIIQQQQII", b"ISODELTA", version, PAGE, image_bytes, sequence,
                       len(pages), len(payload), 0, crc32c(payload))
    head += struct.pack("<II", crc32c(head), 0)
    mac = os.urandom(32) if version >= 2 else b""
    return head + mac + payload


@unittest.skipUnless(ISOMETRYD, SKIP_REASON)
class CheckpointAttackTest(unittest.TestCase):
    def setUp(self):
        if _IMPORT_ERROR is not None:
            self.fail(f"cannot import the isometry package: {_IMPORT_ERROR}")
        self.dir, self.daemon = IsometrydProcess.started_in_temp_dir(
            ISOMETRYD, CONFIG, "isometry-ckpt-attack-", dirs=["dsk"], daemon=DAEMON)
        os.chmod(self.dir, 0o755)  # the second uid reaches the sockets and the files
        os.chmod(os.path.join(self.dir, "dsk"), 0o777)
        self.addCleanup(self._stop)
        self.socket = os.path.join(self.dir, "grpc.sock")
        self.local = os.path.join(self.dir, "local.sock")
        # A local-socket session: the daemon knows its uid.
        self.victim = self.client("victim")
        self.table = self.victim.allocate("sys0", TABLE)
        self.pattern = bytes((i * 7 + 3) & 0xFF for i in range(TABLE))
        self.victim.write(self.table, 0, self.pattern)
        self.victim.watch(self.table, 0, TABLE, action="apply_log", handler="dirty_pages")
        r = self.victim.checkpoint(self.table, "dsk0", "t.img")
        self.assertTrue(r.full)
        self.assertIn("first", r.full_reason)

    def _stop(self):
        try:
            rc = self.daemon.stop(timeout_s=30)
            self.assertEqual(rc, 0, self.daemon.log_text())
        finally:
            self.daemon.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    def client(self, name):
        c = isometry.Client(self.socket, name=name, local_socket=self.local, connect_timeout=10)
        self.addCleanup(c.close)
        return c

    def path(self, name):
        return os.path.join(self.dir, "dsk", name)

    def assertFails(self, code, fn, *args, **kw):
        with self.assertRaises(IsometryError) as cm:
            fn(*args, **kw)
        self.assertEqual(cm.exception.code, code, cm.exception.message)
        return cm.exception.message

    def incremental(self, page, data):
        # The owner's own writes are listed by the owner (client_pages); the
        # daemon tracks other clients' writes into the watched table.
        self.victim.write(self.table, page * PAGE + 8, data)
        r = self.victim.checkpoint(self.table, "dsk0", "t.img", client_pages=[(page, 1)])
        self.assertFalse(r.full, r.full_reason)
        return r

    def fresh(self, fill=b"\x5a"):
        a = self.victim.allocate("sys0", TABLE)
        self.victim.write(a, 0, fill * TABLE)
        return a

    def assertRestores(self):
        a = self.fresh()
        self.victim.restore(a, "dsk0", "t.img")
        self.assertEqual(self.victim.read(a, 0, TABLE), self.victim.read(self.table, 0, TABLE))

    def test_sparse_huge_delta_is_refused_unread(self):
        self.incremental(3, b"three")
        with open(self.path("t.img.delta"), "r+b") as f:
            f.truncate(60 << 30)  # 60 GiB, a few KiB on disk
        target = self.fresh()
        rss = rss_of(self.daemon.proc.pid)
        start = time.monotonic()
        msg = self.assertFails("DATA_LOSS", self.victim.restore, target, "dsk0", "t.img")
        msg2 = self.assertFails("DATA_LOSS", self.victim.compact_checkpoint, "dsk0", "t.img")
        took = time.monotonic() - start
        self.assertLess(took, 5.0)
        for m in (msg, msg2):
            self.assertIn("t.img.delta", m)
            self.assertIn(str(60 << 30), m)
            self.assertIn("at most", m)
        self.assertTrue(self.daemon.alive())
        self.assertLess(rss_of(self.daemon.proc.pid) - rss, 64 << 20)
        self.assertEqual(self.victim.read(target, 0, TABLE), b"\x5a" * TABLE)
        self.assertEqual(os.path.getsize(self.path("t.img.delta")), 60 << 30)  # compaction wrote nothing
        # The next checkpoint starts over in full, and says why.
        self.victim.write(self.table, 9 * PAGE, b"nine")
        r = self.victim.checkpoint(self.table, "dsk0", "t.img")
        self.assertTrue(r.full)
        self.assertIn("cannot be extended", r.full_reason)
        self.assertEqual(os.path.getsize(self.path("t.img.delta")), 0)
        self.assertRestores()

    def test_damaged_payload_makes_the_next_checkpoint_full(self):
        r = self.incremental(5, b"five")
        self.assertEqual(r.deltas, 1)
        with open(self.path("t.img.delta"), "r+b") as f:
            f.seek(-10, os.SEEK_END)  # page data, not the header
            b = f.read(1)
            f.seek(-10, os.SEEK_END)
            f.write(bytes([b[0] ^ 1]))
        target = self.fresh()
        msg = self.assertFails("DATA_LOSS", self.victim.restore, target, "dsk0", "t.img")
        self.assertIn("CRC", msg)
        self.assertEqual(self.victim.read(target, 0, TABLE), b"\x5a" * TABLE)
        # Before: an incremental record appended onto the damaged one.
        self.victim.write(self.table, 6 * PAGE, b"six")
        r = self.victim.checkpoint(self.table, "dsk0", "t.img", client_pages=[(6, 1)])
        self.assertTrue(r.full)
        self.assertIn("payload CRC mismatch", r.full_reason)
        self.assertRestores()
        self.incremental(7, b"seven")
        self.assertRestores()

    def test_dot_dot_in_a_checkpoint_name_is_refused(self):
        os.mkdir(self.path("sub"))
        fresh = self.fresh()
        for fn, args in [(self.victim.checkpoint, (self.table, "dsk0", "sub/../x")),
                         (self.victim.restore, (fresh, "dsk0", "sub/../t.img")),
                         (self.victim.compact_checkpoint, ("dsk0", "sub/../t.img"))]:
            msg = self.assertFails("PERMISSION_DENIED", fn, *args)
            self.assertIn("'..'", msg)
        self.assertFalse(os.path.exists(self.path("x")))
        self.assertEqual(self.victim.read(fresh, 0, TABLE), b"\x5a" * TABLE)
        # Spelled without `..`, the same file is the same chain.
        self.incremental(2, b"two")
        a = self.fresh()
        self.assertEqual(self.victim.restore(a, "dsk0", "./t.img").deltas, 1)

    def test_calls_one_at_a_time_are_never_refused_as_too_many(self):
        # The per-session bound counts calls queued or running; a call no
        # longer counts once its answer is out, so a client that sends the
        # next call on the answer is served (the bound once still counted
        # the answered call for a moment, and refused it).
        for _ in range(200):
            self.assertFails("PERMISSION_DENIED", self.victim.compact_checkpoint, "dsk0",
                             "sub/../t.img")
        self.assertRestores()

    def test_another_uid_cannot_read_or_forge_a_checkpoint(self):
        if os.geteuid() != 0:
            self.skipTest("needs root to run a child as nobody")
        self.incremental(4, b"four")
        for name in ("t.img", "t.img.delta"):
            st = os.stat(self.path(name))
            self.assertEqual(stat.S_IMODE(st.st_mode), 0o600, name)
            self.assertEqual(st.st_uid, os.geteuid(), name)  # the victim's session's uid
        script = f"""
import json, isometry
out = {{}}
for name, mode in (("t.img", "rb"), ("t.img.delta", "rb"), ("t.img.delta", "ab")):
    try:
        open({self.path("")!r} + name, mode).close()
        out[name + mode] = "opened"
    except PermissionError:
        out[name + mode] = "denied"
c = isometry.Client({self.socket!r}, name="intruder", local_socket={self.local!r})
a = c.allocate("sys0", {TABLE})
c.write(a, 0, b"EVIL" * {TABLE // 4})
def code(fn, *args):
    try:
        fn(*args)
        return ["OK", ""]
    except isometry.IsometryError as e:
        return [e.code, e.message]
out["restore"] = code(c.restore, a, "dsk0", "t.img")
out["checkpoint"] = code(c.checkpoint, a, "dsk0", "t.img")
out["compact"] = code(c.compact_checkpoint, "dsk0", "t.img")
out["own"] = code(c.checkpoint, a, "dsk0", "n.img")
# Ordinary DSK copies from and over the checkpoint's files.
mine = c.register_instance(a, [{TABLE}], [("b", 1)], "F,x")
def copy(src, dst):
    try:
        info = c.copy(src, dst, check=False)
        return [info.state, info.message]
    except isometry.IsometryError as e:
        return [e.code, e.message]
for name in ("t.img", "t.img.delta"):
    f = c.register_instance(None, [{PAGE}], [("b", 1)], "F,x", memory="dsk0", file=name)
    head = c.register_instance(a, [{PAGE}], [("b", 1)], "F,x")
    out["read " + name] = copy(f, head)
    out["write " + name] = copy(head, f)
# A file log appends: not to another uid's file either.
out["file_log"] = code(lambda: c.watch(c.allocate("sys0", {PAGE}), 0, {PAGE}, "apply_log",
                                       "file_log", file_memory="dsk0", file="t.img.delta"))
c.close()
print(json.dumps(out))
"""
        out = run_as_nobody(self, script)
        self.assertEqual(out["t.imgrb"], "denied")
        self.assertEqual(out["t.img.deltarb"], "denied")
        self.assertEqual(out["t.img.deltaab"], "denied")
        for k in ("restore", "checkpoint", "compact"):
            self.assertEqual(out[k][0], "PERMISSION_DENIED", k)
            self.assertIn("belongs to uid 0", out[k][1])
        # Nor through DSK copies: the files are the victim's, 0600
        # (DiskEndpoint's "who may open a file").
        for name in ("t.img", "t.img.delta"):
            for verb in ("read", "write"):
                state, message = out[f"{verb} {name}"]
                self.assertIn(state, ("failed", "PERMISSION_DENIED"), (verb, name, message))
                self.assertIn(f"belongs to uid 0 (mode 0600): uid {NOBODY} may not {verb} it",
                              message)
        self.assertEqual(out["file_log"][0], "PERMISSION_DENIED", out["file_log"])
        self.assertIn(f"uid {NOBODY} may not write it", out["file_log"][1])
        self.assertEqual(stat.S_IMODE(os.stat(self.path("t.img")).st_mode), 0o600)
        # nobody's own checkpoint is nobody's, 0600, and not the victim's.
        self.assertEqual(out["own"][0], "OK", out["own"])
        st = os.stat(self.path("n.img"))
        self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (NOBODY, 0o600))
        msg = self.assertFails("PERMISSION_DENIED", self.victim.restore, self.fresh(), "dsk0",
                               "n.img")
        self.assertIn("uid 65534", msg)
        # A record appended by someone who can write the file (through a DSK
        # copy, say), with correct CRCs: refused, nothing restored.
        delta = self.path("t.img.delta")
        with open(delta, "rb") as f:
            good = f.read()
        for version in (2, 1):
            with open(delta, "ab") as f:
                f.write(forged_record(version, TABLE, 2, {4: b"EVIL" * (PAGE // 4)}))
            target = self.fresh()
            msg = self.assertFails("DATA_LOSS", self.victim.restore, target, "dsk0", "t.img")
            self.assertIn("record 2", msg)
            self.assertIn("MAC" if version == 2 else "version 1", msg)
            self.assertEqual(self.victim.read(target, 0, TABLE), b"\x5a" * TABLE, version)
            with open(delta, "wb") as f:
                f.write(good)
        # A forged first record in place of the chain.
        with open(delta, "wb") as f:
            f.write(forged_record(2, TABLE, 1, {4: b"EVIL" * (PAGE // 4)}))
        target = self.fresh()
        msg = self.assertFails("DATA_LOSS", self.victim.restore, target, "dsk0", "t.img")
        self.assertIn("MAC", msg)
        self.assertEqual(self.victim.read(target, 0, TABLE), b"\x5a" * TABLE)
        with open(delta, "wb") as f:
            f.write(good)
        self.assertRestores()

    def test_slow_restores_of_one_session_do_not_delay_another(self):
        # The attacker's checkpoint: a base and a chain of nearly the image,
        # so each restore reads and verifies ~2 x 96 MiB.
        big = 96 << 20
        evil = self.client("attacker")
        a = evil.allocate("sys0", big)
        evil.watch(a, 0, big, action="apply_log", handler="dirty_pages")
        self.assertTrue(evil.checkpoint(a, "dsk0", "big.img").full)
        chunk = b"\x11" * (4 << 20)
        for off in range(0, big * 15 // 16, len(chunk)):
            evil.write(a, off, chunk)
        r = evil.checkpoint(a, "dsk0", "big.img", client_pages=[(0, big * 15 // 16 // PAGE)])
        self.assertFalse(r.full, r.full_reason)
        self.assertEqual(r.deltas, 1)
        start = time.monotonic()
        evil.restore(a, "dsk0", "big.img")
        one = time.monotonic() - start

        results = []

        def restore():
            try:
                evil.restore(a, "dsk0", "big.img")
                results.append("OK")
            except IsometryError as e:
                results.append(e.code)
                if e.code == "RESOURCE_EXHAUSTED":
                    self.assertIn("max_checkpoint_calls_per_session", e.message)

        threads = [threading.Thread(target=restore) for _ in range(8)]
        for t in threads:
            t.start()
        time.sleep(min(0.05, one / 4))
        self.victim.write(self.table, 0, b"small")
        start = time.monotonic()
        r = self.victim.checkpoint(self.table, "dsk0", "t.img", client_pages=[(0, 1)])
        took = time.monotonic() - start
        for t in threads:
            t.join()
        self.assertFalse(r.full)
        # One restore alone took `one`; eight queued on one worker took ~8x
        # (before, a call of milliseconds waited seconds behind an
        # attacker's restore).
        self.assertLess(took, 3 * one + 0.2, (took, one, results))
        self.assertIn("RESOURCE_EXHAUSTED", results)
        self.assertGreaterEqual(results.count("OK"), 1)
        self.assertRestores()


if __name__ == "__main__":
    unittest.main()
