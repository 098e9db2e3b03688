"""Disk paths through a real isometryd (issue #21): copies that stalled,
cancel and shutdown during slow transfers, writes into part of a file,
DSK -> DSK at every size, and random layouts with files on either end.

Run like test_python_client (Debian's interpreter, ISOMETRYD and
ISOMETRY_PYTHONPATH set; ctest does it):

    ISOMETRYD=build/daemon/isometryd ISOMETRY_PYTHONPATH=build/python \\
        /usr/bin/python3 -m unittest -v test_disk_paths      # in tests/python

Each test starts its own daemon with a DSK memory in a fresh temporary
directory. Expected bytes come from a reference model written here
(test_python_client.RefLayout), never from the daemon.
"""

import os
import random
import re
import shutil
import struct
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyfixture"))
from isometryd_process import IsometrydProcess  # noqa: E402
from test_python_client import (  # noqa: E402
    _IMPORT_ERROR,
    FIELDS,
    FORMATS,
    ISOMETRYD,
    SKIP_REASON,
    RefLayout,
    _fill,
    _points,
    _value,
)

if _IMPORT_ERROR is None:
    import isometry

# [daemon]: isometryd_process.daemon_section (sockets and state in the
# temporary directory) with these options; CONFIG follows it.
DAEMON = dict(log_level="info", shutdown_grace_ms=1000)
CONFIG = """
[[memory]]
name = "sys0"
kind = "SYS"
pool = "320MiB"
staging = "64MiB"

[[memory]]
name = "dsk0"
kind = "DSK"
directory = "{dir}/dsk"
staging = "64MiB"

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
"""

CHUNK = 1 << 20  # gRPC Read/Write pieces (a default client takes at most 4 MiB)
BYTE = [("v", 1)]


def parse_path(text):
    """[(memory, layout)], [channel] from 'a<l> -[ch]-> b<l2> ...'."""
    nodes = re.findall(r"([\w:]+)<([^>]*)>", text)
    channels = re.findall(r"-\[([^\]]+)\]->", text)
    return nodes, channels


def pattern(n, seed):
    rng = random.Random(seed)
    return rng.randbytes(n)


@unittest.skipUnless(ISOMETRYD, SKIP_REASON)
class DiskPathsTest(unittest.TestCase):
    def setUp(self):
        if _IMPORT_ERROR is not None:
            self.fail(f"cannot import the isometry package ({_IMPORT_ERROR})")
        try:
            self.dir, self.daemon = IsometrydProcess.started_in_temp_dir(
                ISOMETRYD, CONFIG, "isometry-disk-", dirs=["dsk"], daemon=DAEMON
            )
        except AssertionError as e:
            self.fail(str(e))
        self.dsk = os.path.join(self.dir, "dsk")
        self.socket = self.daemon.socket
        self.expected_exit = 0
        self.c = isometry.Client(self.socket, name="disk-test", connect_timeout=10)

    def tearDown(self):
        self.c.close()
        if self.daemon.alive():
            rc = self.daemon.stop(timeout_s=30)
            self.assertEqual(
                rc, self.expected_exit, f"isometryd exited with {rc}:\n{self.daemon.log_text()}"
            )
        self.daemon.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # ---- helpers ----

    def file(self, name):
        return os.path.join(self.dsk, name)

    def put_file(self, name, data):
        with open(self.file(name), "wb") as f:
            f.write(data)

    def get_file(self, name):
        with open(self.file(name), "rb") as f:
            return f.read()

    def write_alloc(self, alloc, data):
        for off in range(0, len(data), CHUNK):
            self.c.write(alloc, off, data[off : off + CHUNK])

    def read_alloc(self, alloc, n):
        return b"".join(self.c.read(alloc, off, min(CHUNK, n - off)) for off in range(0, n, CHUNK))

    def sys_instance(self, data_or_size, bounds, layout, fields=BYTE):
        n = data_or_size if isinstance(data_or_size, int) else len(data_or_size)
        a = self.c.allocate("sys0", n)
        if not isinstance(data_or_size, int):
            self.write_alloc(a, data_or_size)
        return a, self.c.register_instance(a, bounds, fields, layout)

    def dsk_instance(self, name, bounds, layout, fields=BYTE, offset=0):
        return self.c.register_instance(
            0, bounds, fields, layout, memory="dsk0", file=name, offset=offset
        )

    def leftovers(self):
        """Files in the DSK directory other than the ones named."""
        return sorted(os.listdir(self.dsk))

    def assertNoDiskHopConverts(self, info):
        nodes, channels = parse_path(info.path)
        for h, ch in enumerate(channels):
            if ch.startswith("disk_"):
                self.assertEqual(
                    nodes[h][1], nodes[h + 1][1], f"{ch} converts in {info.path}"
                )

    def slow_transpose(self, name, rows=7, cols=2_000_000):
        """Starts a SYS F,x,y -> DSK F,y,x copy with the transpose forced
        onto the disk_write hop (1-byte runs: very slow); returns its id."""
        src = pattern(rows * cols, 3)
        _, si = self.sys_instance(src, [rows, cols], "F,x,y")
        di = self.dsk_instance(name, [rows, cols], "F,y,x")
        return self.c.copy(si, di, via=[("sys0", "F,x,y")], wait=False)

    # ---- item 1: the copies that stalled, verbatim ----

    def test_blocked_file_to_memory_reads_that_stalled_complete(self):
        for cols in (700000, 256794):
            # F,x_in=6,x_out,y over [7, cols], one byte: rows of 12 bytes,
            # the first 7 of each holding x = 0..6.
            src = pattern(12 * cols, cols)
            self.put_file(f"blocked{cols}.bin", src)
            fi = self.dsk_instance(f"blocked{cols}.bin", [7, cols], "F,x_in=6,x_out,y")
            self.assertEqual(fi.total_bytes, 12 * cols)
            a, si = self.sys_instance(7 * cols, [7, cols], "F,x,y")
            info = self.c.copy(fi, si, timeout=60)
            self.assertEqual(info.state, "done", info)
            got = self.read_alloc(a, 7 * cols)
            want = b"".join(src[12 * y : 12 * y + 7] for y in range(cols))
            self.assertTrue(got == want, f"7 x {cols}: bytes differ")
            self.c.free(a)

    def test_memory_to_file_transposes_that_stalled_complete(self):
        for cols in (700000, 800000, 900000, 1000000, 2000000):
            src = pattern(7 * cols, cols)
            a, si = self.sys_instance(src, [7, cols], "F,x,y")
            di = self.dsk_instance(f"t{cols}.bin", [7, cols], "F,y,x")
            info = self.c.copy(si, di, timeout=60)
            self.assertEqual(info.state, "done", info)
            self.assertNoDiskHopConverts(info)
            got = self.get_file(f"t{cols}.bin")
            self.assertEqual(len(got), 7 * cols)
            for x in range(7):
                self.assertTrue(got[x * cols : (x + 1) * cols] == src[x::7], f"7 x {cols}, row {x}")
            self.c.free(a)
        self.assertEqual(
            self.leftovers(), sorted(f"t{c}.bin" for c in (700000, 800000, 900000, 1000000, 2000000))
        )

    # ---- item 3: cancel ends a slow transfer; others are not starved ----

    def test_cancel_ends_a_forced_disk_transpose_and_small_writes_get_through(self):
        self.put_file("slow.bin", b"old content")
        tid = self.slow_transpose("slow.bin")
        time.sleep(1.0)
        self.assertEqual(self.c.transfer(tid).state, "running")
        # A 4 KiB write of the same priority gets the channel meanwhile.
        small = pattern(4096, 9)
        _, si = self.sys_instance(small, [4096], "F,x")
        di = self.dsk_instance("small.bin", [4096], "F,x")
        # Not starved: it completes while the slow copy still runs (a wait
        # for the whole slow copy would find it ended). No absolute bound:
        # under ASan on a busy machine one slow XD takes many seconds.
        info = self.c.copy(si, di, timeout=60)
        self.assertEqual(info.state, "done", info)
        self.assertEqual(
            self.c.transfer(tid).state, "running", "a 4 KiB write waited behind the slow copy"
        )
        self.assertEqual(self.get_file("small.bin"), small)
        # Cancel: ends promptly (generous bound), the target keeps its old
        # content and no temporary file is left.
        start = time.monotonic()
        self.c.cancel(tid)
        final = self.c.wait(tid, timeout_ms=20000, check=False)
        self.assertEqual(final.state, "cancelled", final)
        self.assertLess(time.monotonic() - start, 10, "cancel took too long")
        self.assertEqual(self.get_file("slow.bin"), b"old content")
        self.assertEqual(self.leftovers(), ["slow.bin", "small.bin"])

    # ---- item 2: SIGTERM during a slow transfer ----

    def test_sigterm_during_a_slow_transfer_cancels_it_and_exits_0(self):
        """What `systemctl stop` with work in flight means: the transfer is
        cancelled, named in the log, and the stop is a success (exit 0, the
        unit inactive, not failed); only a transfer that does not end once
        cancelled makes it exit 1 (docs/operations/systemd.md)."""
        tid = self.slow_transpose("never.bin")
        time.sleep(0.5)
        start = time.monotonic()
        rc = self.daemon.stop(timeout_s=30)
        took = time.monotonic() - start
        self.assertIsNotNone(rc, "isometryd did not exit within 30 s of SIGTERM")
        # shutdown_grace_ms = 1000, plus the cancel bound (2 s) and slack.
        self.assertLess(took, 8, self.daemon.log_text())
        log = self.daemon.log_text()
        if "did not end within 2000 ms" in log:
            # A slow sanitizer build: the daemon gave up on it at the bound.
            self.assertEqual(rc, 1, log)
            self.assertIn("stopped with 1 transfer(s) abandoned", log)
        else:
            self.assertEqual(rc, 0, log)
            self.assertRegex(log, rf"stopped; 1 transfer\(s\) were cancelled by the shutdown: "
                                  rf"{tid} \(client '[^']*' session \d+, sys0<")
        self.assertEqual(self.leftovers(), [], "a file or temporary file was left")

    def test_sigterm_while_idle_exits_0(self):
        rc = self.daemon.stop(timeout_s=30)
        self.assertEqual(rc, 0, self.daemon.log_text())

    # ---- item 4: writing part of a file keeps the rest ----

    def test_partial_writes_change_only_the_destination_elements(self):
        bounds = [(0, 40), (0, 30)]
        layout = "F,x,y"
        ref = RefLayout(layout, bounds, FIELDS)
        old = pattern(ref.total + 5000, 1)
        box = [(5, 17), (3, 29)]
        cases = [
            # (name, file offset, box or None, file longer than the instance)
            ("subbox.bin", 0, box, False),
            ("offset.bin", 4096 + 3, None, False),
            ("offset_subbox.bin", 777, box, True),
            ("shorter_instance.bin", 0, None, True),
        ]
        src_ref = RefLayout("y,x,F", bounds, FIELDS)
        src = _fill(src_ref, bounds)
        _, si = self.sys_instance(src, bounds, "y,x,F", FIELDS)
        for name, offset, copy_box, longer in cases:
            with self.subTest(name):
                before = old[: offset + ref.total + (5000 if longer else 0)]
                self.put_file(name, before)
                di = self.dsk_instance(name, bounds, layout, FIELDS, offset=offset)
                info = self.c.copy(si, di, box=copy_box, timeout=30)
                self.assertEqual(info.state, "done", info)
                after = self.get_file(name)
                self.assertEqual(len(after), len(before), "the file's size changed")
                expected = bytearray(before)
                pts = _points(copy_box or bounds)
                index = {p: n for n, p in enumerate(_points(bounds))}
                for p in pts:
                    for f, fmt in enumerate(FORMATS):
                        struct.pack_into(fmt, expected, offset + ref.offset(f, p), _value(f, index[p]))
                self.assertTrue(after == bytes(expected), f"{name}: bytes outside the box changed")
        self.assertEqual(self.leftovers(), sorted(n for n, *_ in cases))

    def test_a_whole_file_write_replaces_it_and_a_failed_one_leaves_it(self):
        data = pattern(1 << 16, 5)
        _, si = self.sys_instance(data, [1 << 16], "F,x")
        self.put_file("whole.bin", b"x" * 100)
        di = self.dsk_instance("whole.bin", [1 << 16], "F,x")
        self.assertEqual(self.c.copy(si, di, timeout=30).state, "done")
        self.assertEqual(self.get_file("whole.bin"), data)
        # A symbolic link as the target is refused, the link kept.
        os.symlink("whole.bin", self.file("link.bin"))
        li = self.dsk_instance("link.bin", [1 << 16], "F,x")
        with self.assertRaises(isometry.IsometryError) as cm:
            self.c.copy(si, li, timeout=30)
        self.assertIn("symbolic link", cm.exception.message)
        self.assertTrue(os.path.islink(self.file("link.bin")))
        self.assertEqual(self.get_file("whole.bin"), data)
        # A file in a directory that does not exist: named as the client
        # named it, never by the daemon's own path (issue #50, item 10).
        mi = self.dsk_instance("no/such/dir.bin", [1 << 16], "F,x")
        with self.assertRaises(isometry.IsometryError) as cm:
            self.c.copy(si, mi, timeout=30)
        self.assertEqual(cm.exception.code, "NOT_FOUND", cm.exception.message)
        self.assertIn("the directory 'no/such' of 'no/such/dir.bin' does not exist; DSK copies "
                      "create files, never directories", cm.exception.message)
        self.assertNotIn(self.dsk, cm.exception.message)

    # ---- item 5: DSK -> DSK at every size ----

    def test_disk_to_disk_at_every_size_with_and_without_a_transpose(self):
        size = 1024
        while size <= 64 << 20:
            cols = size // 8
            src = pattern(8 * cols, size)
            self.put_file("src.bin", src)
            fi = self.dsk_instance("src.bin", [8, cols], "F,x,y")
            for dst_layout in ("F,x,y", "F,y,x"):
                with self.subTest(size=size, layout=dst_layout):
                    di = self.dsk_instance("dst.bin", [8, cols], dst_layout)
                    info = self.c.copy(fi, di, timeout=120)
                    self.assertEqual(info.state, "done", info)
                    self.assertNoDiskHopConverts(info)
                    got = self.get_file("dst.bin")
                    if dst_layout == "F,x,y":
                        self.assertTrue(got == src, f"{size} B copy differs")
                    else:
                        for x in range(8):
                            self.assertTrue(got[x * cols : (x + 1) * cols] == src[x::8], f"{size} B row {x}")
                    os.unlink(self.file("dst.bin"))
            size *= 4
        self.assertEqual(self.leftovers(), ["src.bin"])

    # ---- random layouts with files on either end and both ends ----

    def test_random_layouts_with_files_on_either_end_and_prefilled_destinations(self):
        rng = random.Random(2121)
        dim_names = ["x", "y", "z"]
        for case in range(24):
            dims = rng.randint(1, 3)
            bounds = []
            for _ in range(dims):
                lo = rng.randint(-5, 5)
                bounds.append((lo, lo + rng.randint(1, 12 if dims > 1 else 300)))

            def random_layout():
                comps = ["F"]
                for d in range(dims):
                    n = dim_names[d]
                    if rng.random() < 0.3:
                        comps += [f"{n}_in={rng.choice([2, 3, 4])}", f"{n}_out"]
                    else:
                        comps.append(n)
                rng.shuffle(comps)
                return ",".join(comps)

            src_layout, dst_layout = random_layout(), random_layout()
            ends = rng.choice([("sys0", "dsk0"), ("dsk0", "sys0"), ("dsk0", "dsk0")])
            box = None
            if rng.random() < 0.5:
                box = []
                for lo, hi in bounds:
                    a = rng.randint(lo, hi - 1)
                    box.append((a, rng.randint(a + 1, hi)))
            offset = rng.choice([0, 0, 13, 4096])
            with self.subTest(case=case, ends=ends, src=src_layout, dst=dst_layout, box=box):
                self._random_case(case, bounds, src_layout, dst_layout, ends, box, offset)

    def _random_case(self, case, bounds, src_layout, dst_layout, ends, box, offset):
        src_ref = RefLayout(src_layout, bounds, FIELDS)
        dst_ref = RefLayout(dst_layout, bounds, FIELDS)
        src = bytes(_fill(src_ref, bounds, filler=0x5A))
        before = pattern(offset + dst_ref.total + 100, case)
        if ends[0] == "sys0":
            _, si = self.sys_instance(src, bounds, src_layout, FIELDS)
        else:
            self.put_file(f"s{case}.bin", src)
            si = self.dsk_instance(f"s{case}.bin", bounds, src_layout, FIELDS)
        if ends[1] == "sys0":
            da = self.c.allocate("sys0", len(before))
            self.write_alloc(da, before)
            di = self.c.register_instance(da, bounds, FIELDS, dst_layout, offset=offset)
        else:
            self.put_file(f"d{case}.bin", before)
            di = self.dsk_instance(f"d{case}.bin", bounds, dst_layout, FIELDS, offset=offset)
        info = self.c.copy(si, di, box=box, timeout=60)
        self.assertEqual(info.state, "done", info)
        self.assertNoDiskHopConverts(info)
        after = (
            self.read_alloc(da, len(before)) if ends[1] == "sys0" else self.get_file(f"d{case}.bin")
        )
        expected = bytearray(before)
        index = {p: n for n, p in enumerate(_points(bounds))}
        for p in _points(box or bounds):
            for f, fmt in enumerate(FORMATS):
                struct.pack_into(fmt, expected, offset + dst_ref.offset(f, p), _value(f, index[p]))
        self.assertEqual(len(after), len(expected))
        self.assertTrue(after == bytes(expected), f"{info.path}: bytes differ")


if __name__ == "__main__":
    unittest.main()
