"""Connection attacks on a real isometryd (issue #48, items 4, 10 and 11).

- At a low task limit (the daemon runs as a uid of its own and gets a low
  RLIMIT_NPROC), a flood of local connections is refused with
  RESOURCE_EXHAUSTED naming the task limit: the daemon stays up, serves a
  victim's copy afterwards and leaves on SIGTERM within seconds, even
  with the flood still holding every thread it could get.
- Two uids holding as many connections as they may without saying hello
  leave a third uid room to open a session
  (daemon.max_pending_hellos_per_uid); daemon.max_connection_threads
  refuses the connection beyond it, naming the key.
- Connections that trickle a request byte now and then, and many idle
  ones, delay no metrics scrape beyond metrics.request_timeout_ms.

Run like test_session_attacks (ISOMETRYD, ISOMETRY_PYTHONPATH); as root,
for the tests that run attackers as other uids.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyfixture"))
from attack_case import (FIXTURE_DIR, ISOMETRYD, NOBODY, PYTHONPATH,  # noqa: E402
                         SKIP_REASON, as_uid, threads_of, wait_until)
from isometryd_process import IsometrydProcess, ONE_SYS_MEMORY, daemon_section  # noqa: E402
from ports import free_port  # noqa: E402
from local_socket import LocalConnection  # noqa: E402

_IMPORT_ERROR = None
try:
    import isometry
    from isometry import isometry_pb2 as pb
except ImportError as e:
    _IMPORT_ERROR = e

SECOND_UID = 65533  # a second attacker: any uid without a process of its own
DAEMON_UID = 61999  # the daemon's own uid in the task-limit test (RLIMIT_NPROC counts per uid)
RESOURCE_EXHAUSTED = 8
# A cma channel besides: local sessions may ask for a hop window (a thread).
WITH_CMA = ONE_SYS_MEMORY + """
[[channel]]
name = "cma0"
kind = "cma"
"""

# Holds `count` local connections open as the uid it runs as, sending
# nothing; prints a JSON line {"held": n, "refused": [[code, message]...]}
# once all are made (a refusal is the daemon's answer on a connection it
# closes), then waits for stdin to close.
HOLDER = r"""
import json, select, socket, struct, sys
sys.path.insert(0, sys.argv[1])
from isometry import isometry_pb2
path, count = sys.argv[2], int(sys.argv[3])
held, refused = [], []
for _ in range(count):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
    except OSError as e:
        refused.append([-1, str(e)])
        continue
    held.append(s)
# A refused connection has its answer waiting; an admitted one has none
# (until the daemon's hello timeout): read answers until 0.3 s bring none.
while held:
    r, _, _ = select.select(held, [], [], 0.3)
    if not r:
        break
    s = r[0]
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    held.remove(s)
    s.close()
    if len(data) >= 4:
        (n,) = struct.unpack("<I", data[:4])
        resp = isometry_pb2.LocalResponse()
        resp.ParseFromString(data[4:4 + n])
        refused.append([resp.code, resp.message])
    else:
        refused.append([0, "closed without an answer"])
print(json.dumps({"held": len(held), "refused": refused}), flush=True)
sys.stdin.read()
"""


class TaskLimit:
    """Caps the tasks (threads) of a running process: a pids cgroup of its
    own (v1 /sys/fs/cgroup/pids, or v2 where the root cgroup delegates
    pids), else RLIMIT_NPROC through prlimit --pid (needs CAP_SYS_RESOURCE;
    the process then runs as a uid of its own). None of them: the test
    skips, saying so."""

    def __init__(self, test):
        self.test = test
        self.group = None
        for root in ("/sys/fs/cgroup/pids", "/sys/fs/cgroup"):
            if root == "/sys/fs/cgroup":
                try:
                    with open(os.path.join(root, "cgroup.subtree_control")) as f:
                        if "pids" not in f.read().split():
                            continue
                except OSError:
                    continue
            path = os.path.join(root, f"isometry-test-{os.getpid()}")
            try:
                os.mkdir(path)
            except OSError:
                continue
            self.group = path
            test.addCleanup(self._remove)
            break

    def _remove(self):
        for _ in range(100):
            try:
                os.rmdir(self.group)
                return
            except OSError:
                time.sleep(0.05)

    def prefix(self, tasks):
        """A command prefix that starts its program in the cgroup, capped at
        `tasks`; None without a cgroup."""
        if not self.group:
            return None
        with open(os.path.join(self.group, "pids.max"), "w") as f:
            f.write(str(tasks))
        procs = os.path.join(self.group, "cgroup.procs")
        return ["sh", "-c", f'echo $$ > {procs} && exec "$@"', "sh"]

    def join(self, pid):
        if self.group:
            with open(os.path.join(self.group, "cgroup.procs"), "w") as f:
                f.write(str(pid))

    def cap(self, pid, tasks):
        if self.group:
            with open(os.path.join(self.group, "pids.max"), "w") as f:
                f.write(str(tasks))
            return
        r = subprocess.run(["prlimit", f"--pid={pid}", f"--nproc={tasks}:{tasks}"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            self.test.skipTest(f"no pids cgroup and no prlimit --pid here: {r.stderr.strip()}")


class Holder:
    """HOLDER run as `uid`: its report, and close() to let go."""

    def __init__(self, test, path, count, uid):
        self.proc = subprocess.Popen(
            [*as_uid(uid), sys.executable, "-c", HOLDER, FIXTURE_DIR, path, str(count)],
            env=dict(os.environ, PYTHONPATH=PYTHONPATH, PYTHONDONTWRITEBYTECODE="1"),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        test.addCleanup(self.close)
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"the holder as uid {uid} failed: {self.proc.stderr.read()}")
        self.report = json.loads(line)

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)


def copy_through(client, nbytes=1 << 20):
    """A copy of `nbytes` between two new allocations of `client`; checks
    the bytes arrived."""
    n = nbytes // 8
    src = client.allocate("sys0", nbytes)
    dst = client.allocate("sys0", nbytes)
    data = bytes(range(256)) * (nbytes // 256)
    client.write(src, 0, data)
    si = client.register_instance(src, [n], [("v", 8)], "F,x")
    di = client.register_instance(dst, [n], [("v", 8)], "F,x")
    info = client.copy(si, di, wait=True)
    assert info.state == "done", info
    assert client.read(dst, 0, nbytes) == data


@unittest.skipUnless(ISOMETRYD, SKIP_REASON)
class ConnectionAttackTest(unittest.TestCase):
    def setUp(self):
        if _IMPORT_ERROR is not None:
            self.fail(f"cannot import the isometry package: {_IMPORT_ERROR}")
        if os.geteuid() != 0:
            self.skipTest("needs root to run attackers (and the daemon) as other uids")

    def start(self, extra, prefix=(), owner=None, config_tail=ONE_SYS_MEMORY):
        """A daemon in a fresh directory (owned by `owner` when given),
        its local socket open to every uid."""
        directory = tempfile.mkdtemp(prefix="isometry-conn-")
        self.addCleanup(shutil.rmtree, directory, True)
        os.chmod(directory, 0o755)
        text = daemon_section(directory, ISOMETRYD, log_level="info", shutdown_grace_ms=500,
                              extra=[("socket_mode", '"0666"')] + list(extra))
        config = os.path.join(directory, "isometry.toml")
        with open(config, "w") as f:
            f.write(text + config_tail)
        if owner is not None:
            os.chown(directory, owner, owner)
        daemon = IsometrydProcess(ISOMETRYD, config, os.path.join(directory, "isometryd.log"),
                                  os.path.join(directory, "grpc.sock"), prefix=prefix)
        self.addCleanup(daemon.close)
        daemon.start()
        return directory, daemon

    def assertStopsWithin(self, daemon, seconds):
        started = time.monotonic()
        rc = daemon.stop(timeout_s=seconds)
        self.assertIsNotNone(rc, f"no exit within {seconds} s of SIGTERM:\n{daemon.log_text()}")
        self.assertIn(rc, (0, 1), daemon.log_text())
        return time.monotonic() - started

    # ---- item 4: the task limit ----

    def test_task_limit_refuses_connections_cleanly(self):
        tasks = TaskLimit(self)  # removed after the daemon is gone (cleanups run last first)
        directory, daemon = self.start(
            [("max_sessions", 256), ("max_connections_per_uid", 200),
             ("max_pending_hellos_per_uid", 200), ("max_connection_threads", 200),
             ("hello_timeout_ms", 20000)],
            prefix=as_uid(DAEMON_UID),
            owner=DAEMON_UID, config_tail=WITH_CMA)
        local = os.path.join(directory, "local.sock")
        pid = daemon.proc.pid
        tasks.join(pid)
        # Every thread the daemon starts lazily is started: a copy by a
        # local session and one by a gRPC session.
        with isometry.Client(daemon.socket, name="warm", local_socket=local) as c:
            copy_through(c)
        with isometry.Client(daemon.socket, name="warm-grpc") as c:
            copy_through(c)
        # The victim's session, attached before the flood.
        hops = LocalConnection(local)
        self.addCleanup(hops.close)
        self.assertEqual(hops.hello("victim-hops").code, 0)
        limit = threads_of(pid) + 6
        tasks.cap(pid, limit)

        flood = Holder(self, local, 40, NOBODY)
        report = flood.report
        self.assertTrue(daemon.alive(), daemon.log_text())
        self.assertLessEqual(report["held"], 6, report)
        self.assertGreaterEqual(len(report["refused"]), 30, report)
        for code, message in report["refused"]:
            self.assertEqual(code, RESOURCE_EXHAUSTED, message)
            self.assertIn("cannot start a thread for this connection", message)
            self.assertIn("task limit", message)
        self.assertIn(f"local connection of uid {NOBODY} refused: the daemon cannot start a "
                      "thread", daemon.log_text())
        # A hop window's thread is refused too; the session goes on.
        own_hops = pb.LocalRequest(tag=2, own_hops=pb.OwnHopsRequest())
        r = hops.request(own_hops)
        self.assertEqual(r.code, RESOURCE_EXHAUSTED, r.message)
        self.assertIn("cannot start the hop window's thread", r.message)
        self.assertIn("task limit", r.message)
        # Let go: the victim opens a local session and copies.
        flood.close()
        wait_until(lambda: threads_of(pid) <= limit - 6, "the flood's threads to end")
        with isometry.Client(daemon.socket, name="victim", local_socket=local) as victim:
            copy_through(victim)
        r = hops.request(own_hops)  # nothing was left half made
        self.assertEqual(r.code, 0, r.message)
        self.assertTrue(daemon.alive(), daemon.log_text())
        # At the limit again, SIGTERM still drains and exits.
        Holder(self, local, 20, NOBODY)
        self.assertLess(self.assertStopsWithin(daemon, 10), 5.0, daemon.log_text())
        self.assertNotIn("terminate", daemon.log_text(tail=None))

    def test_connection_threads_fit_the_task_limit_at_start(self):
        tasks = TaskLimit(self)
        prefix = tasks.prefix(100)
        if prefix is None:
            self.skipTest("no pids cgroup to start the daemon in")
        directory, daemon = self.start(
            [("max_sessions", 256), ("max_connections_per_uid", 200),
             ("max_pending_hellos_per_uid", 200), ("max_connection_threads", 200),
             ("hello_timeout_ms", 20000)], prefix=prefix)
        local = os.path.join(directory, "local.sock")
        m = re.search(r"local socket: at most (\d+) connection threads: "
                      r"daemon.max_connection_threads \(200\) does not fit the task limit "
                      r"\(cgroup pids.max 100, (\d+) free at start", daemon.log_text())
        self.assertIsNotNone(m, daemon.log_text())
        cap = int(m.group(1))
        self.assertLess(cap, int(m.group(2)) // 2 + 1)
        flood = Holder(self, local, cap + 20, NOBODY)
        self.assertEqual(flood.report["held"], cap, flood.report)
        self.assertEqual(len(flood.report["refused"]), 20, flood.report)
        for code, message in flood.report["refused"]:
            self.assertEqual(code, RESOURCE_EXHAUSTED, message)
            self.assertIn(f"daemon.max_connection_threads is 200, lowered to {cap} to fit the "
                          "task limit (cgroup pids.max 100", message)
        # The rest of the daemon kept its room: gRPC sessions copy.
        for i in range(3):
            with isometry.Client(daemon.socket, name=f"victim{i}") as victim:
                copy_through(victim)
        # SIGTERM with the flood still held.
        self.assertLess(self.assertStopsWithin(daemon, 10), 5.0, daemon.log_text())
        flood.close()

    # ---- item 10: connections that never say hello ----

    def test_pending_hellos_are_bound_per_uid(self):
        directory, daemon = self.start(
            [("max_sessions", 16), ("max_connections_per_uid", 8),
             ("max_pending_hellos_per_uid", 4), ("max_connection_threads", 12),
             ("hello_timeout_ms", 20000)])
        local = os.path.join(directory, "local.sock")
        # Two uids try to hold 8 silent connections each: 4 each are kept.
        holders = [Holder(self, local, 8, uid) for uid in (NOBODY, SECOND_UID)]
        for uid, h in zip((NOBODY, SECOND_UID), holders):
            self.assertEqual(h.report["held"], 4, h.report)
            self.assertEqual(len(h.report["refused"]), 4, h.report)
            for code, message in h.report["refused"]:
                self.assertEqual(code, RESOURCE_EXHAUSTED, message)
                self.assertIn(f"uid {uid} already has 4 local connections that have not said "
                              "hello; daemon.max_pending_hellos_per_uid is 4", message)
        self.assertIn("daemon.max_pending_hellos_per_uid is 4", daemon.log_text())
        # A third uid (root here) opens a session and copies.
        with isometry.Client(daemon.socket, name="victim", local_socket=local) as victim:
            copy_through(victim)
            # 8 held + the victim: 3 more threads, then the bound refuses.
            extra = [LocalConnection(local) for _ in range(3)]
            for c in extra:
                self.addCleanup(c.close)
                self.assertEqual(c.hello("more").code, 0)
            over = LocalConnection(local)
            self.addCleanup(over.close)
            r = over.response()
            self.assertIsNotNone(r, "the connection beyond the bound was not told why")
            self.assertEqual(r.code, RESOURCE_EXHAUSTED, r.message)
            self.assertIn("daemon.max_connection_threads is 12", r.message)
        self.assertTrue(daemon.alive())
        self.assertLess(self.assertStopsWithin(daemon, 10), 5.0, daemon.log_text())

    # ---- item 11: the metrics port ----

    def test_slow_and_idle_connections_do_not_block_a_scrape(self):
        port = free_port()
        directory, daemon = self.start(
            [], config_tail=ONE_SYS_MEMORY + f'\n[metrics]\nlisten = "127.0.0.1:{port}"\n'
            "max_connections = 32\nrequest_timeout_ms = 1000\n")
        stop = threading.Event()

        def trickle():
            # A request header, one byte every 0.3 s, again after each close.
            while not stop.is_set():
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                        for b in b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n":
                            if stop.wait(0.3):
                                return
                            s.sendall(bytes([b]))
                except OSError:
                    pass

        trickles = [threading.Thread(target=trickle, daemon=True) for _ in range(2)]
        for t in trickles:
            t.start()
        self.addCleanup(lambda: [stop.set()] + [t.join() for t in trickles])
        idle = []
        self.addCleanup(lambda: [s.close() for s in idle])
        for _ in range(200):
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        time.sleep(0.5)
        for _ in range(3):
            started = time.monotonic()
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                self.assertEqual(r.status, 200)
                self.assertIn("isometry_transfers", r.read().decode())
            self.assertLess(time.monotonic() - started, 2.0, "a scrape waited")
            time.sleep(0.3)
        # The idle connections were closed: the newest by the timeout, the
        # others to make room.
        idle[-1].settimeout(5)
        self.assertEqual(idle[-1].recv(1), b"")
        log = daemon.log_text(tail=None)
        self.assertIn("did not send its whole request within 1000 ms "
                      "(metrics.request_timeout_ms)", log)
        self.assertIn("(metrics.max_connections); closing the oldest", log)
        self.assertEqual(self.assertStopsWithin(daemon, 10) < 5.0, True, daemon.log_text())


if __name__ == "__main__":
    unittest.main()
