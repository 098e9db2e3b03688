"""ExplainTransfer and `isoctl explain` against a real isometryd: why a copy
took its path, the paths it could have taken with their predicted rates and
the rule that ruled each out, and its measured rate against the predicted
one; only for its own session or the operator. ExplainPlan (`isoctl plan`)
lists the same alternatives.

    ISOMETRYD=build/daemon/isometryd ISOMETRY_PYTHONPATH=build/python \\
        ISOCTL=build/tools/isoctl/isoctl /usr/bin/python3 -m unittest -v test_explain
"""

import json
import os
import shutil
import subprocess
import sys
import unittest

FIXTURE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyfixture")
sys.path.insert(0, FIXTURE_DIR)
from client_env import ISOCTL, ISOMETRYD, client_modules  # noqa: E402
from isometryd_process import IsometrydProcess  # noqa: E402

grpc, isometry, pb, pb_grpc = client_modules("test_explain")

CONFIG = """
[[memory]]
name = "sys0"
kind = "SYS"
pool = "160MiB"
staging = "64MiB"

[[memory]]
name = "reg0"
kind = "REG"
staging = "64MiB"

[[memory]]
name = "zcm0"
kind = "ZCM"
staging = "64MiB"

[[channel]]
name = "memcpy0"
kind = "memcpy"
"""

FIELDS = [("a", 4), ("b", 4)]
LARGE = 4 << 20  # entries: 32 MiB, over the full planner's 16 MiB threshold


@unittest.skipUnless(ISOMETRYD, "ISOMETRYD is not set")
class ExplainTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir, cls.daemon = IsometrydProcess.started_in_temp_dir(
            ISOMETRYD, CONFIG, "isometry-explain-")
        cls.token_file = os.path.join(cls.dir, "state", "operator.token")
        with open(cls.token_file) as f:
            cls.operator = f.read().strip()
        cls.channel = grpc.insecure_channel(f"unix:{cls.daemon.socket}")
        cls.stub = pb_grpc.IsometryStub(cls.channel)
        cls.owner = isometry.Client(cls.daemon.socket, name="explained")
        cls.large = cls.transpose(LARGE)
        cls.small = cls.transpose(1024)

    @classmethod
    def transpose(cls, n):
        """An AOS -> SOA copy of n entries within sys0; its TransferInfo."""
        c = cls.owner
        a, b = c.allocate("sys0", n * 8), c.allocate("sys0", n * 8)
        src = c.register_instance(a, [n], FIELDS, "F,x")
        dst = c.register_instance(b, [n], FIELDS, "x,F")
        info = c.copy(src, dst)
        assert info.state == "done", info
        return info

    @classmethod
    def tearDownClass(cls):
        cls.owner.close()
        cls.channel.close()
        cls.daemon.stop()
        cls.daemon.close()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def explain(self, transfer, **metadata):
        return self.stub.ExplainTransfer(pb.ExplainTransferRequest(transfer=transfer),
                                         metadata=list(metadata.items()))

    def isoctl(self, *args, operator=None):
        return subprocess.run(
            [ISOCTL, "--socket", self.daemon.socket, "--operator-token",
             self.token_file if operator is None else operator, *args],
            capture_output=True, text=True, timeout=60)

    def check_alternatives(self, plan, path):
        """The chosen path first and only it; each other with a rate or a
        rejection and a verdict; the evaluated ones fastest first."""
        alts = plan.alternatives
        self.assertGreaterEqual(len(alts), 3, plan)
        self.assertTrue(alts[0].chosen)
        self.assertEqual(alts[0].path, path)
        self.assertEqual([a.chosen for a in alts[1:]], [False] * (len(alts) - 1))
        self.assertGreaterEqual(plan.alternatives_weighed, len(alts) - 1)
        paths = [a.path for a in alts]
        self.assertEqual(len(set(paths)), len(paths), paths)
        rates = [a.predicted_bytes_per_s for a in alts[1:] if a.predicted_bytes_per_s > 0]
        self.assertEqual(rates, sorted(rates, reverse=True))
        for a in alts:
            self.assertTrue(a.verdict, a)
            self.assertEqual(len(a.hops), a.path.count("-["), a)
        return alts

    def test_a_large_copy_lists_the_paths_it_could_have_taken(self):
        e = self.explain(self.large.id, **{"isometry-operator": self.operator})
        self.assertEqual(e.transfer.id, self.large.id)
        self.assertEqual(e.transfer.state, "done")
        self.assertEqual(e.plan.algorithm, "full")
        self.assertEqual(e.plan.text, e.transfer.path)
        alts = self.check_alternatives(e.plan, e.transfer.path)
        self.assertTrue(alts[0].verdict.startswith("limited by"), alts[0].verdict)
        staged = [a for a in alts if "reg0" in a.path or "zcm0" in a.path]
        self.assertGreaterEqual(len(staged), 2, [a.path for a in alts])
        for a in alts[1:]:
            # The full algorithm weighed them: each lost on rate or on a rule.
            self.assertRegex(a.verdict, r"^(slower: |as fast within the planner's margin|ruled "
                             r"out by the model: )")
        self.assertRegex(e.comparison, r"^measured \d+\.\d\d GB/s: \d+% of the predicted ")
        self.assertGreater(e.transfer.measured_bytes_per_s, 0)

    def test_a_small_copy_says_the_others_were_not_weighed(self):
        e = self.explain(self.small.id, **{"isometry-session": self.owner.session})
        self.assertEqual(e.plan.algorithm, "simple")
        alts = self.check_alternatives(e.plan, e.transfer.path)
        for a in alts[1:]:
            self.assertTrue(a.verdict.startswith("not weighed: "), a.verdict)
        self.assertIn("a copy under 1 MiB", e.comparison)

    def test_only_its_session_and_the_operator_may_explain_it(self):
        other = isometry.Client(self.daemon.socket, name="other")
        self.addCleanup(other.close)
        for metadata in ({"isometry-session": other.session}, {},
                         {"isometry-operator": "0" * len(self.operator)}):
            with self.assertRaises(grpc.RpcError) as cm:
                self.explain(self.large.id, **metadata)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.PERMISSION_DENIED, metadata)
            self.assertIn("explaining", cm.exception.details())
        with self.assertRaises(grpc.RpcError) as cm:
            self.explain(1 << 40, **{"isometry-operator": self.operator})
        self.assertEqual(cm.exception.code(), grpc.StatusCode.NOT_FOUND)
        self.assertIn("no transfer", cm.exception.details())

    def test_explain_plan_lists_the_same_alternatives(self):
        req = pb.ExplainPlanRequest(src_memory="sys0", src_layout="F,x", dst_memory="sys0",
                                    dst_layout="x,F",
                                    bounds=pb.Box(lo=[0], hi=[LARGE]),
                                    fields=[pb.Field(name=n, size=b) for n, b in FIELDS])
        plan = self.stub.ExplainPlan(req)
        self.check_alternatives(plan, plan.text)

    @unittest.skipUnless(ISOCTL, "ISOCTL is not set")
    def test_isoctl_explain(self):
        table = self.isoctl("explain", str(self.large.id))
        self.assertEqual(table.returncode, 0, table.stderr)
        self.assertIn(f"transfer {self.large.id}: done", table.stdout)
        self.assertIn("algorithm: full", table.stdout)
        self.assertRegex(table.stdout, r"alternatives \(\d+ other paths weighed; \* the path taken\)")
        self.assertRegex(table.stdout, r"\n  \* \S+ \S+/s  sys0<F,x> -\[memcpy0\]-> ")
        self.assertRegex(table.stdout, r"\n {8}slower: predicted ")
        doc = json.loads(self.isoctl("explain", str(self.large.id), "-o", "json").stdout)
        alts = doc["plan"]["alternatives"]
        self.assertGreaterEqual(len(alts), 3)
        for a in alts:
            self.assertIsInstance(a["predicted_bytes_per_s"], float)
            self.assertIsInstance(a["chosen"], bool)
        self.assertIsInstance(doc["plan"]["alternatives_weighed"], int)
        plan = self.isoctl("plan", "sys0", "sys0", "--extents", str(LARGE), "--fields",
                           "a:4,b:4", "--src-layout", "F,x", "--dst-layout", "x,F")
        self.assertEqual(plan.returncode, 0, plan.stderr)
        self.assertIn("alternatives (", plan.stdout)
        # Without the operator token, another's transfer is refused (exit 1).
        refused = self.isoctl("explain", str(self.large.id), operator="")
        self.assertEqual(refused.returncode, 1)
        self.assertIn("PERMISSION_DENIED", refused.stderr)
        missing = self.isoctl("explain", str(1 << 40))
        self.assertEqual(missing.returncode, 1)
        self.assertIn("no transfer", missing.stderr)


if __name__ == "__main__":
    unittest.main()
