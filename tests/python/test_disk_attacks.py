"""DSK memories attacked the way a hostile local client would (issue #11,
class 3): directories swapped for links while a copy writes, planted files
with the names temporary files used to have, links and hard links to files
outside the directory, offsets that wrap 2^64 or reach 1 TiB, and a client
that writes more at once than its quota.

Every test asserts the clear error the client gets AND that nothing outside
the DSK directory changed (files compared byte for byte, directory listings
compared) and that no temporary file is left behind.

Run like test_disk_paths (ctest sets ISOMETRYD and ISOMETRY_PYTHONPATH):

    ISOMETRYD=build/daemon/isometryd ISOMETRY_PYTHONPATH=build/python \\
        /usr/bin/python3 -m unittest -v test_disk_attacks      # in tests/python
"""

import os
import random
import shutil
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyfixture"))
from isometryd_process import IsometrydProcess  # noqa: E402
from test_python_client import _IMPORT_ERROR, ISOMETRYD, SKIP_REASON  # noqa: E402

if _IMPORT_ERROR is None:
    import isometry

# max_file_bytes keeps its default (64 GiB); the quota is small so one slow
# copy of SLOW_BYTES fits and two do not.
# [daemon]: isometryd_process.daemon_section (sockets and state in the
# temporary directory) with these options; CONFIG follows it.
DAEMON = dict(log_level="info", shutdown_grace_ms=1000)
CONFIG = """
[[memory]]
name = "sys0"
kind = "SYS"
pool = "256MiB"
staging = "64MiB"

[[memory]]
name = "dsk0"
kind = "DSK"
directory = "{dir}/dsk"
staging = "64MiB"
quota_bytes = "4MiB"
%s

[[channel]]
name = "memcpy0"
kind = "memcpy"
threads = 2

[[channel]]
name = "disk_read0"
kind = "disk_read"

[[channel]]
name = "disk_write0"
kind = "disk_write"
# Capped so a 2 MiB write takes about half a second: the attacks below act
# while it runs, whatever the machine's speed.
rate_limit = "4MiB"
request_size = "256KiB"
"""

BYTE = [("v", 1)]
CHUNK = 1 << 20
SLOW_BYTES = 2 << 20  # about 0.5 s on the capped disk_write channel
WRAP_OFFSET = (1 << 64) - 4096


def pattern(n, seed):
    return random.Random(seed).randbytes(n)


def tree(path):
    """{relative path: (kind, bytes or link target)} of everything under path."""
    out = {}
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            full = os.path.join(root, name)
            rel = os.path.relpath(full, path)
            if os.path.islink(full):
                out[rel] = ("link", os.readlink(full))
            elif os.path.isdir(full):
                out[rel] = ("dir", None)
            elif not os.path.isfile(full):
                out[rel] = ("other", None)  # sockets of the daemon
            else:
                with open(full, "rb") as f:
                    out[rel] = ("file", f.read())
    return out


def temporaries(path):
    """Names under path that look like a DSK write's leftovers."""
    return sorted(r for r in tree(path) if ".isometry-" in os.path.basename(r))


class _DiskDaemon(unittest.TestCase):
    """A daemon with a DSK memory `dsk` and a directory `outside` beside it
    holding the victims (same file system, so hard links work)."""

    extra_memory_keys = ""

    def setUp(self):
        if _IMPORT_ERROR is not None:
            self.fail(f"cannot import the isometry package ({_IMPORT_ERROR})")
        try:
            self.dir, self.daemon = IsometrydProcess.started_in_temp_dir(
                ISOMETRYD, CONFIG % self.extra_memory_keys, "isometry-attack-",
                dirs=["dsk", "outside"], daemon=DAEMON,
            )
        except AssertionError as e:
            self.fail(str(e))
        self.dsk = os.path.join(self.dir, "dsk")
        # A directory the daemon must never write: its files are the
        # "victims" (same file system as dsk, so hard links work).
        self.outside = os.path.join(self.dir, "outside")
        with open(os.path.join(self.outside, "secret.bin"), "wb") as f:
            f.write(b"SECRET" * 1000)
        with open(os.path.join(self.outside, "t.bin"), "wb") as f:
            f.write(b"victim" * 100)
        self.outside_before = tree(self.outside)
        self.c = isometry.Client(self.daemon.socket, name="attacker", connect_timeout=10)

    def tearDown(self):
        self.c.close()
        if self.daemon.alive():
            rc = self.daemon.stop(timeout_s=30)
            self.assertEqual(rc, 0, f"isometryd exited with {rc}:\n{self.daemon.log_text()}")
        self.daemon.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # ---- helpers ----

    def path(self, name):
        return os.path.join(self.dsk, name)

    def put(self, name, data):
        with open(self.path(name), "wb") as f:
            f.write(data)

    def assertOutsideUnchanged(self):
        self.assertEqual(tree(self.outside), self.outside_before, "a file outside the DSK directory changed")

    def assertNoTemporaries(self):
        self.assertEqual(temporaries(self.dir), [], "a temporary file was left behind")

    def sys_instance(self, data, bounds, layout):
        a = self.c.allocate("sys0", len(data))
        for off in range(0, len(data), CHUNK):
            self.c.write(a, off, data[off : off + CHUNK])
        return a, self.c.register_instance(a, bounds, BYTE, layout)

    def dsk_instance(self, name, bounds, layout="F,x", offset=0):
        return self.c.register_instance(0, bounds, BYTE, layout, memory="dsk0", file=name, offset=offset)

    def small_source(self, n=4096, seed=1):
        data = pattern(n, seed)
        return data, self.sys_instance(data, [n], "F,x")[1]

    def slow_write(self, name):
        """Starts a copy into `name` that takes about half a second (the
        capped disk_write channel); returns (transfer id, data)."""
        src = pattern(SLOW_BYTES, 3)
        _, si = self.sys_instance(src, [SLOW_BYTES], "F,x")
        return self.c.copy(si, self.dsk_instance(name, [SLOW_BYTES]), wait=False), src

    def copy_error(self, src, dst, **kw):
        with self.assertRaises(isometry.IsometryError) as cm:
            self.c.copy(src, dst, timeout=60, **kw)
        return cm.exception



@unittest.skipUnless(ISOMETRYD, SKIP_REASON)
class DiskAttackTest(_DiskDaemon):
    # ---- directories swapped for links ----

    def test_a_subdirectory_swapped_for_a_link_mid_write_never_writes_outside(self):
        """Loop: a write into sub/t.bin runs while sub is renamed away and
        replaced by a link to the outside directory (whose t.bin is the
        victim). The copy fails with a clear error or lands inside the DSK
        directory; the victim is untouched and no temporary file is left."""
        data, si = self.small_source(1 << 16, 7)
        outcomes = {"refused": 0, "moved": 0, "inside": 0}
        rng = random.Random(11)
        for i in range(12):
            os.mkdir(self.path("sub"))
            di = self.dsk_instance("sub/t.bin", [1 << 16])
            if i % 3 == 0:
                # The slow copy: the swap lands mid-write.
                tid, _ = self.slow_write("sub/t.bin")
                time.sleep(rng.uniform(0.01, 0.2))
            else:
                tid = self.c.copy(si, di, wait=False)
                time.sleep(rng.uniform(0, 0.02))
            os.rename(self.path("sub"), self.path("sub.moved"))
            os.symlink(self.outside, self.path("sub"))
            info = self.c.wait(tid, timeout_ms=120_000, check=False)
            if info.state == "done":
                # Committed before or despite the swap: inside, in the
                # directory the copy opened.
                self.assertTrue(os.path.exists(self.path("sub.moved/t.bin")), info)
                outcomes["inside"] += 1
            else:
                self.assertEqual(info.state, "failed", info)
                self.assertRegex(info.message, "moved or replaced during the copy|symbolic link")
                outcomes["moved" if "moved" in info.message else "refused"] += 1
                self.assertFalse(os.path.exists(self.path("sub.moved/t.bin")), info)
            self.assertOutsideUnchanged()
            self.assertNoTemporaries()
            # A new copy through the link is refused before anything is made.
            err = self.copy_error(si, di)
            self.assertEqual(err.code, "PERMISSION_DENIED", err)
            self.assertIn("symbolic link", err.message)
            self.assertOutsideUnchanged()
            os.unlink(self.path("sub"))
            shutil.rmtree(self.path("sub.moved"))
        self.assertGreater(outcomes["moved"], 0, outcomes)  # the mid-write case was exercised

    def test_the_dsk_directory_itself_swapped_for_a_link_keeps_writes_in_the_original(self):
        """The DSK directory is opened once at start: renaming it and putting
        a link to another directory in its place redirects nothing."""
        data, si = self.small_source()
        os.rename(self.dsk, self.dsk + ".moved")
        os.symlink(self.outside, self.dsk)
        di = self.dsk_instance("t.bin", [len(data)])
        self.assertEqual(self.c.copy(si, di, timeout=60).state, "done")
        with open(self.dsk + ".moved/t.bin", "rb") as f:
            self.assertEqual(f.read(), data)
        # A read of a name that exists only outside finds nothing.
        _, back = self.sys_instance(bytes(6000), [6000], "F,x")
        err = self.copy_error(self.dsk_instance("secret.bin", [6000]), back)
        self.assertEqual(err.code, "NOT_FOUND", err)
        self.assertOutsideUnchanged()
        self.assertNoTemporaries()
        os.unlink(self.dsk)
        os.rename(self.dsk + ".moved", self.dsk)

    # ---- planted names ----

    def test_planted_files_with_predictable_temporary_names_are_never_followed(self):
        """Links and files at every name a temporary file used to get stay
        as they were; the write lands on its target only."""
        planted = {}
        for name in (
            "t.bin.tmp",
            ".t.bin.tmp",
            "t.bin.isometry-tmp",
            ".t.bin.isometry-tmp",
            f".t.bin.isometry-{self.daemon.proc.pid}",
            ".t.bin.isometry-0000000000000000",
            ".t.bin.isometry-00000000000000000000000000000000",
            ".isometry-calibration-0",
        ):
            os.symlink(os.path.join(self.outside, "t.bin"), self.path(name))
            planted[name] = ("link", os.path.join(self.outside, "t.bin"))
        self.put("t.bin.partial", b"planted file")
        planted["t.bin.partial"] = ("file", b"planted file")
        for i in range(5):
            data, si = self.small_source(4096 + i, i)
            self.assertEqual(self.c.copy(si, self.dsk_instance("t.bin", [len(data)]), timeout=60).state, "done")
            with open(self.path("t.bin"), "rb") as f:
                self.assertEqual(f.read(), data)
        now = tree(self.dsk)
        for name, what in planted.items():
            self.assertEqual(now[name], what, name)
        self.assertEqual(sorted(now), sorted(list(planted) + ["t.bin"]))
        self.assertOutsideUnchanged()

    # ---- links as names ----

    def test_a_symlink_name_is_never_written_through_nor_read(self):
        os.symlink(os.path.join(self.outside, "t.bin"), self.path("link.bin"))
        os.symlink(self.outside, self.path("outdir"))
        self.put("real.bin", b"r" * 600)
        os.symlink("real.bin", self.path("alias.bin"))  # a link that stays inside
        data, si = self.small_source(600)
        for name in ("link.bin", "alias.bin"):
            err = self.copy_error(si, self.dsk_instance(name, [600]))
            self.assertEqual(err.code, "PERMISSION_DENIED", err)
            self.assertIn(f"{name} is a symbolic link; DSK writes replace files, not links", err.message)
            self.assertTrue(os.path.islink(self.path(name)))
        for name in ("outdir/t.bin", "outdir/new.bin"):
            err = self.copy_error(si, self.dsk_instance(name, [600]))
            self.assertEqual(err.code, "PERMISSION_DENIED", err)
            self.assertIn("symbolic link", err.message)
        _, back = self.sys_instance(bytes(600), [600], "F,x")
        for name in ("link.bin", "alias.bin", "outdir/t.bin"):
            err = self.copy_error(self.dsk_instance(name, [600]), back)
            self.assertEqual(err.code, "PERMISSION_DENIED", err)
            self.assertIn("symbolic link", err.message)
        self.assertEqual(self.c.read(back.allocation, 0, 600), bytes(600))
        with open(self.path("real.bin"), "rb") as f:
            self.assertEqual(f.read(), b"r" * 600)
        self.assertFalse(os.path.exists(os.path.join(self.outside, "new.bin")))
        self.assertOutsideUnchanged()
        self.assertNoTemporaries()

    def test_a_hard_link_to_an_outside_file_is_neither_read_nor_replaced(self):
        os.link(os.path.join(self.outside, "secret.bin"), self.path("hl.bin"))
        _, back = self.sys_instance(bytes(6000), [6000], "F,x")
        err = self.copy_error(self.dsk_instance("hl.bin", [6000]), back)
        self.assertEqual(err.code, "PERMISSION_DENIED", err)
        self.assertIn("hl.bin has 2 hard links; DSK memory 'dsk0' refuses files with more than one", err.message)
        self.assertEqual(self.c.read(back.allocation, 0, 6000), bytes(6000))
        # A partial write would first copy the secret into a new file.
        data, si = self.small_source(100)
        err = self.copy_error(si, self.dsk_instance("hl.bin", [100], offset=10))
        self.assertEqual(err.code, "PERMISSION_DENIED", err)
        self.assertIn("hard links", err.message)
        self.assertEqual(sorted(os.listdir(self.dsk)), ["hl.bin"])
        self.assertEqual(os.stat(self.path("hl.bin")).st_nlink, 2)
        self.assertOutsideUnchanged()

    # ---- offsets ----

    def test_an_offset_that_wraps_2_64_is_invalid(self):
        for kw in ({"memory": "dsk0", "file": "w.bin"}, {}):
            alloc = 0 if kw else self.c.allocate("sys0", 1 << 20)
            with self.assertRaises(isometry.IsometryError) as cm:
                self.c.register_instance(alloc, [8192], BYTE, "F,x", offset=WRAP_OFFSET, **kw)
            self.assertEqual(cm.exception.code, "INVALID_ARGUMENT", cm.exception)
            self.assertIn(f"offset {WRAP_OFFSET} + 8192 bytes of storage wraps past 2^64", cm.exception.message)
        self.assertEqual(os.listdir(self.dsk), [])
        self.assertOutsideUnchanged()

    def test_a_write_at_1_tib_is_refused_before_anything_is_created(self):
        data, si = self.small_source()
        di = self.dsk_instance("huge.bin", [len(data)], offset=1 << 40)
        err = self.copy_error(si, di)
        self.assertEqual(err.code, "OUT_OF_RANGE", err)
        self.assertIn(f"ends at byte {(1 << 40) + 4096}, past max_file_bytes of DSK memory 'dsk0' ({64 << 30})",
                      err.message)
        self.assertEqual(os.listdir(self.dsk), [])
        # An existing file is not grown either.
        self.put("huge.bin", b"h" * 10)
        err = self.copy_error(si, di)
        self.assertEqual(err.code, "OUT_OF_RANGE", err)
        self.assertEqual(os.stat(self.path("huge.bin")).st_size, 10)
        self.assertEqual(sorted(os.listdir(self.dsk)), ["huge.bin"])
        self.assertNoTemporaries()

    # ---- quota ----

    def test_a_second_write_past_the_quota_is_refused_and_the_quota_comes_back(self):
        data, si = self.small_source(3 << 20, 5)
        di = self.dsk_instance("second.bin", [len(data)])
        tid, src = self.slow_write("first.bin")
        err = self.copy_error(si, di)
        self.assertEqual(err.code, "RESOURCE_EXHAUSTED", err)
        self.assertRegex(
            err.message,
            # Per uid; a gRPC client's uid is unknown to the daemon: per session.
            r"DSK memory 'dsk0': (uid|session) \d+ is writing 2097152 bytes of files already; "
            r"a write of a 3145728-byte file would pass its quota_bytes of 4194304",
        )
        self.assertFalse(os.path.exists(self.path("second.bin")))
        self.assertEqual(self.c.wait(tid, timeout_ms=120_000).state, "done")
        # The finished write gave its bytes back.
        self.assertEqual(self.c.copy(si, di, timeout=60).state, "done")
        with open(self.path("second.bin"), "rb") as f:
            self.assertEqual(f.read(), data)
        # A single file above the quota never fits.
        big, bi = self.small_source(5 << 20, 6)
        err = self.copy_error(bi, self.dsk_instance("big.bin", [len(big)]))
        self.assertEqual(err.code, "RESOURCE_EXHAUSTED", err)
        self.assertFalse(os.path.exists(self.path("big.bin")))
        self.assertNoTemporaries()
        self.assertOutsideUnchanged()


@unittest.skipUnless(ISOMETRYD, SKIP_REASON)
class DiskHardLinksAllowedTest(_DiskDaemon):
    """memory.allow_hard_links = true: an admin who wants hard links gets them."""

    extra_memory_keys = "allow_hard_links = true"

    def test_a_hard_link_is_read_when_the_memory_allows_it(self):
        os.link(os.path.join(self.outside, "secret.bin"), self.path("hl.bin"))
        _, back = self.sys_instance(bytes(6000), [6000], "F,x")
        self.assertEqual(self.c.copy(self.dsk_instance("hl.bin", [6000]), back, timeout=60).state, "done")
        self.assertEqual(self.c.read(back.allocation, 0, 6000), b"SECRET" * 1000)
        self.assertOutsideUnchanged()


if __name__ == "__main__":
    unittest.main()
