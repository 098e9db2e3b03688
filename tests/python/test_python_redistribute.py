"""Distributed instances and M:N redistribution from the Python client
(issue #18), over gRPC against a real isometryd: a 2x1 BLOCK producer of
three sessions' worth of ranks redistributed into a 1x3 CYCLIC consumer
with column-major local storage, checked element by element; progress and
completion through the transfer calls; bad joins refused; cyclic rows into
column-major DSK files, where every file run is one element (issue #50
item 9: written through images of the files in memory, by windows for a
large file, or piece by piece without room for an image), byte by byte.

Run like test_python_client (ISOMETRYD, ISOMETRY_PYTHONPATH; Debian's
/usr/bin/python3).
"""

import array
import os
import shutil
import struct
import sys
import unittest

import test_python_client as ref  # its tests are not collected here
from test_python_client import ISOMETRYD, SKIP_REASON

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyfixture"))
from isometryd_process import IsometrydProcess  # noqa: E402
from attack_case import wait_until  # noqa: E402

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
staging = "64MiB"

[[channel]]
name = "memcpy0"
kind = "memcpy"

[[channel]]
name = "disk_read0"
kind = "disk_read"

[[channel]]
name = "disk_write0"
kind = "disk_write"
"""

ROWS, COLS = 13, 10


def owned(n, block, procs, coord):
    """The global indices grid coordinate `coord` holds, in local order."""
    return [g for g in range(n) if (g // block) % procs == coord]


def grant_of(name):
    """Job `name`'s grant: gRPC sessions share one namespace of names, so a
    rank of another session joins, and a job redistributes another job's
    instance, only with that instance's grant."""
    return f"test grant of job {name}".encode()


def redistribute_granted(client, producer, consumer, **kw):
    return client.redistribute(producer, consumer, producer_grant=grant_of(producer),
                               consumer_grant=grant_of(consumer), **kw)


def value(i, j):
    return i * 1000 + j


@unittest.skipUnless(ISOMETRYD, SKIP_REASON)
class RedistributeTest(unittest.TestCase):
    def setUp(self):
        if ref._IMPORT_ERROR is not None:
            self.fail(f"cannot import the isometry package ({ref._IMPORT_ERROR})")
        try:
            self.dir, self.daemon = IsometrydProcess.started_in_temp_dir(
                ISOMETRYD, CONFIG, "isometry-pyrd-", dirs=["dsk"], daemon=dict(log_level="warn"))
        except AssertionError as e:
            self.fail(str(e))
        self.clients = []

    def tearDown(self):
        for c in self.clients:
            c.close()
        rc = self.daemon.stop(timeout_s=30)
        self.daemon.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        self.assertEqual(rc, 0)

    def rank(self, rows, cols, column_major, fill):
        """A session holding a rows x cols int32 instance: `fill(i, j)` at
        local (i, j), or zeros."""
        c = isometry.Client(self.daemon.socket, name="rank", connect_timeout=10)
        self.clients.append(c)
        data = bytearray(rows * cols * 4)
        for i in range(rows):
            for j in range(cols):
                at = (j * rows + i) if column_major else (i * cols + j)
                struct.pack_into("<i", data, at * 4, fill(i, j) if fill else 0)
        a = c.allocate("sys0", max(len(data), 1))
        c.write(a, 0, bytes(data))
        inst = c.register_instance(a, bounds=[rows, cols], fields=[("v", 4)],
                                   layout="F,x,y" if column_major else "F,y,x")
        return c, a, inst

    def test_block_rows_into_cyclic_columns(self):
        # Producer: 2x1 grid, BLOCK x BLOCK (rows 0..6 and 7..12).
        prod = []
        for p in range(2):
            rows = owned(ROWS, 7, 2, p)
            c, _, inst = self.rank(len(rows), COLS, False, lambda i, j, r=rows: value(r[i], j))
            info = c.join_distributed("field", [ROWS, COLS], ["block", "block"], [2, 1], 4, p,
                                      inst, grant=grant_of("field"))
            self.assertEqual(info.joined, p + 1)
            prod.append(c)
        # Consumer: 1x3 grid, BLOCK x BLOCK_CYCLIC(2), column-major storage.
        cons = []
        for q in range(3):
            cols = owned(COLS, 2, 3, q)
            c, a, inst = self.rank(ROWS, len(cols), True, None)
            info = c.join_distributed("analysis", [ROWS, COLS], ["block", ("block_cyclic", 2)],
                                      [1, 3], 4, q, inst, grant=grant_of("analysis"))
            cons.append((c, a, cols))
        self.assertEqual(info.joined, 3)
        self.assertIn("BLOCK_CYCLIC(2)", info.distribution)

        tid = redistribute_granted(cons[0][0], "field", "analysis", wait=False)
        done = cons[0][0].wait(tid)
        self.assertEqual(done.state, "done")
        self.assertEqual(done.bytes, ROWS * COLS * 4)
        for c, a, cols in cons:
            raw = c.read(a, 0, ROWS * len(cols) * 4)
            for i in range(ROWS):
                for k, j in enumerate(cols):
                    got = struct.unpack_from("<i", raw, (k * ROWS + i) * 4)[0]
                    self.assertEqual(got, value(i, j), f"element ({i}, {j})")
        info = redistribute_granted(prod[0], "field", "analysis")
        self.assertEqual(info.state, "done")
        self.assertIn("piece copies done", info.path)

    def test_files_as_producer_storage(self):
        # Producer: 1x2 grid of CYCLIC columns, each rank's columns in a
        # DSK file (row-major); consumer: one rank in a pool allocation.
        for p in range(2):
            cols = owned(COLS, 1, 2, p)
            with open(os.path.join(self.dir, "dsk", f"rank{p}.bin"), "wb") as f:
                for i in range(ROWS):
                    for j in cols:
                        f.write(struct.pack("<i", value(i, j)))
            c = isometry.Client(self.daemon.socket, name="rank", connect_timeout=10)
            self.clients.append(c)
            inst = c.register_instance(0, [ROWS, len(cols)], [("v", 4)], "F,y,x",
                                       memory="dsk0", file=f"rank{p}.bin")
            c.join_distributed("onfile", [ROWS, COLS], ["block", "cyclic"], [1, 2], 4, p, inst,
                               grant=grant_of("onfile"))
        c, a, inst = self.rank(ROWS, COLS, False, None)
        c.join_distributed("whole", [ROWS, COLS], ["block", "block"], [1, 1], 4, 0, inst,
                           grant=grant_of("whole"))
        redistribute_granted(c, "onfile", "whole")
        raw = c.read(a, 0, ROWS * COLS * 4)
        want = b"".join(struct.pack("<i", value(i, j)) for i in range(ROWS) for j in range(COLS))
        self.assertEqual(raw, want)
        # Files as a consumer's storage: the pieces write into the existing
        # files in place, each its own elements.
        originals = []
        for p in range(2):
            path = os.path.join(self.dir, "dsk", f"rank{p}.bin")
            with open(path, "rb") as f:
                originals.append(f.read())
            with open(path, "r+b") as f:
                f.write(bytes(len(originals[-1])))
        info = redistribute_granted(c, "whole", "onfile")
        self.assertEqual(info.state, "done")
        for p in range(2):
            with open(os.path.join(self.dir, "dsk", f"rank{p}.bin"), "rb") as f:
                self.assertEqual(f.read(), originals[p], f"rank {p}'s file")

    def cyclic_rows_into_files(self, rows, cols, procs, files, fields, producer_on_file):
        """Global rows x cols float64 (element (i, j) holds i * cols + j, as
        `fields` of 8 bytes together): a procs x 1 CYCLIC-rows producer
        (row-major, in the pool or in DSK files) redistributed into a
        1 x `files` BLOCK-columns consumer whose local arrays are
        column-major DSK files, each at an offset between a header and a
        trailer that must stay as they were. Every file run is one
        element. Returns the Redistribute's answer; checks every byte."""
        tag = f"{rows}x{cols}-{procs}-{files}-{len(fields)}-{producer_on_file}"
        prod, cons = f"rows-{tag}", f"columns-{tag}"
        element = 8 * len(fields)
        layout_c = "F,x,y" if len(fields) == 1 else "x,y,F"  # column-major AOS, or SOA

        def element_bytes(i, j):
            return array.array("d", [float(i * cols + j)] * len(fields)).tobytes()

        for p in range(procs):
            mine = owned(rows, 1, procs, p)
            data = b"".join(element_bytes(i, j) for i in mine for j in range(cols))
            c = isometry.Client(self.daemon.socket, name="producer", connect_timeout=10)
            self.clients.append(c)
            named = [(f"f{k}", 8) for k in range(len(fields))]
            shape = dict(bounds=[len(mine), cols], fields=named, layout="F,y,x")
            if producer_on_file:
                with open(os.path.join(self.dir, "dsk", f"{tag}-p{p}.bin"), "wb") as f:
                    f.write(data)
                inst = c.register_instance(0, memory="dsk0", file=f"{tag}-p{p}.bin", **shape)
            else:
                a = c.allocate("sys0", len(data))
                c.write(a, 0, data)
                inst = c.register_instance(a, **shape)
            c.join_distributed(prod, [rows, cols], ["cyclic", "block"], [procs, 1], element, p,
                               inst, grant=grant_of(prod))
        header, trailer = b"header\x01" * 13, b"\x02trailer" * 7
        wants = []
        width = -(-cols // files)
        for q in range(files):
            mine = owned(cols, width, files, q)
            if len(fields) == 1:
                body = b"".join(element_bytes(i, j) for j in mine for i in range(rows))
            else:  # SOA: each field's column-major array in turn
                body = b"".join(array.array("d", [float(i * cols + j)]).tobytes()
                                for _ in fields for j in mine for i in range(rows))
            wants.append(header + body + trailer)
            path = os.path.join(self.dir, "dsk", f"{tag}-c{q}.bin")
            with open(path, "wb") as f:
                f.write(header + bytes(len(body)) + trailer)
            c = isometry.Client(self.daemon.socket, name="consumer", connect_timeout=10)
            self.clients.append(c)
            named = [(f"f{k}", 8) for k in range(len(fields))]
            inst = c.register_instance(0, [rows, len(mine)], named, layout_c, offset=len(header),
                                       memory="dsk0", file=f"{tag}-c{q}.bin")
            c.join_distributed(cons, [rows, cols], ["block", "block"], [1, files], element, q,
                               inst, grant=grant_of(cons))
        info = redistribute_granted(c, prod, cons)
        self.assertEqual(info.state, "done")
        self.assertEqual(info.bytes, rows * cols * element)
        for q in range(files):
            with open(os.path.join(self.dir, "dsk", f"{tag}-c{q}.bin"), "rb") as f:
                got = f.read()
            self.assertEqual(len(got), len(wants[q]), f"consumer {q}'s file size")
            if got != wants[q]:
                at = next(k for k in range(len(got)) if got[k] != wants[q][k])
                self.fail(f"consumer {q}'s file differs first at byte {at} ({tag})")
        return info

    def test_cyclic_rows_into_column_major_files(self):
        # Issue #50 item 9: every file run is one element (each producer
        # rank holds every third row; the consumers' files keep columns).
        # The pieces write each rank's storage in memory, then the file in
        # one range; the header and trailer around the instance stay.
        info = self.cyclic_rows_into_files(384, 256, 3, 2, ["v"], False)
        self.assertIn("2 of 2 consumer file ranges written from their image in memory", info.path)
        self.cyclic_rows_into_files(61, 37, 4, 3, ["v"], False)  # ragged: blocks do not divide
        self.cyclic_rows_into_files(40, 30, 3, 2, ["a", "b"], False)  # SOA files
        self.cyclic_rows_into_files(64, 48, 2, 2, ["v"], True)  # producers on files too

    def test_a_file_larger_than_a_window(self):
        # 2304 x 1024 doubles (18 MiB) in one column-major file: cut into
        # two windows of whole columns, each imaged and written in turn.
        rows, cols, procs = 2304, 1024, 4
        for p in range(procs):
            data = array.array("d")
            for i in range(p, rows, procs):
                data.extend(range(i * cols, (i + 1) * cols))
            c = isometry.Client(self.daemon.socket, name="producer", connect_timeout=10)
            self.clients.append(c)
            a = c.allocate("sys0", len(data) * 8)
            c.write(a, 0, data.tobytes())
            inst = c.register_instance(a, [len(data) // cols, cols], [("v", 8)], "F,y,x")
            c.join_distributed("big-rows", [rows, cols], ["cyclic", "block"], [procs, 1], 8, p,
                               inst, grant=grant_of("big-rows"))
        header = b"kept" * 3
        path = os.path.join(self.dir, "dsk", "big.bin")
        with open(path, "wb") as f:
            f.write(header + bytes(rows * cols * 8) + header)
        c = isometry.Client(self.daemon.socket, name="consumer", connect_timeout=10)
        self.clients.append(c)
        inst = c.register_instance(0, [rows, cols], [("v", 8)], "F,x,y", offset=len(header),
                                   memory="dsk0", file="big.bin")
        c.join_distributed("big-columns", [rows, cols], ["block", "block"], [1, 1], 8, 0, inst,
                           grant=grant_of("big-columns"))
        info = redistribute_granted(c, "big-rows", "big-columns")
        self.assertIn("2 of 2 consumer file ranges written from their image in memory", info.path)
        want = array.array("d")
        for j in range(cols):
            want.extend(range(j, rows * cols, cols))
        with open(path, "rb") as f:
            got = f.read()
        self.assertEqual(len(got), len(want) * 8 + 2 * len(header))
        self.assertTrue(got == header + want.tobytes() + header, "the file differs")

    def test_files_without_room_for_an_image_are_written_piece_by_piece(self):
        # Images are charged to the session's
        # daemon.max_watch_scratch_bytes_per_session: with 4 KiB no 12 KiB
        # file's image fits, and its pieces write it directly, as before.
        self.daemon.stop(timeout_s=30)
        self.daemon.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir, self.daemon = IsometrydProcess.started_in_temp_dir(
            ISOMETRYD, CONFIG, "isometry-pyrd-", dirs=["dsk"],
            daemon=dict(log_level="warn",
                        extra=[("max_watch_scratch_bytes_per_session", '"4KiB"')]))
        info = self.cyclic_rows_into_files(64, 48, 4, 2, ["v"], False)
        self.assertNotIn("from their image in memory", info.path)

    def test_bad_joins_are_refused(self):
        c, _, inst = self.rank(5, 4, False, None)
        c.join_distributed("x", [10, 4], ["block", "block"], [2, 1], 4, 0, inst,
                           grant=grant_of("x"))
        c2, _, inst2 = self.rank(5, 4, False, None)
        with self.assertRaises(IsometryError) as e:
            c2.join_distributed("x", [10, 4], ["cyclic", "block"], [2, 1], 4, 1, inst2,
                                grant=grant_of("x"))
        self.assertEqual(e.exception.code, "INVALID_ARGUMENT")
        self.assertIn("CYCLIC", e.exception.message)
        with self.assertRaises(IsometryError) as e:
            c2.join_distributed("x", [10, 4], ["block", "block"], [2, 1], 8, 1, inst2,
                                grant=grant_of("x"))
        self.assertEqual(e.exception.code, "INVALID_ARGUMENT")
        with self.assertRaises(ValueError):
            c2.join_distributed("x", [10, 4], ["diagonal", "block"], [2, 1], 4, 1, inst2,
                                grant=grant_of("x"))
        with self.assertRaises(IsometryError) as e:
            redistribute_granted(c, "x", "y")
        self.assertIn(e.exception.code, ("FAILED_PRECONDITION", "NOT_FOUND"))
        # The rank's session ends: the distributed instance goes with it.
        c2.join_distributed("x", [10, 4], ["block", "block"], [2, 1], 4, 1, inst2,
                            grant=grant_of("x"))
        sessions = c.status().sessions
        c2.close()
        self.clients.remove(c2)
        # Closing cancels the Attach stream; the daemon ends the session a
        # moment later, and a redistribution planned meanwhile is ABORTED.
        wait_until(lambda: c.status().sessions == sessions - 1, "the rank's session to end")
        c3, _, inst3 = self.rank(10, 4, False, None)
        c3.join_distributed("y", [10, 4], ["block", "block"], [1, 1], 4, 0, inst3,
                            grant=grant_of("y"))
        with self.assertRaises(IsometryError) as e:
            redistribute_granted(c3, "x", "y")
        self.assertEqual(e.exception.code, "NOT_FOUND")

    def test_a_job_split_between_local_and_grpc_ranks_is_named(self):
        # Ranks that joined over the local socket live in their uid's
        # namespace; a gRPC session sees only the gRPC sessions' one. The
        # refusal names both (issue #50, item 8).
        local = isometry.Client(self.daemon.socket, name="local-rank",
                                local_socket=os.path.join(self.dir, "local.sock"))
        self.clients.append(local)
        a = local.allocate("sys0", 10 * 4 * 4)
        inst = local.register_instance(a, bounds=[10, 4], fields=[("v", 4)], layout="F,y,x")
        local.join_distributed("ns_prod", [10, 4], ["block", "block"], [1, 1], 4, 0, inst)
        c, _, cinst = self.rank(10, 4, False, None)  # over gRPC
        c.join_distributed("ns_cons", [10, 4], ["block", "block"], [1, 1], 4, 0, cinst,
                           grant=grant_of("ns_cons"))
        with self.assertRaises(IsometryError) as e:
            c.redistribute("ns_prod", "ns_cons", consumer_grant=grant_of("ns_cons"))
        self.assertEqual(e.exception.code, "NOT_FOUND")
        msg = e.exception.message
        self.assertIn("no distributed instance 'ns_prod' in the gRPC sessions' shared namespace",
                      msg)
        self.assertIn(f"one of that name lives in uid {os.geteuid()}'s namespace", msg)
        self.assertIn("every rank of a job joins in one namespace", msg)


if __name__ == "__main__":
    unittest.main()
