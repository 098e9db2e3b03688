"""The metrics endpoint of a real isometryd (issue #13, item 6).

A daemon with [metrics] on a free port answers GET /metrics over a real
socket with Prometheus text that parses (HELP and TYPE before samples,
`name{labels} value` lines, counters named *_total that never decrease),
and its byte counter covers a copy made through the Python client; other
paths are 404. A daemon without [metrics] listens on no TCP port; a port
already taken stops the start with a message naming it; a bad listen value
fails --check-config naming metrics.listen.

Run with Debian's /usr/bin/python3 (python3-grpcio): ISOMETRYD and
ISOMETRY_PYTHONPATH as for test_python_client.
"""

import os
import re
import time
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyfixture"))
from ports import free_port  # noqa: E402
from isometryd_process import IsometrydProcess  # noqa: E402

ISOMETRYD = os.environ.get("ISOMETRYD", "")
if os.environ.get("ISOMETRY_PYTHONPATH"):
    sys.path.insert(0, os.environ["ISOMETRY_PYTHONPATH"])

import isometry  # noqa: E402

CONFIG = """
[[memory]]
name = "sys0"
kind = "SYS"
pool = "64MiB"
staging = "64MiB"

[[channel]]
name = "memcpy0"
kind = "memcpy"
threads = 2
"""

SAMPLE = re.compile(
    r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)'
    r'(?P<labels>\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\\\|\\"|\\n)*",?)*\})?'
    r' (?P<value>\S+)$')
TYPE = re.compile(r"^# TYPE ((?:isometry|process)_[a-z0-9_]+) (counter|gauge|histogram)$")
HELP = re.compile(r"^# HELP ((?:isometry|process)_[a-z0-9_]+) .+$")


def parse_exposition(text):
    """{(name, labels): float} and {name: type}; AssertionError on anything
    the text format does not allow."""
    samples, types, helped = {}, {}, set()
    for line in text.splitlines():
        if line.startswith("# HELP"):
            m = HELP.match(line)
            assert m, f"bad HELP line: {line!r}"
            helped.add(m.group(1))
            continue
        if line.startswith("# TYPE"):
            m = TYPE.match(line)
            assert m, f"bad TYPE line: {line!r}"
            assert m.group(1) in helped, f"TYPE before HELP: {line!r}"
            assert m.group(1) not in types, f"family typed twice: {line!r}"
            types[m.group(1)] = m.group(2)
            continue
        m = SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        name = m.group("name")
        assert name.startswith(("isometry_", "process_")), line
        family = name
        for suffix in ("_bucket", "_sum", "_count"):
            if family not in types and family.endswith(suffix):
                family = family[:-len(suffix)]
        assert family in types, f"sample before its TYPE: {line!r}"
        if types[family] == "histogram":
            assert name != family, f"histogram sample without a suffix: {line!r}"
        if types[family] == "counter":
            assert name.endswith("_total"), f"counter not named *_total: {line!r}"
        key = (name, m.group("labels") or "")
        assert key not in samples, f"sample repeated: {line!r}"
        samples[key] = float(m.group("value"))
    return samples, types


def tcp_listen_inodes():
    """Socket inodes of every listening TCP socket of this machine."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for row in f:
                    cols = row.split()
                    if cols[3] == "0A":  # LISTEN
                        inodes.add(cols[9])
        except FileNotFoundError:
            pass
    return inodes


def socket_inodes(pid):
    out = set()
    fd_dir = f"/proc/{pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue
        if target.startswith("socket:["):
            out.add(target[8:-1])
    return out


@unittest.skipUnless(ISOMETRYD, "ISOMETRYD is not set: point it at the isometryd binary")
class MetricsTest(unittest.TestCase):
    def start(self, extra_config):
        self.dir, self.daemon = IsometrydProcess.started_in_temp_dir(
            ISOMETRYD, CONFIG + extra_config, "isometry-metrics-",
            daemon=dict(log_level="info"))
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.addCleanup(self.daemon.close)

    def stop(self):
        rc = self.daemon.stop(timeout_s=30)
        self.assertEqual(rc, 0, self.daemon.log_text())

    def scrape(self, port, path="/metrics"):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            self.assertEqual(r.status, 200)
            self.assertIn("text/plain; version=0.0.4", r.headers["Content-Type"])
            return parse_exposition(r.read().decode("utf-8"))

    def copy(self, nbytes):
        with isometry.Client(self.daemon.socket, name="metrics-test", connect_timeout=10) as c:
            fields = [("v", 8)]
            n = nbytes // 8
            sa = c.allocate("sys0", nbytes)
            da = c.allocate("sys0", nbytes)
            c.write(sa, 0, bytes(range(256)) * (nbytes // 256))
            si = c.register_instance(sa, [n], fields, "F,x")
            di = c.register_instance(da, [n], fields, "F,x")
            info = c.copy(si, di, wait=True)
            self.assertEqual(info.state, "done", info)

    def test_scrape_a_running_daemon(self):
        port = free_port()
        self.start(f'\n[metrics]\nlisten = "127.0.0.1:{port}"\n')
        self.assertIn(f"metrics on http://127.0.0.1:{port}/metrics", self.daemon.log_text())
        before, types = self.scrape(port)
        for family in ("isometry_channel_bytes_total", "isometry_channel_requests_total",
                       "isometry_channel_errors_total", "isometry_channel_requests_in_flight",
                       "isometry_channel_queue_wait_seconds", "isometry_transfers",
                       "isometry_transfers_finished_total", "isometry_pool_used_bytes",
                       "isometry_staging_used_bytes", "isometry_plan_cache_hits_total",
                       "isometry_program_cache_misses_total", "isometry_program_cache_bytes",
                       "isometry_program_cache_entries", "isometry_plan_cache_entries",
                       "isometry_plan_cache_bytes", "isometry_staging_cached_bytes",
                       "isometry_own_hop_windows", "isometry_own_hops_total"):
            self.assertIn(family, types)
        self.assertNotIn("isometry_peer_up", types)  # no [[peer]]
        # The dashboards and the alert rules ask only for metrics the daemon
        # serves (the peer families: on nodes with [[peer]]).
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
        peer_only = {"isometry_peer_rtt_seconds", "isometry_peer_up", "isometry_peer_state",
                     "isometry_peer_sent_bytes_total", "isometry_peer_received_bytes_total",
                     "isometry_peer_resumes_total"}
        for used_in in ("tools/grafana/isometry.json", "tools/grafana/isometry-cluster.json",
                        "tools/prometheus/isometry.rules.yml"):
            with open(os.path.join(root, used_in)) as f:
                used = set(re.findall(r"(?:isometry|process)_[a-z0-9_]+", f.read()))
            for name in used - peer_only - {"isometry_cluster", "isometry_node"}:
                family = re.sub(r"_(bucket|sum|count)$", "", name)
                self.assertTrue(name in types or family in types, f"{used_in} uses {name}")
        nbytes = 8 << 20
        self.copy(nbytes)
        after, _ = self.scrape(port)
        for key, value in before.items():
            if types.get(key[0]) == "counter":
                self.assertGreaterEqual(after.get(key, -1), value, f"counter went down: {key}")
        chan = ("isometry_channel_bytes_total", '{channel="memcpy0",kind="memcpy"}')
        self.assertGreaterEqual(after[chan] - before[chan], nbytes)
        done = ("isometry_transfers_finished_total", '{state="done"}')
        self.assertEqual(after[done] - before[done], 1)
        # The client closed: its allocations are freed once the daemon reads
        # the end of its session stream, which may come just after the scrape.
        used = ("isometry_pool_used_bytes", '{memory="sys0",kind="SYS"}')
        deadline = time.monotonic() + 10
        while after[used] != 0 and time.monotonic() < deadline:
            time.sleep(0.05)
            after, _ = self.scrape(port)
        self.assertEqual(after[used], 0)
        # The copy was planned and compiled once: both caches hold it now.
        self.assertGreaterEqual(after[("isometry_plan_cache_entries", "")], 1)
        self.assertGreater(after[("isometry_plan_cache_bytes", "")], 0)
        self.assertGreaterEqual(after[("isometry_program_cache_entries", "")], 1)
        # Nothing secret or client-given: the client's name is not there.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            self.assertNotIn("metrics-test", r.read().decode())
        for path in ("/", "/metrics/x", "/status"):
            with self.assertRaises(urllib.error.HTTPError) as cm:
                urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10)
            self.assertEqual(cm.exception.code, 404, path)
        self.stop()
        with self.assertRaises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()

    def test_without_metrics_no_tcp_listener(self):
        self.start("")
        listening = tcp_listen_inodes() & socket_inodes(self.daemon.proc.pid)
        self.assertEqual(listening, set(), "isometryd listens on TCP without [metrics]")
        self.stop()

    def test_port_in_use_stops_the_start(self):
        taken = socket.socket()
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        self.addCleanup(taken.close)
        port = taken.getsockname()[1]
        with self.assertRaises(AssertionError) as cm:
            self.start(f'\n[metrics]\nlisten = "127.0.0.1:{port}"\n')
        self.assertIn(f"cannot serve metrics on 127.0.0.1:{port}: Address already in use",
                      str(cm.exception))

    def test_peers_state_and_round_trip(self):
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                        "cluster"))
        import cluster_fixture as cf

        cluster = cf.Cluster(ISOMETRYD, ["a", "b"])
        ports = {}
        for node in cluster.nodes:
            ports[node.name] = free_port()  # never one of the nodes' ports
            with open(node.config, "a") as f:
                f.write(f'\n[metrics]\nlisten = "127.0.0.1:{ports[node.name]}"\n')
        try:
            cluster.start()
            samples, types = self.scrape(ports["a"])
            self.assertEqual(samples[("isometry_peer_up", '{peer="b"}')], 1)
            self.assertEqual(samples[("isometry_peer_state", '{peer="b",state="up"}')], 1)
            self.assertEqual(samples[("isometry_peer_state", '{peer="b",state="down"}')], 0)
            self.assertIn(("isometry_peer_rtt_seconds", '{peer="b"}'), samples)
            self.assertIn(("isometry_channel_bytes_total",
                           '{channel="tcp:b",kind="remote_memcpy"}'), samples)
            self.assertEqual(types["isometry_peer_sent_bytes_total"], "counter")
            self.assertEqual(samples[("isometry_peer_resumes_total", '{peer="b"}')], 0)
            self.assertEqual(samples[("isometry_peer_readers_lifted_total", '{peer="b"}')], 0)
            self.assertEqual(
                samples[("isometry_peer_eager_puts_declined_total", '{peer="b"}')], 0)
        finally:
            codes = cluster.stop()
        self.assertEqual(set(codes.values()), {0}, codes)

    def test_bad_listen_fails_the_config_check(self):
        d = tempfile.mkdtemp(prefix="isometry-metrics-cfg-")
        self.addCleanup(shutil.rmtree, d, True)
        path = os.path.join(d, "isometry.toml")
        for value, says in (('"localhost"', "is not host:port"),
                            ('"127.0.0.1:0"', "port from 1 to 65535"),
                            ('"192.0.2.1:9464"', "not an address of this machine")):
            with self.subTest(value):
                with open(path, "w") as f:
                    f.write(f'[daemon]\nstate_dir = "{d}/state"\ncalibrate = false\n'
                            f'local_socket = "{d}/l.sock"\ngrpc_socket = "{d}/g.sock"\n'
                            + CONFIG + f"\n[metrics]\nlisten = {value}\n")
                r = subprocess.run([ISOMETRYD, "--config", path, "--check-config"],
                                   capture_output=True, text=True, timeout=30,
                                   stdin=subprocess.DEVNULL)
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn("key 'metrics.listen'", r.stderr)
                self.assertIn(says, r.stderr)


if __name__ == "__main__":
    unittest.main()
