"""Transfers as futures and copies with asyncio (isometry/futures.py)
against a real isometryd: over the gRPC session (the Attach stream's
completions), a local session (its Wait calls) and the native rings
(isometry/ring.py; NativeFuturesTest, which skips, 77, where the extension
is not built); a failed or cancelled transfer, a cancelled future, and a
session that ends under pending futures.

Run by ctest (python_futures) with ISOMETRYD and ISOMETRY_PYTHONPATH set.
"""

import asyncio
import concurrent.futures
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests", "pyfixture"))
from isometryd_process import IsometrydProcess  # noqa: E402

ISOMETRYD = os.environ.get("ISOMETRYD", "")
if os.environ.get("ISOMETRY_PYTHONPATH"):
    sys.path.insert(0, os.environ["ISOMETRY_PYTHONPATH"])

import isometry  # noqa: E402

# A capped channel: a 16 MiB copy takes about a second.
CONFIG = """
[[memory]]
name = "sys0"
kind = "SYS"
pool = "256MiB"
staging = "64MiB"

[[channel]]
name = "memcpy0"
kind = "memcpy"
threads = 2
rate_limit = "16MiB"
"""
SLOW = 16 << 20


@unittest.skipUnless(ISOMETRYD, "ISOMETRYD is not set")
class FuturesTest(unittest.TestCase):
    def setUp(self):
        self.dir, self.daemon = IsometrydProcess.started_in_temp_dir(
            ISOMETRYD, CONFIG, "isometry-futures-", daemon=dict(log_level="warn"))

    def tearDown(self):
        self.daemon.stop()
        self.daemon.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def connect(self, local=False):
        local_socket = os.path.join(self.dir, "local.sock") if local else None
        c = isometry.Client(self.daemon.socket, name="futures", local_socket=local_socket)
        self.addCleanup(c.close)
        return c

    def pair(self, c, n, fill=b"\x5a"):
        src, dst = c.allocate("sys0", n), c.allocate("sys0", n)
        data = (fill * (n // len(fill) + 1))[:n]
        c.write(src, 0, data)
        s = c.register_instance(src, [n], [("v", 1)], "F,x")
        d = c.register_instance(dst, [n], [("v", 1)], "F,x")
        return s, d, dst, data

    def check_futures(self, c):
        pairs = [self.pair(c, 64 << 10, bytes([i + 1])) for i in range(8)]
        futures = [c.copy_future(s, d) for s, d, _, _ in pairs]
        for f, (_, _, dst, data) in zip(futures, pairs):
            info = f.result(timeout=30)
            self.assertEqual(info.state, "done", info.message)
            self.assertEqual(c.read(dst, 0, len(data)), data)
        # A future asked for after its transfer ended resolves (at once
        # once the completion has arrived).
        s, d, _, _ = pairs[0]
        tid = c.copy(s, d, wait=False)
        c.wait(tid)
        self.assertEqual(c.transfer_future(tid).result(timeout=10).state, "done")
        deadline = time.monotonic() + 10
        while c.completed(tid) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertEqual(c.transfer_future(tid).result(timeout=0).state, "done")

    def test_futures_over_grpc(self):
        self.check_futures(self.connect())

    def test_futures_over_the_local_socket(self):
        self.check_futures(self.connect(local=True))

    def test_asyncio_gathers_many_copies(self):
        c = self.connect()
        pairs = [self.pair(c, 16 << 10, bytes([i % 250 + 1])) for i in range(32)]

        async def main():
            return await asyncio.gather(*(c.acopy(s, d) for s, d, _, _ in pairs))

        infos = asyncio.run(main())
        self.assertEqual([i.state for i in infos], ["done"] * len(pairs))
        for _, _, dst, data in pairs:
            self.assertEqual(c.read(dst, 0, len(data)), data)

    def test_acopy_names_instances_by_record_or_id(self):
        # Records, ids, or one of each; a bool or an unknown id is refused
        # and copies nothing. On the native rings none of them is a gRPC
        # Copy, and each future holds its own transfer's id.
        c = self.connect()
        pairs = [self.pair(c, 4096, bytes([i + 1])) for i in range(3)]
        (s0, d0, _, _), (s1, d1, _, _), (s2, d2, _, _) = pairs
        calls = getattr(self, "grpc_calls", [])
        calls.clear()

        async def main():
            return await asyncio.gather(c.acopy(s0, d0), c.acopy(s1.id, d1.id),
                                        c.acopy(s2, d2.id))

        infos = asyncio.run(main())
        self.assertEqual([i.state for i in infos], ["done"] * 3)
        self.assertEqual(len({i.id for i in infos}), 3)
        self.assertNotIn(0, {i.id for i in infos})
        self.assertNotIn("Copy", calls)
        for _, _, dst, data in pairs:
            self.assertEqual(c.read(dst, 0, len(data)), data)

        async def refused(src, dst):
            return await c.acopy(src, dst)

        with self.assertRaisesRegex(TypeError, "bool"):
            asyncio.run(refused(True, d0))

        async def bad_priority():
            return await c.acopy(s0, d0, priority="high")

        with self.assertRaises(TypeError):
            asyncio.run(bad_priority())

        async def huge_priority():
            return await c.acopy(s0, d0, priority=1 << 40)

        # Refused, not cut down to 32 bits (ValueError from protobuf over
        # gRPC, OverflowError from the extension).
        with self.assertRaises((ValueError, OverflowError)):
            asyncio.run(huge_priority())
        with self.assertRaises((ValueError, OverflowError)):
            c.copy(s0, d0, priority=1 << 40)
        with self.assertRaises(isometry.IsometryError) as cm:
            asyncio.run(refused(s0, 1 << 40))
        self.assertEqual(cm.exception.code, "NOT_FOUND")

    def test_each_event_loop_settles_its_own_copies(self):
        # acopy's future belongs to the loop running where it is called:
        # loops one after another on a thread, two at once on two threads,
        # none (RuntimeError) once they ended, none in a forked child.
        c = self.connect()
        pairs = [self.pair(c, 4096, bytes([i + 1])) for i in range(8)]

        async def copies(mine):
            loop = asyncio.get_running_loop()
            futures = [c.acopy(s, d) for s, d, _, _ in mine for _ in range(25)]
            self.assertTrue(all(f.get_loop() is loop for f in futures))
            return [i.state for i in await asyncio.gather(*futures)]

        for _ in range(3):
            self.assertEqual(set(asyncio.run(copies(pairs))), {"done"})

        async def unchecked():
            return await asyncio.gather(*(c.acopy(s, d, check=False) for s, d, _, _ in pairs))

        self.assertEqual({i.state for i in asyncio.run(unchecked())}, {"done"})
        results = {}
        threads = [threading.Thread(target=lambda k=k: results.update(
            {k: asyncio.run(copies(pairs[4 * k:4 * k + 4]))})) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        self.assertEqual({k: set(v) for k, v in results.items()}, {0: {"done"}, 1: {"done"}})
        for _, _, dst, data in pairs:
            self.assertEqual(c.read(dst, 0, len(data)), data)
        s, d, _, _ = pairs[0]
        with self.assertRaisesRegex(RuntimeError, "no running event loop"):
            c.acopy(s, d)

        async def fork_and_copy():
            await c.acopy(s, d)  # the loop is this thread's last
            pid = os.fork()
            if pid == 0:
                try:
                    c.acopy(s, d)
                    os._exit(1)  # the parent's loop runs nothing here
                except RuntimeError:
                    os._exit(0)
            return os.waitpid(pid, 0)[1]

        self.assertEqual(asyncio.run(fork_and_copy()), 0, "a forked child copied on no loop")

    def test_a_cancelled_transfer_raises_and_a_cancelled_future_cancels(self):
        c = self.connect()
        s, d, _, _ = self.pair(c, SLOW)
        f = c.copy_future(s, d)
        c.cancel(f_tid := self.tid_of(c))
        with self.assertRaises(isometry.TransferError) as cm:
            f.result(timeout=30)
        self.assertEqual(cm.exception.info.state, "cancelled")
        self.assertEqual(c.transfer_future(f_tid, check=False).result(timeout=5).state,
                         "cancelled")
        # Cancelling the future cancels its transfer.
        g = c.copy_future(s, d)
        tid = self.tid_of(c)
        self.assertTrue(g.cancel())
        self.assertEqual(c.wait(tid, check=False).state, "cancelled")

        async def cancelled_task():
            task = asyncio.ensure_future(c.acopy(s, d))
            await asyncio.sleep(0.2)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task

        asyncio.run(cancelled_task())
        deadline = time.monotonic() + 10
        while c.transfers() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(c.transfers(), [], "a cancelled task left its copy running")

    def tid_of(self, c):
        """The id of the one transfer in flight."""
        listed = c.transfers()
        self.assertEqual(len(listed), 1)
        return listed[0].id

    def test_a_daemon_gone_fails_pending_futures(self):
        c = self.connect()
        s, d, _, _ = self.pair(c, SLOW)
        f = c.copy_future(s, d)
        self.daemon.kill()
        with self.assertRaises(isometry.IsometryError) as cm:
            f.result(timeout=20)
        self.assertEqual(cm.exception.code, "UNAVAILABLE")
        self.assertNotIsInstance(cm.exception, concurrent.futures.CancelledError)
        # A copy asked for afterwards fails with the same reason.
        with self.assertRaises(isometry.IsometryError) as cm:
            c.copy_future(s, d).result(timeout=20)
        self.assertEqual(cm.exception.code, "UNAVAILABLE")

    def test_close_fails_pending_futures(self):
        c = self.connect(local=True)
        s, d, _, _ = self.pair(c, SLOW)
        f = c.copy_future(s, d)
        c.close()
        with self.assertRaises(isometry.IsometryError):
            f.result(timeout=20)


class NativeFuturesTest(FuturesTest):
    """The same cases on a native client, whose copy_future and acopy go
    through the shared-memory rings (no gRPC Copy), and what differs there."""

    def setUp(self):
        if not isometry.native_available():
            self.skipTest(isometry.native_unavailable_reason())
        super().setUp()

    def connect(self, local=False):
        c = isometry.Client(self.daemon.socket, name="futures", native=True,
                            local_socket=os.path.join(self.dir, "local.sock"))
        self.addCleanup(c.close)
        self.assertEqual(c.transport, "native")
        calls = []
        inner = c._call

        def call(method, *args, **kwargs):
            calls.append(method)
            return inner(method, *args, **kwargs)

        c._call = call
        self.grpc_calls = calls
        return c

    def tid_of(self, c):
        """The one transfer in flight, once the daemon took it off the ring."""
        deadline = time.monotonic() + 10
        while not c.transfers() and time.monotonic() < deadline:
            time.sleep(0.005)
        return super().tid_of(c)

    def test_futures_over_grpc(self):
        c = self.connect()
        pairs = [self.pair(c, 4096, bytes([i % 250 + 1])) for i in range(500)]
        self.grpc_calls.clear()
        futures = [c.copy_future(s, d) for s, d, _, _ in pairs]
        infos = [f.result(timeout=30) for f in futures]
        self.assertNotIn("Copy", self.grpc_calls, "a ring future went over gRPC")
        self.assertEqual({i.state for i in infos}, {"done"})
        self.assertEqual(len({i.id for i in infos}), len(pairs))
        for _, _, dst, data in pairs:
            self.assertEqual(c.read(dst, 0, len(data)), data)
        self.check_futures(c)

    def test_futures_over_the_local_socket(self):
        # A refusal (different fields) fails the future with its code's class.
        c = self.connect()
        s, _, _, _ = self.pair(c, 4096)
        other = c.register_instance(c.allocate("sys0", 4096), [1024], [("w", 4)], "F,x")
        f = c.copy_future(s, other)
        with self.assertRaises(isometry.InvalidArgument) as cm:
            f.result(timeout=10)
        self.assertNotIsInstance(cm.exception, isometry.TransferError)
        # check=False hands back a failed transfer instead of raising.
        g = c.copy_future(*self.pair(c, SLOW)[:2], check=False)
        c.cancel(self.tid_of(c))
        self.assertEqual(g.result(timeout=30).state, "cancelled")

    def test_a_cancelled_transfer_raises_and_a_cancelled_future_cancels(self):
        c = self.connect()
        s, d, _, _ = self.pair(c, SLOW)
        f = c.copy_future(s, d)
        c.cancel(self.tid_of(c))
        with self.assertRaises(isometry.Cancelled) as cm:
            f.result(timeout=30)
        self.assertEqual(cm.exception.info.state, "cancelled")
        # A ring future cancelled before its completion: the copy runs on
        # (the ring names its transfer only at its end).
        g = c.copy_future(s, d)
        tid = self.tid_of(c)
        self.assertTrue(g.cancel())
        self.assertEqual(c.wait(tid).state, "done")

        async def cancelled_task():
            task = asyncio.ensure_future(c.acopy(s, d))
            await asyncio.sleep(0.2)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task
            return self.tid_of(c)

        self.assertEqual(c.wait(asyncio.run(cancelled_task())).state, "done")
        # A copy to cancel: copy(wait=False) has its id at once, and the
        # future of that id cancels it.
        h = c.transfer_future(c.copy(s, d, wait=False))
        self.assertTrue(h.cancel())
        deadline = time.monotonic() + 10
        while c.transfers() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(c.transfers(), [], "a cancelled future left its copy running")

    def test_copy_without_waiting_goes_through_the_rings(self):
        # copy(wait=False) between ring instances: no gRPC Copy; the id
        # comes back once the daemon accepted the copy, and is the one
        # wait(), completed(), transfer() and cancel() take.
        c = self.connect()
        pairs = [self.pair(c, 4096, bytes([i + 1])) for i in range(20)]
        self.grpc_calls.clear()
        tids = [c.copy(s, d, wait=False) for s, d, _, _ in pairs]
        self.assertNotIn("Copy", self.grpc_calls, "copy(wait=False) went over gRPC")
        self.assertEqual(len(set(tids)), len(tids))
        self.assertTrue(all(isinstance(t, int) and t > 0 for t in tids), tids)
        for tid, (_, _, dst, data) in zip(tids, pairs):
            self.assertEqual(c.wait(tid).state, "done")
            self.assertEqual(c.read(dst, 0, len(data)), data)
        deadline = time.monotonic() + 10
        while c.completed(tids[-1]) is None and time.monotonic() < deadline:
            time.sleep(0.005)
        self.assertEqual(c.completed(tids[-1]).state, "done", "the ring's completion was not kept")
        # A refusal raises at the call, as over gRPC.
        s, _, _, _ = pairs[0]
        other = c.register_instance(c.allocate("sys0", 4096), [1024], [("w", 4)], "F,x")
        with self.assertRaises(isometry.InvalidArgument):
            c.copy(s, other, wait=False)
        # A slow one is listed under that id while it runs, and cancels by it.
        s, d, _, _ = self.pair(c, SLOW)
        tid = c.copy(s, d, wait=False)
        self.assertEqual([t.id for t in c.transfers()], [tid])
        self.assertEqual(c.transfer(tid).id, tid)
        c.cancel(tid)
        self.assertEqual(c.wait(tid, check=False).state, "cancelled")
        self.assertNotIn("Copy", self.grpc_calls)

    def test_a_full_ring_never_blocks_the_caller(self):
        # With the daemon stopped nothing leaves the rings (256 entries):
        # acopy and copy_future still return at once, the extension keeping
        # what does not fit, and every copy runs once the daemon resumes.
        c = self.connect()
        pairs = [self.pair(c, 4096, bytes([i % 250 + 1])) for i in range(64)]
        count = 1500

        async def submit_stopped():
            os.kill(self.daemon.proc.pid, signal.SIGSTOP)
            # A submission that blocks would wait for the daemon forever:
            # resumed after 30 s, it fails on the time instead.
            watchdog = threading.Timer(30.0, os.kill, (self.daemon.proc.pid, signal.SIGCONT))
            watchdog.start()
            try:
                t0 = time.monotonic()
                futures = [c.acopy(*pairs[i % len(pairs)][:2]) for i in range(count)]
                more = [c.copy_future(*pairs[i % len(pairs)][:2]) for i in range(count)]
                took = time.monotonic() - t0
            finally:
                watchdog.cancel()
                os.kill(self.daemon.proc.pid, signal.SIGCONT)
            self.assertLess(took, 20, "submitting to a full ring blocked the event loop")
            infos = await asyncio.gather(*futures)
            return infos + [f.result(timeout=60) for f in more]

        infos = asyncio.run(submit_stopped())
        self.assertEqual(len(infos), 2 * count)
        self.assertEqual({i.state for i in infos}, {"done"})
        self.assertEqual(len({i.id for i in infos}), 2 * count)
        for _, _, dst, data in pairs:
            self.assertEqual(c.read(dst, 0, len(data)), data)

    def test_a_long_copy_at_the_head_does_not_hold_back_the_rest(self):
        # A slow copy first, then more small ones than the rings hold: the
        # small ones run while it does (their futures still resolve after
        # it, in submission order).
        c = self.connect()
        slow = c.copy_future(*self.pair(c, 2 * SLOW)[:2])
        pairs = [self.pair(c, 4096, bytes([i % 250 + 1])) for i in range(64)]
        small = [c.copy_future(*pairs[i % len(pairs)][:2]) for i in range(600)]
        ms, md, mdst, mdata = self.pair(c, 4096, b"\xa5")
        last = c.copy_future(ms, md)
        deadline = time.monotonic() + 30
        while c.read(mdst, 0, len(mdata)) != mdata and time.monotonic() < deadline:
            time.sleep(0.005)
        self.assertEqual(c.read(mdst, 0, len(mdata)), mdata)
        self.assertFalse(slow.done(), "the small copies waited for the slow one")
        self.assertEqual(slow.result(timeout=60).state, "done")
        self.assertEqual({f.result(timeout=30).state for f in small + [last]}, {"done"})

    def test_close_cancels_copies_that_never_reached_the_ring(self):
        # Copies kept in this process behind a full ring when the client
        # closes: their futures fail CANCELLED, none is left waiting.
        c = self.connect()
        s, d, _, _ = self.pair(c, 4096)
        os.kill(self.daemon.proc.pid, signal.SIGSTOP)
        # The close asks the daemon to cancel what is on the ring: resumed
        # a moment after, so the close is what reaches the backlog first.
        resume = threading.Timer(1.0, os.kill, (self.daemon.proc.pid, signal.SIGCONT))
        try:
            futures = [c.copy_future(s, d) for _ in range(1000)]
            resume.start()
            c.close()
        finally:
            resume.cancel()
            os.kill(self.daemon.proc.pid, signal.SIGCONT)
        codes = []
        for f in futures:
            try:
                codes.append(f.result(timeout=30).state)
            except isometry.IsometryError as e:
                codes.append(e.code)
        self.assertLessEqual(set(codes), {"done", "CANCELLED"})
        # The rings hold 256 copies; the rest never left this process.
        self.assertGreaterEqual(codes.count("CANCELLED"), 500, codes[-5:])

    def test_an_event_loop_gone_with_copies_in_flight_holds_nothing_up(self):
        # acopy's completions go to the loop that submitted them; a loop
        # closed before they arrive never takes them. Closing the client
        # does not wait for them (it waits only for copies still running).
        c = self.connect()
        s, d, _, _ = self.pair(c, 4096)

        async def submit_and_leave():
            return [c.acopy(s, d) for _ in range(300)]

        loop = asyncio.new_event_loop()
        loop.run_until_complete(submit_and_leave())
        loop.close()
        time.sleep(0.5)  # the copies end; nobody takes their completions
        t0 = time.monotonic()
        c.close()
        self.assertLess(time.monotonic() - t0, 5, "close waited for a closed loop's copies")

    def test_an_unclosed_client_exits_cleanly(self):
        # Ring copies still in flight when a script ends without close():
        # the interpreter exits at once, without a crash or a hang.
        script = (
            "import sys, isometry\n"
            "c = isometry.Client(sys.argv[1], local_socket=sys.argv[2], native=True)\n"
            "s, d = (c.register_instance(c.allocate('sys0', 4096), [4096], [('v', 1)], 'F,x')\n"
            "        for _ in range(2))\n"
            "print(c.copy_future(s, d).result(timeout=10).state, flush=True)\n"
            "fs = [c.copy_future(s, d) for _ in range(2000)]\n")
        env = dict(os.environ, PYTHONPATH=os.environ.get("ISOMETRY_PYTHONPATH", ""))
        done = subprocess.run([sys.executable, "-c", script, self.daemon.socket,
                               os.path.join(self.dir, "local.sock")], capture_output=True,
                              text=True, timeout=60, env=env, check=False)
        self.assertEqual((done.returncode, done.stdout), (0, "done\n"), done.stderr)
        with isometry.Client(self.daemon.socket) as c:               # its session ended
            deadline = time.monotonic() + 10
            while c.status().sessions > 1 and time.monotonic() < deadline:
                time.sleep(0.02)
            self.assertEqual(c.status().sessions, 1)


if __name__ == "__main__":
    unittest.main()
