"""Attacks on distributed instances and redistribution (issue #48, item 2).

gRPC sessions have no uid, so their distributed instances share one
namespace of names. An attacker (run as uid `nobody`, over gRPC like the
victim) tries what the outside attackers did: redistribute the victim's
unpublished memory into an instance of its own (read it), the other way
(overwrite it), take a free rank of the victim's job, end the victim's job
by leaving, and reach a local (uid) session's job. Each is refused with
PERMISSION_DENIED or NOT_FOUND, and the victim's job then completes with its
bytes intact.

Run like test_python_client (ISOMETRYD, ISOMETRY_PYTHONPATH); as root (the
attacker runs as `nobody`).
"""

import os
import struct
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyfixture"))
from attack_case import (ISOMETRYD, SKIP_REASON, note_skip, run_as_nobody,  # noqa: E402
                         start_daemon)

_IMPORT_ERROR = None
try:
    import isometry
    from isometry import IsometryError
except ImportError as e:
    _IMPORT_ERROR = e

note_skip("test_distributed_attacks")

DAEMON = dict(log_level="info", shutdown_grace_ms=500, extra=[("socket_mode", '"0666"')])
CONFIG = """
[[memory]]
name = "sys0"
kind = "SYS"
pool = "64MiB"
client_quota = "16MiB"
staging = "16MiB"

[[channel]]
name = "memcpy0"
kind = "memcpy"
"""

ROWS, COLS = 8, 6
GRANT = b"the victim job's secret grant!!!"
SECRET = b"".join(struct.pack("<i", 7000 + i) for i in range(ROWS * COLS))

# The attacker: one gRPC session as `nobody`, with an instance of its own
# shaped like the victim's, joined as "loot"; each attack's status code.
ATTACKER = r"""
import json, sys, isometry
sock, rows, cols = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
out = {}
c = isometry.Client(sock, name="attacker")
def code(fn, *a, **kw):
    try:
        fn(*a, **kw)
        return "OK"
    except isometry.IsometryError as e:
        out.setdefault("messages", []).append(e.message)
        return e.code
a = c.allocate("sys0", rows * cols * 4)
c.write(a, 0, b"\xee" * (rows * cols * 4))
inst = c.register_instance(a, bounds=[rows, cols], fields=[("v", 4)], layout="F,y,x")
half = c.register_instance(a, bounds=[rows // 2, cols], fields=[("v", 4)], layout="F,y,x")
c.join_distributed("loot", [rows, cols], ["block", "block"], [1, 1], 4, 0, inst)
out["read"] = code(c.redistribute, "victim", "loot")
out["read_wrong_grant"] = code(c.redistribute, "victim", "loot",
                               producer_grant=b"guessed grant, 16+ bytes")
out["write"] = code(c.redistribute, "loot", "victim")
out["take_rank"] = code(c.join_distributed, "victim", [rows, cols], ["block", "block"], [2, 1],
                        4, 1, half)
out["take_rank_wrong_grant"] = code(c.join_distributed, "victim", [rows, cols],
                                    ["block", "block"], [2, 1], 4, 1, half,
                                    grant=b"guessed grant, 16+ bytes")
out["local_job"] = code(c.redistribute, "localjob", "loot", producer_grant=b"x" * 16)
out["stolen"] = c.read(a, 0, 16).hex()
c.close()
print(json.dumps(out))
"""


def ints(raw):
    return list(struct.unpack(f"<{len(raw) // 4}i", raw))


@unittest.skipUnless(ISOMETRYD, SKIP_REASON)
class DistributedAttackTest(unittest.TestCase):
    def setUp(self):
        if _IMPORT_ERROR is not None:
            self.fail(f"cannot import the isometry package: {_IMPORT_ERROR}")
        if os.geteuid() != 0:
            self.skipTest("needs root to run the attacker as nobody")
        self.dir, self.daemon = start_daemon(self, CONFIG, "isometry-dist-attack-", DAEMON)
        self.socket = os.path.join(self.dir, "grpc.sock")
        self.clients = []
        self.addCleanup(lambda: [c.close() for c in self.clients])

    def client(self, name, **kw):
        c = isometry.Client(self.socket, name=name, **kw)
        self.clients.append(c)
        return c

    def rank(self, name, rows, data, **kw):
        """A gRPC session holding `rows` x COLS int32s (unpublished)."""
        c = self.client(name, **kw)
        a = c.allocate("sys0", rows * COLS * 4)
        c.write(a, 0, data)
        inst = c.register_instance(a, bounds=[rows, COLS], fields=[("v", 4)], layout="F,y,x")
        return c, a, inst

    def attack(self):
        return run_as_nobody(self, ATTACKER, self.socket, ROWS, COLS)

    def test_another_session_cannot_use_or_take_a_job(self):
        half = ROWS * COLS * 2
        v0, a0, i0 = self.rank("victim0", ROWS // 2, SECRET[:half])
        v0.join_distributed("victim", [ROWS, COLS], ["block", "block"], [2, 1], 4, 0, i0,
                            grant=GRANT)
        # A local (uid) session's job: another namespace, out of reach.
        local = self.client("local", local_socket=os.path.join(self.dir, "local.sock"))
        la = local.allocate("sys0", ROWS * COLS * 4)
        li = local.register_instance(la, bounds=[ROWS, COLS], fields=[("v", 4)], layout="F,y,x")
        local.join_distributed("localjob", [ROWS, COLS], ["block", "block"], [1, 1], 4, 0, li)

        got = self.attack()
        # Rank 1 was free while the attacker tried: it still is.
        self.assertEqual(got["take_rank"], "PERMISSION_DENIED", got)
        self.assertEqual(got["take_rank_wrong_grant"], "PERMISSION_DENIED", got)
        # The job was incomplete; completed now, then the attacks again.
        v1, a1, i1 = self.rank("victim1", ROWS // 2, SECRET[half:])
        v1.join_distributed("victim", [ROWS, COLS], ["block", "block"], [2, 1], 4, 1, i1,
                            grant=GRANT)
        got = self.attack()
        for what in ("read", "read_wrong_grant", "write", "take_rank", "take_rank_wrong_grant"):
            self.assertEqual(got[what], "PERMISSION_DENIED", (what, got))
        self.assertEqual(got["local_job"], "NOT_FOUND", got)
        self.assertEqual(got["stolen"], "ee" * 16, "the attacker's instance got the victim's bytes")
        self.assertTrue(any("grant" in m for m in got["messages"]), got["messages"])
        # The victim's memory is untouched, and its job (not ended by the
        # attacker's leaving) redistributes, with its grant, into a rank
        # of another of its sessions.
        self.assertEqual(v0.read(a0, 0, half) + v1.read(a1, 0, half), SECRET)
        w, wa, wi = self.rank("victim-consumer", ROWS, bytes(ROWS * COLS * 4))
        w.join_distributed("whole", [ROWS, COLS], ["block", "block"], [1, 1], 4, 0, wi,
                           grant=b"the consumer job's own grant")
        with self.assertRaises(IsometryError) as e:
            w.redistribute("victim", "whole")
        self.assertEqual(e.exception.code, "PERMISSION_DENIED")
        info = w.redistribute("victim", "whole", producer_grant=GRANT)
        self.assertEqual(info.state, "done")
        self.assertEqual(ints(w.read(wa, 0, ROWS * COLS * 4)), ints(SECRET))

    def test_grant_length_is_checked_and_a_grantless_job_stays_its_sessions(self):
        c, _, inst = self.rank("maker", ROWS // 2, SECRET[:ROWS * COLS * 2])
        with self.assertRaises(IsometryError) as e:
            c.join_distributed("j", [ROWS, COLS], ["block", "block"], [2, 1], 4, 0, inst,
                               grant=b"short")
        self.assertEqual(e.exception.code, "INVALID_ARGUMENT")
        self.assertIn("16 to 256", e.exception.message)
        c.join_distributed("j", [ROWS, COLS], ["block", "block"], [2, 1], 4, 0, inst)
        other, _, inst2 = self.rank("other", ROWS // 2, SECRET[:ROWS * COLS * 2])
        with self.assertRaises(IsometryError) as e:
            other.join_distributed("j", [ROWS, COLS], ["block", "block"], [2, 1], 4, 1, inst2,
                                   grant=b"any grant at all, 16 bytes")
        self.assertEqual(e.exception.code, "PERMISSION_DENIED")
        self.assertIn("without a grant", e.exception.message)
        # The session that made it joins its other rank itself.
        inst3 = c.register_instance(c.allocate("sys0", ROWS * COLS * 2), bounds=[ROWS // 2, COLS],
                                    fields=[("v", 4)], layout="F,y,x")
        self.assertEqual(c.join_distributed("j", [ROWS, COLS], ["block", "block"], [2, 1], 4, 1,
                                            inst3).joined, 2)


if __name__ == "__main__":
    unittest.main()
