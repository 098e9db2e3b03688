"""CPU-heavy gRPC calls against a real isometryd (issue #48, item 7).

Translating a large datatype (ExplainPlan, RegisterDatatype) takes the
daemon about a second of CPU. Run on gRPC's callback threads, a few
attackers flooding such calls, with no session, starved every other
client: a victim's GetStatus went from 0.6 ms to seconds. They now run on
daemon.translate_threads threads behind daemon.translate_queue, each
session (the session-less callers together) at most
daemon.max_translates_per_session at once, and a request heavier than
daemon.max_translate_weight is refused up front. Each test asserts the
clear refusal and that the victim's cheap calls keep their latency.

    ISOMETRYD=build/daemon/isometryd ISOMETRY_PYTHONPATH=build/python \\
        /usr/bin/python3 -m unittest -v test_translation_attacks   # in tests/python
"""

import json
import os
import statistics
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyfixture"))
from attack_case import SMALL_NODE, as_uid  # noqa: E402
from isometryd_process import IsometrydProcess  # noqa: E402
from local_socket import LocalConnection  # noqa: E402
from test_python_client import _IMPORT_ERROR, ISOMETRYD, SKIP_REASON  # noqa: E402

PYTHONPATH = os.environ.get("ISOMETRY_PYTHONPATH", "")
if _IMPORT_ERROR is None:
    import isometry
    from isometry import IsometryError
    from isometry import isometry_pb2 as pb

NOBODY = 65534
RESOURCE_EXHAUSTED = 8
ENTRIES = 1 << 19  # the attack's datatype: about half a second of translation each
WEIGHT_BOUND = 600000  # daemon.max_translate_weight: the attack's datatype fits under it
DAEMON = dict(log_level="warn", shutdown_grace_ms=500, extra=[
    ("socket_mode", '"0666"'),
    ("max_translate_weight", WEIGHT_BOUND),
])
CONFIG = SMALL_NODE

# The attackers: THREADS threads for SECONDS, each sending its call again
# and again (ExplainPlan without a session, RegisterDatatype in one shared
# session); prints how each call was answered, counted by code and bound.
ATTACKER = r"""
import collections, json, sys, threading, time
import grpc, isometry
from isometry import isometry_pb2 as pb, isometry_pb2_grpc as pb_grpc
socket, entries, threads, seconds, method = sys.argv[1:6]
entries, threads, seconds = int(entries), int(threads), float(seconds)
big = pb.Datatype(hindexed_block=pb.TypeIndexedBlock(
    blocklength=1, displacements=range(0, 2 * entries, 2), old=pb.Datatype(basic=pb.BASIC_BYTE)))
flat = pb.Datatype(contiguous=pb.TypeContiguous(count=entries, old=pb.Datatype(basic=pb.BASIC_BYTE)))
md = ()
if method == "RegisterDatatype":
    owner = isometry.Client(socket, name="attacker")
    md = (("isometry-session", owner.session),)
    req = pb.RegisterDatatypeRequest(datatype=big)
else:
    req = pb.ExplainPlanRequest(src_memory="sys0", dst_memory="sys0", src_datatype=big,
                                src_count=1, dst_datatype=flat, dst_count=1)
counts = collections.Counter()
lock = threading.Lock()
end = time.monotonic() + seconds
def attack():
    with grpc.insecure_channel("unix://" + socket,
                               options=[("grpc.max_send_message_length", 64 << 20)]) as ch:
        call = getattr(pb_grpc.IsometryStub(ch), method)
        while time.monotonic() < end:
            try:
                call(req, metadata=md, timeout=30)
                key = "OK"
            except grpc.RpcError as e:
                d = e.details() or ""
                bound = next((b for b in ("max_translates_per_session", "translate_queue",
                                          "max_translate_weight", "max_datatype")
                              if b in d), d[:80])
                key = e.code().name + " " + bound
            with lock:
                counts[key] += 1
ts = [threading.Thread(target=attack) for _ in range(threads)]
for t in ts: t.start()
for t in ts: t.join()
print(json.dumps(counts))
"""


def median_ms(fn, n):
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


@unittest.skipUnless(ISOMETRYD, SKIP_REASON)
class TranslationAttackTest(unittest.TestCase):
    def setUp(self):
        if _IMPORT_ERROR is not None:
            self.fail(f"cannot import the isometry package: {_IMPORT_ERROR}")
        self.dir, self.daemon = IsometrydProcess.started_in_temp_dir(
            ISOMETRYD, CONFIG, "isometry-xlat-", daemon=DAEMON)
        os.chmod(self.dir, 0o755)  # the attackers (nobody) reach the socket
        self.addCleanup(self._stop)
        self.socket = os.path.join(self.dir, "grpc.sock")
        self.victim = isometry.Client(self.socket, name="victim")
        self.addCleanup(self.victim.close)
        n = 64 << 10
        src, dst = self.victim.allocate("sys0", n), self.victim.allocate("sys0", n)
        self.data = os.urandom(n)
        self.victim.write(src, 0, self.data)
        self.si = self.victim.register_instance(src, [n // 8], [("v", 8)], "F,x")
        self.di = self.victim.register_instance(dst, [n // 8], [("v", 8)], "F,x")
        self.dst = dst

    def _stop(self):
        try:
            self.daemon.stop()
        finally:
            self.daemon.close()
            import shutil
            shutil.rmtree(self.dir, ignore_errors=True)

    def copy(self):
        info = self.victim.copy(self.si, self.di, wait=True)
        self.assertEqual(info.state, "done", info)

    def attackers(self, method, threads, seconds):
        prefix = as_uid(NOBODY) if os.geteuid() == 0 else []
        env = dict(os.environ, PYTHONPATH=PYTHONPATH, PYTHONDONTWRITEBYTECODE="1")
        return subprocess.Popen(
            [*prefix, sys.executable, "-c", ATTACKER, self.socket, str(ENTRIES), str(threads),
             str(seconds), method], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)

    def flood(self, method, threads=8, seconds=4.0):
        status0 = median_ms(self.victim.status, 20)
        copy0 = median_ms(self.copy, 10)
        proc = self.attackers(method, threads, seconds)
        time.sleep(1.0)  # the attackers are connected and sending
        status1 = median_ms(self.victim.status, 15)
        copy1 = median_ms(self.copy, 8)
        out, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 0, err)
        counts = json.loads(out)
        print(f"\n{method} x{threads}: GetStatus {status0:.2f} -> {status1:.2f} ms median, "
              f"copy {copy0:.2f} -> {copy1:.2f} ms; attackers {counts}", file=sys.stderr)
        for name, before, after in (("GetStatus", status0, status1), ("copy", copy0, copy1)):
            self.assertLess(after, 500, f"{name}: the flood starved it ({before:.2f} ms before)")
            self.assertLess(after, max(50 * before, 50),
                            f"{name}: the flood starved it ({before:.2f} ms before)")
        self.assertEqual(self.victim.read(self.dst, 0, len(self.data)), self.data)
        return counts

    def test_explain_flood_leaves_cheap_calls_served(self):
        counts = self.flood("ExplainPlan")
        self.assertGreater(counts.get("OK", 0), 0, counts)  # translations still run
        self.assertGreater(counts.get("RESOURCE_EXHAUSTED max_translates_per_session", 0), 0,
                           counts)  # the session-less callers' share is 2
        self.assertEqual(set(counts) - {"OK", "RESOURCE_EXHAUSTED max_translates_per_session"},
                         set(), counts)

    def test_register_flood_leaves_cheap_calls_served(self):
        counts = self.flood("RegisterDatatype")
        self.assertGreater(counts.get("RESOURCE_EXHAUSTED max_translates_per_session", 0), 0,
                           counts)
        # The victim's own session still registers (its share is its own).
        col = isometry.datatype.BYTE.Create_vector(4, 1, 8)
        self.assertGreater(self.victim.register_datatype(col).handle, 0)

    def test_too_heavy_is_refused_up_front(self):
        heavy = pb.Datatype(indexed_block=pb.TypeIndexedBlock(
            blocklength=1, displacements=range(0, 2 * WEIGHT_BOUND, 2),
            old=pb.Datatype(basic=pb.BASIC_BYTE)))
        flat = pb.Datatype(contiguous=pb.TypeContiguous(count=8, old=pb.Datatype(basic=pb.BASIC_BYTE)))
        t = time.perf_counter()
        with self.assertRaises(IsometryError) as cm:
            self.victim._call("ExplainPlan", pb.ExplainPlanRequest(
                src_memory="sys0", dst_memory="sys0", src_datatype=heavy, src_count=1,
                dst_datatype=flat, dst_count=1))
        self.assertEqual(cm.exception.code, "RESOURCE_EXHAUSTED", cm.exception.message)
        self.assertIn(f"daemon.max_translate_weight is {WEIGHT_BOUND}", cm.exception.message)
        with self.assertRaises(IsometryError) as cm:
            self.victim._call("RegisterDatatype", pb.RegisterDatatypeRequest(datatype=heavy))
        self.assertEqual(cm.exception.code, "RESOURCE_EXHAUSTED", cm.exception.message)
        self.assertIn("daemon.max_translate_weight", cm.exception.message)
        # A registered handle inside counts its whole weight once decoded.
        half = pb.Datatype(indexed_block=pb.TypeIndexedBlock(
            blocklength=1, displacements=range(0, 2 * (WEIGHT_BOUND // 2), 2),
            old=pb.Datatype(basic=pb.BASIC_BYTE)))
        h = self.victim._call("RegisterDatatype", pb.RegisterDatatypeRequest(datatype=half)).handle
        two = pb.Datatype(struct_type=pb.TypeStruct(
            blocklengths=[1, 1], displacements=[0, 1 << 30],
            types=[pb.Datatype(registered=h), pb.Datatype(registered=h)]))
        with self.assertRaises(IsometryError) as cm:
            self.victim._call("RegisterDatatype", pb.RegisterDatatypeRequest(datatype=two))
        self.assertEqual(cm.exception.code, "RESOURCE_EXHAUSTED", cm.exception.message)
        self.assertIn("daemon.max_translate_weight", cm.exception.message)
        self.assertLess(time.perf_counter() - t, 5.0)
        self.copy()  # nothing else changed

    def test_local_socket_bounds_translation_too(self):
        # The local socket translates on the session's own connection
        # thread, but the CPU is everyone's: the same weight bound, counted
        # with the registered handles a type refers to.
        conn = LocalConnection(os.path.join(self.dir, "local.sock"))
        self.addCleanup(conn.close)
        self.assertEqual(conn.hello("heavy").code, 0)
        quarter = pb.Datatype(indexed_block=pb.TypeIndexedBlock(
            blocklength=1, displacements=range(0, 2 * (WEIGHT_BOUND // 4), 2),
            old=pb.Datatype(basic=pb.BASIC_BYTE)))
        r = conn.request(pb.LocalRequest(
            tag=2, register_datatype=pb.RegisterDatatypeRequest(datatype=quarter)))
        self.assertEqual(r.code, 0, r.message)
        h = r.register_datatype.handle
        many = pb.Datatype(struct_type=pb.TypeStruct(
            blocklengths=[1] * 5, displacements=[i << 24 for i in range(5)],
            types=[pb.Datatype(registered=h)] * 5))  # 5 x 150000, under the decoder's own bound
        t = time.perf_counter()
        r = conn.request(pb.LocalRequest(
            tag=3, register_datatype=pb.RegisterDatatypeRequest(datatype=many)))
        self.assertEqual(r.code, RESOURCE_EXHAUSTED, r.message)
        self.assertIn(f"daemon.max_translate_weight is {WEIGHT_BOUND}", r.message)
        r = conn.request(pb.LocalRequest(tag=4, register_instance=pb.RegisterInstanceRequest(
            spec=pb.InstanceSpec(datatype=many, count=1))))
        self.assertEqual(r.code, RESOURCE_EXHAUSTED, r.message)
        self.assertIn("RegisterInstance", r.message)
        self.assertLess(time.perf_counter() - t, 5.0)
        self.copy()  # the victim is served as before


if __name__ == "__main__":
    unittest.main()
