"""The exception hierarchy of the Python client (isometry.errors, issue
#55): each gRPC status code has its class, IsometryError(code, message)
builds it, errors pickle as themselves, and a real daemon's refusals
arrive as those classes over gRPC, the local socket and the native path.

Run by ctest (python_errors) with ISOMETRYD and ISOMETRY_PYTHONPATH set;
the daemon cases skip (77, with the reason) without ISOMETRYD.
"""

import os
import pickle
import shutil
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests", "pyfixture"))
from isometryd_process import ONE_SYS_MEMORY, IsometrydProcess  # noqa: E402

ISOMETRYD = os.environ.get("ISOMETRYD", "")
if os.environ.get("ISOMETRY_PYTHONPATH"):
    sys.path.insert(0, os.environ["ISOMETRY_PYTHONPATH"])

import grpc  # noqa: E402

import isometry  # noqa: E402
from isometry import errors  # noqa: E402
from isometry import isometry_pb2 as pb  # noqa: E402

# Every non-OK gRPC code and the class it must raise as.
EXPECTED = {
    "CANCELLED": isometry.Cancelled,
    "UNKNOWN": isometry.Unknown,
    "INVALID_ARGUMENT": isometry.InvalidArgument,
    "DEADLINE_EXCEEDED": isometry.DeadlineExceeded,
    "NOT_FOUND": isometry.NotFound,
    "ALREADY_EXISTS": isometry.AlreadyExists,
    "PERMISSION_DENIED": isometry.PermissionDenied,
    "RESOURCE_EXHAUSTED": isometry.ResourceExhausted,
    "FAILED_PRECONDITION": isometry.FailedPrecondition,
    "ABORTED": isometry.Aborted,
    "OUT_OF_RANGE": isometry.OutOfRange,
    "UNIMPLEMENTED": isometry.Unimplemented,
    "INTERNAL": isometry.Internal,
    "UNAVAILABLE": isometry.Unavailable,
    "DATA_LOSS": isometry.DataLoss,
    "UNAUTHENTICATED": isometry.Unauthenticated,
}


class HierarchyTest(unittest.TestCase):
    def test_every_grpc_code_has_its_class(self):
        names = {c.name for c in grpc.StatusCode if c is not grpc.StatusCode.OK}
        self.assertEqual(names, set(EXPECTED))
        for code, cls in EXPECTED.items():
            e = isometry.IsometryError(code, "why")
            self.assertIs(type(e), cls, code)
            self.assertIsInstance(e, isometry.IsometryError)
            self.assertEqual((e.code, e.message, str(e)), (code, "why", f"{code}: why"))
            self.assertIs(errors.error_class(code), cls)
            # The subclass built directly is the same thing.
            self.assertEqual(str(cls(code, "why")), f"{code}: why")

    def test_families_nest_where_meanings_do(self):
        self.assertIsInstance(isometry.IsometryError("OUT_OF_RANGE", ""), isometry.InvalidArgument)
        self.assertIsInstance(isometry.IsometryError("UNAUTHENTICATED", ""),
                              isometry.PermissionDenied)
        self.assertNotIsInstance(isometry.IsometryError("NOT_FOUND", ""), isometry.InvalidArgument)

    def test_keywords_build_the_class_too(self):
        e = isometry.IsometryError(code="PERMISSION_DENIED", message="not yours")
        self.assertIs(type(e), isometry.PermissionDenied)
        self.assertEqual((e.code, e.message), ("PERMISSION_DENIED", "not yours"))

    def test_an_unknown_code_stays_a_plain_isometry_error(self):
        e = isometry.IsometryError("CODE_99", "later")
        self.assertIs(type(e), isometry.IsometryError)
        self.assertEqual(e.code, "CODE_99")

    def test_transfer_error_keeps_its_info_and_code(self):
        info = pb.TransferInfo(id=7, state="cancelled", code=1, message="by the operator")
        e = isometry.TransferError(info)
        self.assertIsInstance(e, isometry.IsometryError)
        self.assertIsInstance(e, isometry.Cancelled)  # its code's class too
        self.assertNotIsInstance(e, isometry.NotFound)
        self.assertEqual(type(e).__name__, "CancelledTransferError")
        self.assertEqual(e.code, "CANCELLED")
        for code, cls in isometry.errors._BY_CODE.items():
            number = grpc.StatusCode[code].value[0]
            t = isometry.TransferError(pb.TransferInfo(id=1, state="failed", code=number))
            self.assertIsInstance(t, cls, code)
            self.assertIsInstance(t, isometry.TransferError, code)
            self.assertEqual(t.code, code)
        # Without a code: UNKNOWN, and an Unknown.
        self.assertIsInstance(isometry.TransferError(pb.TransferInfo(id=2, state="failed")),
                              isometry.Unknown)
        try:
            raise isometry.TransferError(pb.TransferInfo(id=4, state="failed", code=5))
        except isometry.NotFound as caught:  # except by meaning catches a failed transfer
            self.assertEqual(caught.info.id, 4)
        self.assertEqual(e.info.id, 7)
        self.assertIn("transfer 7 cancelled: by the operator", str(e))
        # client.TransferError is the same class (old imports keep working).
        self.assertIs(isometry.client.TransferError, isometry.TransferError)

    def test_errors_pickle_as_their_class(self):
        e = pickle.loads(pickle.dumps(isometry.IsometryError("NOT_FOUND", "no allocation 9")))
        self.assertIs(type(e), isometry.NotFound)
        self.assertEqual((e.code, e.message), ("NOT_FOUND", "no allocation 9"))
        t = pickle.loads(pickle.dumps(isometry.TransferError(
            pb.TransferInfo(id=3, state="failed", code=13, message="broken"))))
        self.assertIsInstance(t, isometry.TransferError)
        self.assertIs(type(t), type(isometry.TransferError(pb.TransferInfo(code=13))))
        self.assertIsInstance(t, isometry.Internal)
        self.assertEqual((t.code, t.info.id, t.info.message), ("INTERNAL", 3, "broken"))


@unittest.skipUnless(ISOMETRYD, "ISOMETRYD is not set: point it at isometryd to run the daemon "
                                "cases (ctest sets it)")
class DaemonErrorsTest(unittest.TestCase):
    def setUp(self):
        self.dir, self.daemon = IsometrydProcess.started_in_temp_dir(
            ISOMETRYD, ONE_SYS_MEMORY, "isometry-errors-", daemon=dict(log_level="warn"))
        self.local = os.path.join(self.dir, "local.sock")

    def tearDown(self):
        rc = self.daemon.stop()
        self.daemon.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        self.assertEqual(rc, 0, "isometryd exited uncleanly on SIGTERM")

    def check_refusals(self, c):
        with self.assertRaises(isometry.NotFound) as cm:
            c.free(123456789)
        self.assertEqual(cm.exception.code, "NOT_FOUND")
        with self.assertRaises(isometry.NotFound):
            c.allocate("nope0", 4096)
        a = c.allocate("sys0", 4096)
        with self.assertRaises(isometry.OutOfRange) as cm:
            c.read(a, 4000, 200)
        self.assertIsInstance(cm.exception, isometry.InvalidArgument)
        with self.assertRaises(isometry.InvalidArgument):
            c.register_instance(a, [16], [("v", 4)], "F,q")
        with self.assertRaises(isometry.ResourceExhausted):
            c.allocate("sys0", 1 << 40)

    def test_grpc_session(self):
        with isometry.Client(self.daemon.socket, name="errors") as c:
            self.check_refusals(c)

    def test_local_session(self):
        with isometry.Client(self.daemon.socket, local_socket=self.local, native=False) as c:
            self.check_refusals(c)

    def test_native_session(self):
        if not isometry.native_available():
            self.skipTest(isometry.native_unavailable_reason())
        with isometry.Client(self.daemon.socket, local_socket=self.local, native=True) as c:
            self.assertEqual(c.transport, "native")
            self.check_refusals(c)

    def test_closed_client_and_missing_daemon(self):
        c = isometry.Client(self.daemon.socket)
        c.close()
        with self.assertRaises(isometry.FailedPrecondition):
            c.status()
        with self.assertRaises(isometry.Unavailable):
            isometry.Client(os.path.join(self.dir, "none.sock"), connect_timeout=2)
        with self.assertRaises(isometry.Unavailable):
            isometry.Client(self.daemon.socket, local_socket=os.path.join(self.dir, "none.sock"))


# A capped channel: a 16 MiB copy takes about a second.
SLOW_CONFIG = ONE_SYS_MEMORY + 'threads = 2\nrate_limit = "16MiB"\n'


@unittest.skipUnless(ISOMETRYD, "ISOMETRYD is not set")
class FailedTransfersTest(unittest.TestCase):
    """A transfer the daemon accepted and then cancelled is caught by
    ``except Cancelled`` as well as ``except TransferError``."""

    def setUp(self):
        self.dir, self.daemon = IsometrydProcess.started_in_temp_dir(
            ISOMETRYD, SLOW_CONFIG, "isometry-errors-", daemon=dict(log_level="warn"))

    def tearDown(self):
        self.daemon.stop()
        self.daemon.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_a_cancelled_transfer_is_a_cancelled_error(self):
        n = 16 << 20
        with isometry.Client(self.daemon.socket, name="errors") as c:
            s, d = (c.register_instance(c.allocate("sys0", n), [n], [("v", 1)], "F,x")
                    for _ in range(2))
            tid = c.copy(s, d, wait=False)
            future = c.transfer_future(tid)
            c.cancel(tid)
            with self.assertRaises(isometry.Cancelled) as cm:
                c.wait(tid)
            self.assertIsInstance(cm.exception, isometry.TransferError)
            self.assertEqual((cm.exception.info.id, cm.exception.info.state), (tid, "cancelled"))
            try:
                future.result(timeout=30)
                self.fail("the future of a cancelled transfer resolved")
            except isometry.Cancelled as e:  # the future's error is the same class
                self.assertIsInstance(e, isometry.TransferError)
            info = c.wait(tid, check=False)
            self.assertEqual(info.state, "cancelled")

    def test_a_cancelled_native_copy_raises_or_returns_it(self):
        # A waited copy through the rings that the daemon cancels: with
        # check, TransferError of its code's class; without, its
        # TransferInfo, state "cancelled", as over gRPC.
        if not isometry.native_available():
            self.skipTest(isometry.native_unavailable_reason())
        n = 16 << 20
        with isometry.Client(self.daemon.socket, name="errors", native=True,
                             local_socket=os.path.join(self.dir, "local.sock")) as c:
            self.assertEqual(c.transport, "native")
            s, d = (c.register_instance(c.allocate("sys0", n), [n], [("v", 1)], "F,x")
                    for _ in range(2))
            for check in (True, False):
                result = {}

                def run():
                    try:
                        result["info"] = c.copy(s, d, check=check)
                    except isometry.IsometryError as e:
                        result["error"] = e

                waiter = threading.Thread(target=run)
                waiter.start()
                deadline = time.monotonic() + 10
                while not c.transfers() and time.monotonic() < deadline:
                    time.sleep(0.005)
                c.cancel(c.transfers()[0].id)
                waiter.join(timeout=30)
                self.assertFalse(waiter.is_alive(), "the waited copy did not return")
                if check:
                    self.assertIsInstance(result.get("error"), isometry.Cancelled, result)
                    self.assertIsInstance(result["error"], isometry.TransferError)
                    self.assertEqual(result["error"].info.state, "cancelled")
                else:
                    self.assertEqual(result["info"].state, "cancelled", result)


if __name__ == "__main__":
    unittest.main()
