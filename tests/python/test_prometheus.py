"""Metrics users can alert on (issue #54, item 4).

- After copies of several sizes, GET /metrics has the standard process_*
  families, histograms whose buckets only grow and whose +Inf bucket is
  their _count, and series at zero that stay (a channel's queued XDs, the
  failure codes).
- tools/prometheus/isometry.rules.yml passes `promtool check rules`
  (Debian's prometheus package; skips with 77 without it).
- A real Prometheus (the same package) scrapes a real isometryd every
  second, the target is up, and the example rules evaluate: the daemon has
  a [[peer]] nobody answers for, so IsometryPeerDown goes pending (its
  `for` is a minute: pending is what the first evaluations must give).

Run with Debian's /usr/bin/python3: ISOMETRYD and ISOMETRY_PYTHONPATH as
for test_metrics.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pyfixture"))
from ports import free_port  # noqa: E402
from isometryd_process import IsometrydProcess  # noqa: E402

ISOMETRYD = os.environ.get("ISOMETRYD", "")
if os.environ.get("ISOMETRY_PYTHONPATH"):
    sys.path.insert(0, os.environ["ISOMETRY_PYTHONPATH"])

RULES = os.path.join(HERE, "..", "..", "tools", "prometheus", "isometry.rules.yml")

CONFIG = """
[runtime]
node = 1

[[memory]]
name = "sys0"
kind = "SYS"
pool = "64MiB"
staging = "64MiB"

[[memory]]
name = "dsk0"
kind = "DSK"
staging = "0"
directory = "{dir}/dsk"

[[channel]]
name = "memcpy0"
kind = "memcpy"
threads = 2
"""


def parse(text):
    """{(name, labels): float} and {family: type}, histogram samples by
    their own names (name_bucket, name_sum, name_count)."""
    samples, types = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            types[name] = kind
        elif line and not line.startswith("#"):
            head, value = line.rsplit(" ", 1)
            name, _, labels = head.partition("{")
            samples[(name, "{" + labels if labels else "")] = float(value)
    return samples, types


def histogram_series(samples, family):
    """{labels without le: ([(le, count)...], sum, count)} of a histogram."""
    out = {}
    for (name, labels), value in samples.items():
        if name == family + "_bucket":
            rest = labels[1:-1].split(',le="')
            key = "{" + rest[0] + "}"
            le = float(rest[1][:-1].replace("+Inf", "inf"))
            out.setdefault(key, [[], 0, 0])[0].append((le, value))
    for key, entry in out.items():
        entry[1] = samples[(family + "_sum", key)]
        entry[2] = samples[(family + "_count", key)]
        entry[0].sort()
    return out


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode("utf-8")


@unittest.skipUnless(ISOMETRYD, "ISOMETRYD is not set: point it at the isometryd binary")
class PrometheusTest(unittest.TestCase):
    def start(self, extra="", daemon_extra=()):
        port = free_port()
        self.dir, self.daemon = IsometrydProcess.started_in_temp_dir(
            ISOMETRYD, CONFIG + extra + f'\n[metrics]\nlisten = "127.0.0.1:{port}"\n',
            "isometry-prom-", dirs=("dsk",), daemon=dict(log_level="info", extra=daemon_extra))
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.addCleanup(self.daemon.close)
        return port

    def copy(self, nbytes, priority=0):
        import isometry

        with isometry.Client(self.daemon.socket, name="prom-test", connect_timeout=10) as c:
            n = nbytes // 8
            sa = c.allocate("sys0", nbytes)
            da = c.allocate("sys0", nbytes)
            si = c.register_instance(sa, [n], [("v", 8)], "F,x")
            di = c.register_instance(da, [n], [("v", 8)], "F,x")
            info = c.copy(si, di, wait=True, priority=priority)
            self.assertEqual(info.state, "done", info)

    def test_histograms_process_and_zero_series(self):
        port = self.start()
        url = f"http://127.0.0.1:{port}/metrics"
        before, types = parse(get(url))
        # Before any copy: every channel has its default priority's series
        # and every failure code its counter, at zero.
        self.assertEqual(types["isometry_transfer_duration_seconds"], "histogram")
        self.assertEqual(types["isometry_channel_queue_wait_seconds"], "histogram")
        self.assertEqual(before[("isometry_transfers_failed_total", '{code="NOT_FOUND"}')], 0)
        self.assertNotIn("isometry_uptime_seconds", types)
        self.assertNotIn("isometry_channel_throughput_bytes_per_second", types)
        for family in ("process_start_time_seconds", "process_cpu_seconds_total",
                       "process_resident_memory_bytes", "process_virtual_memory_bytes",
                       "process_open_fds", "process_max_fds"):
            self.assertIn((family, ""), before, family)
        self.assertAlmostEqual(before[("process_start_time_seconds", "")], time.time(), delta=120)
        self.assertGreater(before[("process_resident_memory_bytes", "")], 0)
        self.assertLessEqual(before[("process_open_fds", "")], before[("process_max_fds", "")])
        # The DSK memory's file system and quota (the default 256 GiB).
        size = before[("isometry_disk_size_bytes", '{memory="dsk0"}')]
        self.assertGreater(size, 0)
        self.assertLessEqual(before[("isometry_disk_avail_bytes", '{memory="dsk0"}')], size)
        self.assertEqual(before[("isometry_disk_quota_bytes", '{memory="dsk0"}')], 256 << 30)
        self.assertNotIn(("isometry_disk_size_bytes", '{memory="sys0"}'), before)
        for nbytes, priority in ((4096, 0), (256 << 10, 3), (4 << 20, 0), (4 << 20, 3)):
            self.copy(nbytes, priority)
        after, _ = parse(get(url))
        for family in ("isometry_transfer_duration_seconds",
                       "isometry_channel_queue_wait_seconds"):
            series = histogram_series(after, family)
            self.assertTrue(series, family)
            for labels, (buckets, total, count) in series.items():
                counts = [c for _, c in buckets]
                self.assertEqual(counts, sorted(counts), f"{family}{labels} not cumulative")
                self.assertEqual(buckets[-1][0], float("inf"))
                self.assertEqual(buckets[-1][1], count, f"{family}{labels}: +Inf != _count")
                self.assertGreaterEqual(total, 0)
        durations = histogram_series(after, "isometry_transfer_duration_seconds")
        self.assertEqual(durations['{size_class="<64KiB"}'][2], 1)
        self.assertEqual(durations['{size_class="<1MiB"}'][2], 1)
        self.assertEqual(durations['{size_class="<64MiB"}'][2], 2)
        self.assertEqual(durations['{size_class=">=64MiB"}'][2], 0)  # stays, at 0
        waits = histogram_series(after, "isometry_channel_queue_wait_seconds")
        self.assertIn('{channel="memcpy0",kind="memcpy",priority="3"}', waits)
        # Nothing is queued now: every priority seen keeps its series at 0.
        for priority in ("0", "3"):
            key = ("isometry_channel_queued_xds",
                   f'{{channel="memcpy0",kind="memcpy",priority="{priority}"}}')
            self.assertEqual(after.get(key), 0, key)
        # A gRPC client's uid is not known (-1); a local one's is its own.
        by_uid = {labels: v for (name, labels), v in after.items()
                  if name == "isometry_client_bytes_total"}
        self.assertTrue(set(by_uid) <= {'{uid="-1"}', f'{{uid="{os.getuid()}"}}'}, by_uid)
        self.assertEqual(sum(by_uid.values()), 4096 + (256 << 10) + 2 * (4 << 20))

    def test_rules_pass_promtool(self):
        promtool = shutil.which("promtool")
        if not promtool:
            self.skipTest("promtool not found (Debian's prometheus package; "
                          "scripts/install-deps.sh installs it)")
        r = subprocess.run([promtool, "check", "rules", RULES], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("SUCCESS", r.stdout + r.stderr)

    def test_real_prometheus_fires_peer_down(self):
        prometheus = shutil.which("prometheus")
        if not prometheus:
            self.skipTest("prometheus not found (Debian's prometheus package; "
                          "scripts/install-deps.sh installs it)")
        secrets = tempfile.mkdtemp(prefix="isometry-prom-secret-")
        self.addCleanup(shutil.rmtree, secrets, True)
        secret = os.path.join(secrets, "cluster.secret")
        with open(secret, "w") as f:
            f.write("correct horse battery staple 42\n")
        os.chmod(secret, 0o600)
        gone = free_port()  # nobody listens there: the peer never comes up
        port = self.start(f'\n[cluster]\nnode_name = "a"\nsecret_file = "{secret}"\n'
                          f'data_listen = "127.0.0.1:0"\n'
                          f'\n[[peer]]\nname = "gone"\naddress = "127.0.0.1:{gone}"\n',
                          daemon_extra=[("grpc_tcp", f'"127.0.0.1:{free_port()}"')])
        work = tempfile.mkdtemp(prefix="isometry-prometheus-")
        self.addCleanup(shutil.rmtree, work, True)
        config = os.path.join(work, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    f"rule_files: [{json.dumps(os.path.abspath(RULES))}]\n"
                    "scrape_configs:\n  - job_name: isometry\n    static_configs:\n"
                    f"      - targets: [\"127.0.0.1:{port}\"]\n")
        web = free_port()
        log = open(os.path.join(work, "prometheus.log"), "w")
        self.addCleanup(log.close)
        proc = subprocess.Popen(
            [prometheus, f"--config.file={config}", f"--storage.tsdb.path={work}/data",
             f"--web.listen-address=127.0.0.1:{web}"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

        def stop():
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.addCleanup(stop)

        def api(path, **params):
            query = urllib.parse.urlencode(params)
            body = json.loads(get(f"http://127.0.0.1:{web}/api/v1/{path}?{query}"))
            self.assertEqual(body["status"], "success", body)
            return body["data"]

        def prometheus_log():
            with open(os.path.join(work, "prometheus.log")) as f:
                return f.read()[-4000:]

        deadline = time.monotonic() + 45
        up = alert = None
        while time.monotonic() < deadline and not (up and alert):
            time.sleep(0.5)
            self.assertIsNone(proc.poll(), prometheus_log())
            try:
                targets = api("targets")["activeTargets"]
                up = any(t["health"] == "up" for t in targets)
                alerts = api("alerts")["alerts"]
            except (OSError, ValueError):
                continue  # not listening yet
            alert = next((a for a in alerts if a["labels"]["alertname"] == "IsometryPeerDown"
                          and a["labels"].get("peer") == "gone"), None)
        self.assertTrue(up, f"target never up: {targets if up is not None else None}\n"
                            + prometheus_log())
        self.assertIsNotNone(alert, prometheus_log())
        self.assertIn(alert["state"], ("pending", "firing"))
        # The scraped series are there to query, histograms included.
        result = api("query", query='isometry_peer_up{peer="gone"}')["result"]
        self.assertEqual([r["value"][1] for r in result], ["0"])
        result = api("query", query="process_start_time_seconds")["result"]
        self.assertEqual(len(result), 1)
        self.daemon.stop(timeout_s=30)


if __name__ == "__main__":
    unittest.main()
