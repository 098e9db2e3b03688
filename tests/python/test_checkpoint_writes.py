"""Every way bytes enter a checkpointed allocation is in its incremental
checkpoints (issue #50, item 1), against a real isometryd over gRPC: a
seeded random interleaving of the owner's Write and WriteStream, another
client's Write (an active put), Copy into the allocation by the owner and
by another client, Restore into it, DirtyPages clears, and checkpoints into
two files; after each checkpoint the file restores byte-exact to a shadow
copy of what the allocation held. The seed is printed; set
ISOMETRY_TEST_SEED to replay one. Run like test_python_client (ISOMETRYD,
ISOMETRY_PYTHONPATH; Debian's /usr/bin/python3).
"""

import os
import random
import shutil
import sys
import unittest

import test_python_client as ref  # its tests are not collected here
from test_python_client import ISOMETRYD, SKIP_REASON

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyfixture"))
from isometryd_process import IsometrydProcess  # noqa: E402

if ref._IMPORT_ERROR is None:
    import isometry

CONFIG = """
checkpoint_max_deltas = 4

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
TABLE = 384 * PAGE  # past 1 MiB, so a large write goes through WriteStream
SLOT = 5 * PAGE  # a copy's size; slots start at odd byte offsets
SLOTS = [PAGE * 3 + 100, PAGE * 70 + 1, PAGE * 200 + 4000, TABLE - SLOT]
FILES = ["a.img", "b.img"]
STEPS = 90


@unittest.skipUnless(ISOMETRYD, SKIP_REASON)
class CheckpointWritesTest(unittest.TestCase):
    def setUp(self):
        if ref._IMPORT_ERROR is not None:
            self.fail(f"cannot import the isometry package ({ref._IMPORT_ERROR})")
        try:
            self.dir, self.daemon = IsometrydProcess.started_in_temp_dir(
                ISOMETRYD, CONFIG, "isometry-ckw-", dirs=["dsk"], daemon=dict(log_level="warn"))
        except AssertionError as e:
            self.fail(str(e))
        self.owner = isometry.Client(self.daemon.socket, name="owner", connect_timeout=10)
        self.other = isometry.Client(self.daemon.socket, name="other", connect_timeout=10)

    def tearDown(self):
        self.other.close()
        self.owner.close()
        rc = self.daemon.stop(timeout_s=30)
        self.daemon.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        self.assertEqual(rc, 0)

    def instance(self, client, alloc, offset):
        return client.register_instance(alloc, bounds=[SLOT], fields=[("b", 1)], layout="F,x",
                                        offset=offset)

    def test_random_writes_and_checkpoints_restore_exact(self):
        seed = int(os.environ.get("ISOMETRY_TEST_SEED", random.randrange(1 << 32)))
        print(f"\ncheckpoint writes: seed {seed} (ISOMETRY_TEST_SEED={seed} replays it)",
              flush=True)
        rng = random.Random(seed)
        o, w = self.owner, self.other
        table = o.allocate("sys0", TABLE)
        shadow = bytearray(rng.randbytes(TABLE))
        o.write(table, 0, bytes(shadow))
        o.publish(table)  # the other client writes and copies into it
        o.watch(table, 0, TABLE, action="apply_log", handler="dirty_pages", log_data=False,
                log_bytes=4 << 20)
        check = o.allocate("sys0", TABLE)  # where each checkpoint is restored
        # Copy sources: one allocation per client, an instance per slot.
        sources = {}
        for who in (o, w):
            src = who.allocate("sys0", SLOT)
            sources[who] = (src, self.instance(who, src, 0),
                            [self.instance(who, int(table), at) for at in SLOTS])
        saved = {}  # file -> the image its last checkpoint holds
        kinds = {"full": 0, "incremental": 0}

        def checkpoint(trace):
            file = rng.choices(FILES, weights=[4, 1])[0]
            r = o.checkpoint(table, "dsk0", file, full=rng.random() < 0.05)
            kinds["full" if r.full else "incremental"] += 1
            trace.append(f"checkpoint {file}: full={r.full} pages={r.pages_written} "
                         f"reason={r.full_reason!r}")
            saved[file] = bytes(shadow)
            o.restore(check, "dsk0", file)
            got = o.read(check, 0, TABLE)
            if got != saved[file]:
                bad = [p for p in range(TABLE // PAGE)
                       if got[p * PAGE:(p + 1) * PAGE] != saved[file][p * PAGE:(p + 1) * PAGE]]
                self.fail(f"seed {seed}: {file} restores with pages {bad[:20]} differing after\n  "
                          + "\n  ".join(trace[-12:]))

        def small_write(client, name, trace):
            at = rng.randrange(TABLE - 1)
            data = rng.randbytes(rng.randint(1, min(3 * PAGE, TABLE - at)))
            client.write(table, at, data)
            shadow[at:at + len(data)] = data
            trace.append(f"{name} Write [{at}, +{len(data)})")

        def stream_write(trace):
            n = rng.randint((1 << 20) + 1, TABLE - PAGE)
            at = rng.randrange(TABLE - n)
            data = rng.randbytes(n)
            o.write(table, at, data)  # more than 1 MiB: WriteStream
            shadow[at:at + n] = data
            trace.append(f"owner WriteStream [{at}, +{n})")

        def copy(client, name, trace):
            src, src_inst, slots = sources[client]
            data = rng.randbytes(SLOT)
            client.write(src, 0, data)
            i = rng.randrange(len(SLOTS))
            client.copy(src_inst, slots[i])
            shadow[SLOTS[i]:SLOTS[i] + SLOT] = data
            trace.append(f"{name} Copy into [{SLOTS[i]}, +{SLOT})")

        def restore(trace):
            file = rng.choice([f for f in FILES if f in saved] or [None])
            if file is None:
                return
            o.restore(table, "dsk0", file)
            shadow[:] = saved[file]
            trace.append(f"Restore from {file}")

        def clear(trace):
            dropped = o.dirty_pages(table, clear=True)
            trace.append(f"DirtyPages clear ({len(dropped)} pages)")

        ops = [
            (20, lambda t: small_write(o, "owner", t)),
            (4, stream_write),
            (12, lambda t: small_write(w, "other", t)),
            (8, lambda t: copy(o, "owner", t)),
            (8, lambda t: copy(w, "other", t)),
            (4, restore),
            (2, clear),
            (16, checkpoint),
        ]
        trace = []
        for _ in range(STEPS):
            op = rng.choices([f for _, f in ops], weights=[n for n, _ in ops])[0]
            op(trace)
        checkpoint(trace)
        print(f"checkpoints: {kinds}", flush=True)
        self.assertGreater(kinds["incremental"], 0, "no checkpoint was incremental")

    def test_untracked_bytes_make_the_checkpoint_full(self):
        o = self.owner
        table = o.allocate("sys0", 8 * PAGE)
        o.write(table, 0, bytes(8 * PAGE))
        region = o.watch(table, 0, 4 * PAGE, action="apply_log", handler="dirty_pages")
        self.assertTrue(o.checkpoint(table, "dsk0", "t.img").full)
        o.write(table, 6 * PAGE, b"outside")  # in no dirty_pages region
        r = o.checkpoint(table, "dsk0", "t.img")
        self.assertTrue(r.full)
        self.assertIn("no dirty_pages region", r.full_reason)
        # Watching the rest: writes there were not tracked until now.
        o.watch(table, 4 * PAGE, 4 * PAGE, action="apply_log", handler="dirty_pages")
        r = o.checkpoint(table, "dsk0", "t.img")
        self.assertTrue(r.full)
        self.assertIn("was watched after it", r.full_reason)
        o.write(table, 6 * PAGE, b"tracked")
        r = o.checkpoint(table, "dsk0", "t.img")
        self.assertFalse(r.full, r.full_reason)
        self.assertEqual(r.pages_written, 1)
        # Another file in between: its checkpoint took the dirty set.
        self.assertTrue(o.checkpoint(table, "dsk0", "u.img").full)
        o.write(table, PAGE, b"after u")
        r = o.checkpoint(table, "dsk0", "t.img")
        self.assertTrue(r.full)
        self.assertIn("not into dsk0:t.img", r.full_reason)
        o.unwatch(table, region)
        o.write(table, 2 * PAGE, b"unwatched")
        r = o.checkpoint(table, "dsk0", "t.img")
        self.assertTrue(r.full)
        self.assertIn("no dirty_pages region", r.full_reason)


if __name__ == "__main__":
    unittest.main()
