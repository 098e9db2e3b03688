"""ListSessions and ListAllocations (isoctl sessions, isoctl allocations)
against a real isometryd: the operator sees every session and what it
holds; another caller only its own session, by its token; nobody ever sees
a token; a caller with neither is refused with what to send.

    ISOMETRYD=build/daemon/isometryd ISOMETRY_PYTHONPATH=build/python \\
        /usr/bin/python3 -m unittest -v test_inventory   # in tests/python
"""

import json
import os
import shutil
import subprocess
import sys
import time
import unittest

FIXTURE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyfixture")
sys.path.insert(0, FIXTURE_DIR)
from client_env import ISOCTL, ISOMETRYD, client_modules  # noqa: E402
from isometryd_process import IsometrydProcess  # noqa: E402

grpc, isometry, pb, pb_grpc = client_modules("test_inventory")

CONFIG = """
[[memory]]
name = "sys0"
kind = "SYS"
pool = "64MiB"
staging = "16MiB"

[[channel]]
name = "memcpy0"
kind = "memcpy"
"""


@unittest.skipUnless(ISOMETRYD, "ISOMETRYD is not set")
class InventoryTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir, cls.daemon = IsometrydProcess.started_in_temp_dir(
            ISOMETRYD, CONFIG, "isometry-inventory-")
        with open(os.path.join(cls.dir, "state", "operator.token")) as f:
            cls.operator = f.read().strip()
        cls.channel = grpc.insecure_channel(f"unix:{cls.daemon.socket}")
        cls.stub = pb_grpc.IsometryStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.daemon.stop()
        cls.daemon.close()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def client(self, name):
        c = isometry.Client(self.daemon.socket, name=name)
        self.addCleanup(c.close)
        return c

    def call(self, method, request, **metadata):
        return getattr(self.stub, method)(request, metadata=list(metadata.items()))

    def sessions(self, **md):
        return self.call("ListSessions", pb.ListSessionsRequest(),
                         **md).sessions

    def allocations(self, **md):
        return self.call("ListAllocations", pb.ListAllocationsRequest(), **md).allocations

    def test_a_session_sees_only_itself_and_the_operator_everyone(self):
        victim, other = self.client("victim"), self.client("other")
        kept = victim.allocate("sys0", 1 << 20)
        victim.publish(kept)
        victim.allocate("sys0", 4096)
        mine = other.allocate("sys0", 8192)
        as_other = {"isometry-session": other.session}
        listed = self.sessions(**as_other)
        self.assertEqual([s.owner.session_id for s in listed], [other.session_id])
        self.assertEqual(listed[0].owner.client_name, "other")
        self.assertEqual((listed[0].allocations, listed[0].allocated_bytes), (1, 8192))
        self.assertEqual(listed[0].transport, "gRPC")
        self.assertEqual([a.id for a in self.allocations(**as_other)], [mine.id])
        # The operator: both sessions and all three allocations, by owner.
        as_op = {"isometry-operator": self.operator}
        everyone = {s.owner.session_id: s for s in self.sessions(**as_op)}
        self.assertEqual(everyone[victim.session_id].allocations, 2)
        self.assertEqual(everyone[victim.session_id].allocated_bytes, (1 << 20) + 4096)
        owners = {a.id: a for a in self.allocations(**as_op)}
        self.assertEqual(owners[kept.id].owner.session_id, victim.session_id)
        self.assertTrue(owners[kept.id].published)
        self.assertEqual(owners[mine.id].owner.client_name, "other")
        # No token in any answer, the operator's included.
        for answer in (self.call("ListSessions", pb.ListSessionsRequest(), **as_op),
                       self.call("ListAllocations", pb.ListAllocationsRequest(), **as_op)):
            text = answer.SerializeToString()
            for token in (victim.session, other.session, self.operator):
                self.assertNotIn(token.encode(), text)
        # The victim leaves (the daemon sees its stream end a moment
        # later): its published allocation stays, an orphan.
        victim.close()
        deadline = time.monotonic() + 10
        while victim.session_id in [s.owner.session_id for s in self.sessions(**as_op)]:
            self.assertLess(time.monotonic(), deadline, "the closed session is still listed")
            time.sleep(0.02)
        orphan = {a.id: a for a in self.allocations(**as_op)}[kept.id]
        self.assertEqual(orphan.owner.session_id, 0)

    def test_no_token_a_forged_one_or_a_wrong_operator_token_is_refused(self):
        self.client("bystander").allocate("sys0", 4096)
        for method, request in (("ListSessions", pb.ListSessionsRequest()),
                                ("ListAllocations", pb.ListAllocationsRequest())):
            with self.assertRaises(grpc.RpcError) as cm:
                self.call(method, request)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
            self.assertIn("operator token", cm.exception.details())
            for forged in ("1.00", "garbage", "1." + "0" * 64):
                with self.assertRaises(grpc.RpcError) as cm:
                    self.call(method, request, **{"isometry-session": forged})
                # As every call with an unknown session token is refused.
                self.assertEqual(cm.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)
                self.assertIn("unknown or closed session", cm.exception.details())
            # A wrong operator token is no operator token.
            with self.assertRaises(grpc.RpcError) as cm:
                self.call(method, request, **{"isometry-operator": "0" * len(self.operator)})
            self.assertEqual(cm.exception.code(), grpc.StatusCode.PERMISSION_DENIED)

    @unittest.skipUnless(ISOCTL, "ISOCTL is not set")
    def test_isoctl_sessions_allocations_and_watches(self):
        c = self.client("lister")
        a = c.allocate("sys0", 8192)
        c.watch(a, 0, 4096)
        token = os.path.join(self.dir, "state", "operator.token")

        def isoctl(*args, operator=token):
            return subprocess.run([ISOCTL, "--socket", self.daemon.socket, "--operator-token",
                                   operator, *args], capture_output=True, text=True, timeout=30)

        table = isoctl("sessions")
        self.assertEqual(table.returncode, 0, table.stderr)
        self.assertRegex(table.stdout, r"SESSION +CLIENT +UID +PID +TRANSPORT")
        self.assertRegex(table.stdout, rf"\b{c.session_id} +lister\b")
        listed = json.loads(isoctl("sessions", "-o", "json").stdout)["sessions"]
        mine = [x for x in listed if x["owner"]["session_id"] == c.session_id]
        self.assertEqual(len(mine), 1)
        self.assertEqual((mine[0]["allocations"], mine[0]["allocated_bytes"]), (1, 8192))
        self.assertIsInstance(mine[0]["age_s"], float)
        wide = isoctl("allocations", "-o", "wide")
        self.assertEqual(wide.returncode, 0, wide.stderr)
        self.assertIn("MAPPED BY OTHERS", wide.stdout)
        self.assertRegex(wide.stdout, rf"\b{a.id} +sys0 +8\.00 KiB +{c.session_id} 'lister' +no +yes")
        watches = json.loads(isoctl("watches", "-o", "json").stdout)["watches"]
        self.assertEqual([w["allocation"] for w in watches], [a.id])
        self.assertIn(str(a.id), isoctl("watches").stdout)
        # No operator token: refused, saying what to send (exit 1).
        refused = isoctl("sessions", operator="")
        self.assertEqual(refused.returncode, 1)
        self.assertIn("operator token", refused.stderr)


if __name__ == "__main__":
    unittest.main()
