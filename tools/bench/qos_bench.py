#!/usr/bin/python3
"""Traffic classes under load (docs/guides/qos.md): weighted shares,
foreground protection and the scheduler's overhead, on one node.

Starts two private daemons with the same memories and channels (sys0, a
DSK memory in a temporary directory, memcpy0, disk_write0, disk_read0;
inline_bytes = 0, so every copy goes through its channel's DMA worker;
--inline-bytes 65536 runs them as the embedded default config does, where
a 64 KiB copy runs on the thread that received it):
one with [qos] classes fg (weight 3) and bg (weight 1, nice "idle": its
threads run under SCHED_IDLE and give a busy CPU to any other that wakes,
docs/guides/qos.md "CPU time"; --bg-nice sets another value; clients
named "bulk"), one without [qos]. Each round, paired and interleaved:

- shares: fg and bg each keep 3 copies in flight through memcpy0, then
  through disk_write0; the ratio of the bytes each class moved over the
  window, against the 3:1 of their weights (target: within 5 %);
- foreground: 64 KiB copies of fg, alone and then while bg keeps 4 bulk
  copies in flight on memcpy0; p99 loaded over p99 idle (target <= 1.5),
  and bg's rate over what fg left of bg's rate alone (target >= 0.9; both
  rates with 4 bulk copies in flight, bg's client a process of its own),
  and the CPUs bg's client and copy threads ran on over those fg's client
  and the daemon's other threads left (rows qos_background_cpu_left*;
  where the CPUs went is printed). Once
  with fg's copies over gRPC, once over the shared-memory rings (the Python
  client's native path, rows *_ring): a gRPC client spends a core of its
  own and of the daemon's on each copy, which a ring client does not, and
  on a small machine that CPU time, not the channel, is what bg loses
  (the rows over the rings are left out, and the reason printed, where
  the client's native extension is not built);
- floor: the same 64 KiB copies next to one busy process per CPU and no
  other copy, over idle: what the machine's CPU scheduler alone does to
  their p99 (no target; read the foreground rows against it);
- overhead: 256 MiB copies on memcpy0 and 64 MiB files on disk_write0
  with two classes configured (one busy: the general path) against the
  daemon without [qos] (target >= 0.98).

Then, across nodes, two daemons a and b on loopback
(tests/cluster/cluster_fixture.py) with the same classes on both:

- tcp share: fg and bg on a each keep 4 copies of 2 MiB in flight to b,
  a's sending paced to --link-mib MiB/s (cluster.rate_limit: the link is
  the bottleneck, as a NIC slower than memory would be); the ratio of the
  bytes each class's copies completed over the window (target: 3:1
  within 5 %);
- tcp foreground: 64 KiB copies of fg to b, alone and while bg keeps 4
  copies of 32 MiB in flight from a process of its own, unpaced: p99
  loaded over p99 idle (target <= 1.5);
- tcp overhead: 256 MiB copies a -> b, unpaced, the pair with [qos]
  against a pair without (target >= 0.98).

    /usr/bin/python3 tools/bench/qos_bench.py \\
        --isometryd build-release/daemon/isometryd --pythonpath build-release/python

`--json` prints isometry_bench's JSON rows (scenarios qos_*), one per
measure, with every round's value.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import typing

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "pyfixture"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "cluster"))
sys.path.insert(0, HERE)
import machine  # noqa: E402  (tools/bench/machine.py)
from bulk_process import BulkProcess, rate_during  # noqa: E402  (tools/bench/bulk_process.py)
from cpu_use import CpuWindow, usable_cpus  # noqa: E402  (tools/bench/cpu_use.py)
from busy_copies import Busy  # noqa: E402  (tests/pyfixture)
from isometryd_process import IsometrydProcess  # noqa: E402

MIB = 1 << 20
MEMORIES = """
[runtime]
inline_bytes = {inline_bytes}

[[memory]]
name = "sys0"
kind = "SYS"
pool = "1536MiB"
staging = "64MiB"

[[memory]]
name = "dsk0"
kind = "DSK"
directory = "{dir}/files"
staging = "0"

[[channel]]
name = "memcpy0"
kind = "memcpy"

[[channel]]
name = "disk_write0"
kind = "disk_write"

[[channel]]
name = "disk_read0"
kind = "disk_read"
"""
QOS = """
[[qos.class]]
name = "fg"
weight = 3

[[qos.class]]
name = "bg"
weight = 1
nice = {bg_nice}

[[qos.rule]]
client = "bulk"
class = "bg"
"""


def memories(args):
    """MEMORIES with runtime.inline_bytes from --inline-bytes."""
    return MEMORIES.replace("{inline_bytes}", str(args.inline_bytes))


def qos_tables(args):
    """QOS with bg's nice value from --bg-nice."""
    value = '"idle"' if args.bg_nice == "idle" else args.bg_nice
    return QOS.replace("{bg_nice}", value)


def pair(client, nbytes, file=None):
    src = client.register_instance(client.allocate("sys0", nbytes), [nbytes], [("b", 1)], "F,x")
    if file:
        dst = client.register_instance(bounds=[nbytes], fields=[("b", 1)], layout="F,x",
                                       memory="dsk0", file=file)
    else:
        dst = client.register_instance(client.allocate("sys0", nbytes), [nbytes], [("b", 1)],
                                       "F,x")
    return src, dst


def class_bytes(stub, pb, operator, channel):
    resp = stub.GetQos(pb.GetQosRequest(), metadata=[("isometry-operator", operator)])
    return {c.name: s.bytes for c in resp.classes for s in c.channels if s.channel == channel}


def percentile(sorted_values, p):
    k = max(0, min(len(sorted_values) - 1, int(round(p / 100.0 * len(sorted_values) + 0.5)) - 1))
    return sorted_values[k]


def timed_copies(client, pairs, n, min_s=0.0, gap_s=0.0):
    """The times of `n` copies made one after another, sorted; more while
    less than `min_s` seconds have passed. With `gap_s`, each copy starts
    `gap_s` after the last one started (or when it ended, if later): a
    foreground paced as an application's requests arrive, not a closed
    loop taking every CPU it can."""
    out = []
    start = time.perf_counter()
    i = 0
    while i < n or time.perf_counter() - start < min_s:
        t0 = time.perf_counter()
        client.copy(*pairs[i % len(pairs)])
        out.append(time.perf_counter() - t0)
        i += 1
        if gap_s > 0:
            time.sleep(max(0.0, t0 + gap_s - time.perf_counter()))
    return sorted(out)


class Foreground(typing.NamedTuple):
    """One foreground row's round: fg's p99 loaded over idle; bg's rate over
    what fg left of bg's rate alone (`left`); the CPUs bg's client and
    copy threads ran on over those fg's client and the daemon's other
    threads left (`left_cpu`); fg's sorted times idle and loaded; the CPUs in use while
    loaded (cpu_use.CpuWindow); the CPU floor's p99 over idle, or None."""
    p99: float
    left: float
    left_cpu: float
    idle: list
    loaded: list
    cpu: object
    floor: object


def rate_of(client, pairs, n):
    """Bytes per second of `n` copies made one after another."""
    t0 = time.perf_counter()
    for i in range(n):
        client.copy(*pairs[i % len(pairs)])
    return sum(p[0].total_bytes for p in pairs[:1]) * n / (time.perf_counter() - t0)


class Bench:
    def __init__(self, args):
        import grpc
        import isometry
        from isometry import Client
        from isometry import isometry_pb2 as pb
        from isometry import isometry_pb2_grpc as pb_grpc
        self.Client, self.grpc, self.args = Client, grpc, args
        self.ring = isometry.native_available()
        if not self.ring:
            print(f"qos_bench: no rows over the rings: {isometry.native_unavailable_reason()}",
                  file=sys.stderr)
        self.pb, self.pb_grpc = pb, pb_grpc
        self.daemons = []
        self.qos = self.start(memories(args) + qos_tables(args), "isometry-qos-bench-", ring=True)
        self.plain = self.start(memories(args), "isometry-qos-plain-")

    def start(self, config, prefix, ring=False):
        """A daemon on `config` and its clients; with `ring`, also fg's
        client over the rings (the foreground rows use it)."""
        directory, daemon = IsometrydProcess.started_in_temp_dir(
            self.args.isometryd, config, prefix, dirs=("files",), daemon={"log_level": "warn"})
        self.daemons.append((directory, daemon))
        with open(os.path.join(directory, "state", "operator.token")) as f:
            operator = f.read().strip()
        channel = self.grpc.insecure_channel(f"unix:{daemon.socket}")
        return {"daemon": daemon, "operator": operator, "channel": channel,
                "stub": self.pb_grpc.IsometryStub(channel),
                "fg": self.Client(daemon.socket, name="interactive"),
                "fg_ring": self.ring_client(daemon) if ring else None,
                "bg": self.Client(daemon.socket, name="bulk")}

    def ring_client(self, daemon):
        """fg's client over the rings (spin_us 0: it sleeps while it waits);
        None without the native extension."""
        if not self.ring:
            return None
        return self.Client(daemon.socket, name="interactive", native=True, spin_us=0,
                           local_socket=os.path.join(os.path.dirname(daemon.socket),
                                                     "local.sock"))

    def renew(self):
        """Fresh sessions: a session's allocations go with it, so rounds do
        not fill the pool."""
        for d in (self.qos, self.plain):
            d["fg"].close()
            if d["fg_ring"]:
                d["fg_ring"].close()
            d["bg"].close()
            d["fg"] = self.Client(d["daemon"].socket, name="interactive")
            d["fg_ring"] = self.ring_client(d["daemon"]) if d["fg_ring"] else None
            d["bg"] = self.Client(d["daemon"].socket, name="bulk")

    def close(self):
        for d in (self.qos, self.plain):
            d["fg"].close()
            if d["fg_ring"]:
                d["fg_ring"].close()
            d["bg"].close()
            d["channel"].close()
        status = 0
        for directory, daemon in self.daemons:
            status |= daemon.stop()
            daemon.close()
            shutil.rmtree(directory, ignore_errors=True)
        return status

    def share(self, channel, make_pairs, window_s):
        d = self.qos
        busy = [Busy(d[k], make_pairs(d[k], k)) for k in ("fg", "bg")]
        try:
            time.sleep(0.5)
            before = class_bytes(d["stub"], self.pb, d["operator"], channel)
            time.sleep(window_s)
            after = class_bytes(d["stub"], self.pb, d["operator"], channel)
        finally:
            for b in busy:
                b.end()
        return (after["fg"] - before["fg"]) / max(1, after["bg"] - before["bg"])

    def foreground(self, small, bulk, n, fg="fg", floor=True):
        """fg's 64 KiB copies through `fg` (a client) idle and while bg keeps
        4 copies of `bulk` bytes in flight: a Foreground."""
        d = self.qos
        gap = self.args.fg_gap_us / 1e6
        idle = timed_copies(d[fg], small, n, gap_s=gap)
        cpu_bound = None
        if floor:
            # The machine's own floor: the same copies next to one busy
            # process per CPU and no other copy. On a small machine the
            # scheduler's time slices, not the channels, set the loaded p99.
            hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                    for _ in range(os.cpu_count() or 1)]
            try:
                time.sleep(0.2)
                cpu_bound = timed_copies(d[fg], small, n, gap_s=gap)
            finally:
                for h in hogs:
                    h.kill()
                    h.wait()
        pid = d["daemon"].proc.pid
        # bg, a tenant of its own with 4 bulk copies in flight: alone for a
        # second, then while fg copies (at least a second).
        bg = BulkProcess(d["daemon"].socket, self.args.pythonpath, bulk)
        try:
            time.sleep(0.2)
            alone = rate_during(bg, lambda: time.sleep(1.0))
            loaded, span = [], []

            def fg_copies():
                t0 = time.perf_counter()
                loaded.extend(timed_copies(d[fg], small, n, min_s=1.0, gap_s=gap))
                span.append(time.perf_counter() - t0)

            cpu = CpuWindow(pid, bg.pid)
            bg_rate = rate_during(bg, fg_copies)
            cpu.end()
        finally:
            bg.end()
        loaded.sort()
        # fg's bytes over the time it was copying, gaps included.
        fg_rate = small[0][0].total_bytes * len(loaded) / span[0]
        # What fg left of the CPUs: those its client and the daemon's other
        # threads (serving it, mostly) did not use.
        left_cpus = usable_cpus() - cpu.bench - cpu.other
        return Foreground(
            p99=percentile(loaded, 99) / percentile(idle, 99),
            left=bg_rate / max(1.0, alone - fg_rate),
            left_cpu=cpu.bulk / max(0.01, left_cpus),
            idle=idle, loaded=loaded, cpu=cpu,
            floor=cpu_bound and percentile(cpu_bound, 99) / percentile(idle, 99))

    def overhead(self, make_pairs, n):
        rates = {}
        for name, d in (("qos", self.qos), ("plain", self.plain)):
            rates[name] = rate_of(d["fg"], make_pairs(d["fg"], name), n)
        return rates["qos"] / rates["plain"]


class CrossNode:
    """Two daemons, a and b, on loopback; with `qos` (qos_tables' text)
    both have the classes fg and bg; a's sending paced to `link_mib` MiB/s
    (0: unpaced)."""

    def __init__(self, cf, isometryd, qos, link_mib):
        self.cf = cf
        opts = {"extra_channels": qos or ""}
        paced = dict(opts, extra_cluster=f'rate_limit = "{link_mib}MiB"' if link_mib else "")
        self.cluster = cf.Cluster(isometryd, ["a", "b"], request="1MiB", pool="1GiB",
                                  node_opts=[paced, opts])
        self.cluster.start()
        a, b = self.cluster["a"], self.cluster["b"]
        self.fg, self.bg, self.keep = a.client("interactive"), a.client("bulk"), b.client("keep")

    def pairs(self, client, nbytes, count):
        """`count` (source on a, destination published on b) of nbytes."""
        return self.cf.Cluster.published_pairs(client, self.keep, nbytes, count)

    def published(self, nbytes, count):
        """`count` allocations of nbytes on b, published: (id, memory) each."""
        return [(dst.id, "b:sys0") for dst in self.cf.Cluster.published(self.keep, nbytes, count)]

    def close(self):
        for c in (self.fg, self.bg, self.keep):
            c.close()
        self.cluster.stop()


def cross_node_rows(args, results):
    """One round of the tcp rows, appended to `results`."""
    import cluster_fixture as cf
    paced = CrossNode(cf, args.isometryd, qos_tables(args), args.link_mib)
    try:
        busy = [Busy(c, paced.pairs(c, 2 * MIB, 4), depth=4) for c in (paced.fg, paced.bg)]
        try:
            time.sleep(1.0)
            before = [b.copied for b in busy]
            time.sleep(args.window * 2)
            moved = [b.copied - b0 for b, b0 in zip(busy, before)]
        finally:
            for b in busy:
                b.end()
        results["tcp"].append(moved[0] / max(1, moved[1]) / 3)
    finally:
        paced.close()
    rates = {}
    for qos in (True, False):
        pair_ = CrossNode(cf, args.isometryd, qos and qos_tables(args), 0)
        try:
            rates[qos] = rate_of(pair_.fg, pair_.pairs(pair_.fg, 256 * MIB, 1), 4)
            if qos:
                small = pair_.pairs(pair_.fg, 64 << 10, 4)
                gap = args.fg_gap_us / 1e6
                idle = timed_copies(pair_.fg, small, args.small, gap_s=gap)
                # bg in a process of its own, as on one node (bulk_process.py).
                bg = BulkProcess(pair_.cluster["a"].socket, args.pythonpath, 32 * MIB,
                                 remote=pair_.published(32 * MIB, 4))
                try:
                    time.sleep(0.2)
                    loaded = timed_copies(pair_.fg, small, args.small, gap_s=gap)
                finally:
                    bg.end()
                results["tcp_p99"].append(percentile(loaded, 99) / percentile(idle, 99))
        finally:
            pair_.close()
    results["over_tcp"].append(rates[True] / rates[False])


def row(scenario, metric, values, target, baseline):
    return {"scenario": scenario, "metric": metric, "value": statistics.median(values),
            "unit": "ratio", "baseline": baseline, "baseline_value": None,
            "ratio": statistics.median(values), "target": target, "rounds": len(values),
            "ratio_min": min(values), "ratio_max": max(values), "round_values": values,
            "predicted": None, "plan": "qos rows have no plan", "bytes": None}


def foreground_line(path, f, results, suffix):
    """Records a Foreground's rows under `suffix` and says what it measured."""
    results["p99" + suffix].append(f.p99)
    results["left" + suffix].append(f.left)
    results["left_cpu" + suffix].append(f.left_cpu)
    return (f"{path}p99 {percentile(f.idle, 99) * 1e6:.0f} us idle, "
            f"{percentile(f.loaded, 99) * 1e6:.0f} us loaded; bg got {f.left:.2f} of what fg "
            f"left, its threads ran on {f.left_cpu:.2f} of the CPUs fg left (loaded: the "
            f"benchmark {f.cpu.bench:.2f} CPUs, bg's client and the daemon's bulk threads "
            f"{f.cpu.bulk:.2f}, its others {f.cpu.other:.2f}; idle {f.cpu.idle:.2f})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--isometryd", default="build-release/daemon/isometryd",
                    help="the daemon binary to start (default: %(default)s)")
    ap.add_argument("--pythonpath", default="build-release/python",
                    help="directory holding the isometry package (default: %(default)s)")
    ap.add_argument("--rounds", type=int, default=5, help="paired rounds (default: 5)")
    ap.add_argument("--window", type=float, default=2.0,
                    help="seconds each share is measured over (default: 2)")
    ap.add_argument("--small", type=int, default=400,
                    help="64 KiB foreground copies per phase; on one node, while loaded, "
                         "as many more as fill 1 s (default: 400)")
    ap.add_argument("--link-mib", type=int, default=256,
                    help="a's sending rate to b in the tcp share row, MiB/s (default: 256)")
    ap.add_argument("--bg-nice", default="idle",
                    help="bg's qos.class.nice: 0 to 19, or idle (default: idle)")
    ap.add_argument("--inline-bytes", type=int, default=0,
                    help="both daemons' runtime.inline_bytes: direct copies up to this size run "
                         "on the thread that received them (default: 0, every copy through its "
                         "channel's DMA worker; the embedded default config has 65536)")
    ap.add_argument("--fg-gap-us", type=int, default=0,
                    help="the foreground's 64 KiB copies start this many microseconds apart "
                         "(default: 0, a closed loop, each copy right after the last: fg then "
                         "takes as much CPU as it can, which bg lacks on a small machine)")
    ap.add_argument("--json", action="store_true", help="JSON rows instead of a table")
    args = ap.parse_args()
    if args.rounds < 1 or args.window <= 0 or args.small < 100 or args.link_mib < 1:
        ap.error("--rounds >= 1, --window > 0, --small >= 100 and --link-mib >= 1")
    if args.bg_nice != "idle" and not (args.bg_nice.isdigit() and int(args.bg_nice) <= 19):
        ap.error(f"--bg-nice: 0 to 19, or idle (not {args.bg_nice!r})")
    if args.inline_bytes < 0:
        ap.error(f"--inline-bytes: 0 or more (not {args.inline_bytes})")
    if not 0 <= args.fg_gap_us <= 1_000_000:
        ap.error(f"--fg-gap-us: 0 to 1000000 (not {args.fg_gap_us})")
    if not os.access(args.isometryd, os.X_OK):
        ap.error(f"no daemon binary at {args.isometryd}: build it or pass --isometryd")
    where = machine.measure()  # before the daemons run
    sys.path.insert(0, os.path.abspath(args.pythonpath))
    try:
        bench = Bench(args)
    except ImportError as e:
        sys.exit(f"qos_bench: cannot import the isometry package from {args.pythonpath} ({e})")
    except AssertionError as e:  # the fixture's way of saying a daemon did not start
        sys.exit(f"qos_bench: {e}")
    files = iter(range(1 << 40))
    results = {k: [] for k in ("memcpy", "disk", "p99", "left", "left_cpu", "p99_ring",
                               "left_ring", "left_cpu_ring", "over_memcpy", "over_disk", "tcp",
                               "tcp_p99", "over_tcp", "cpu_floor")}
    try:
        for r in range(args.rounds):
            if r:
                bench.renew()
            results["memcpy"].append(bench.share(
                "memcpy0", lambda c, k: [pair(c, 16 * MIB) for _ in range(3)], args.window) / 3)
            results["disk"].append(bench.share(
                "disk_write0", lambda c, k: [pair(c, 8 * MIB, f"{k}-{next(files)}")
                                             for _ in range(3)], args.window) / 3)
            d = bench.qos
            small = [pair(d["fg"], 64 << 10) for _ in range(4)]
            f = bench.foreground(small, 64 * MIB, args.small)
            results["cpu_floor"].append(f.floor)
            lines = [foreground_line("", f, results, "")]
            if bench.ring:
                ring_small = [pair(d["fg_ring"], 64 << 10) for _ in range(4)]
                lines.append(foreground_line("over the rings ", bench.foreground(
                    ring_small, 64 * MIB, args.small, fg="fg_ring", floor=False), results,
                    "_ring"))
            results["over_memcpy"].append(bench.overhead(
                lambda c, k: [pair(c, 256 * MIB)], 4))
            results["over_disk"].append(bench.overhead(
                lambda c, k: [pair(c, 64 * MIB, f"o-{k}-{next(files)}")], 4))
            print(f"  round {r + 1}: shares memcpy {results['memcpy'][-1] * 3:.2f}:1, disk "
                  f"{results['disk'][-1] * 3:.2f}:1; overhead memcpy "
                  f"{results['over_memcpy'][-1]:.3f}, disk {results['over_disk'][-1]:.3f}",
                  file=sys.stderr)
            for line in lines:
                print(f"  round {r + 1}: foreground {line}", file=sys.stderr)
            cross_node_rows(args, results)
            print(f"  round {r + 1}: tcp share {results['tcp'][-1] * 3:.2f}:1, foreground p99 "
                  f"loaded/idle {results['tcp_p99'][-1]:.2f}, overhead "
                  f"{results['over_tcp'][-1]:.3f}", file=sys.stderr)
    finally:
        status = bench.close()
    if status != 0:
        sys.exit(f"qos_bench: an isometryd exited with {status}")
    ring_rows = [
        row("qos_foreground_ring_64KiB", "p99 loaded over p99 idle", results["p99_ring"],
            "<= 1.5", "fg alone"),
        row("qos_background_left_ring", "bg rate over what fg left", results["left_ring"],
            ">= 0.9", "bg alone minus fg"),
        row("qos_background_cpu_left_ring", "bg's CPUs over the CPUs fg left",
            results["left_cpu_ring"], "report", "CPUs fg left"),
    ] if results["p99_ring"] else []
    rows = [
        row("qos_share_memcpy", "fg:bg bytes over 3", results["memcpy"], "0.95-1.05",
            "weights 3:1"),
        row("qos_share_disk", "fg:bg bytes over 3", results["disk"], "0.95-1.05", "weights 3:1"),
        row("qos_share_tcp", "fg:bg bytes over 3", results["tcp"], "0.95-1.05", "weights 3:1"),
        row("qos_foreground_64KiB", "p99 loaded over p99 idle", results["p99"], "<= 1.5",
            "fg alone"),
        row("qos_foreground_tcp_64KiB", "p99 loaded over p99 idle", results["tcp_p99"],
            "<= 1.5", "fg alone"),
        row("qos_foreground_cpu_floor_64KiB", "p99 next to busy CPUs over p99 idle",
            results["cpu_floor"], "none: the machine's floor", "fg alone"),
        row("qos_background_left", "bg rate over what fg left", results["left"], ">= 0.9",
            "bg alone minus fg"),
        row("qos_background_cpu_left", "bg's CPUs over the CPUs fg left", results["left_cpu"],
            "report", "CPUs fg left"),
        *ring_rows,
        row("qos_overhead_memcpy_256MiB", "rate with classes over without", results["over_memcpy"],
            ">= 0.98", "no [qos]"),
        row("qos_overhead_disk_64MiB", "rate with classes over without", results["over_disk"],
            ">= 0.98", "no [qos]"),
        row("qos_overhead_tcp_256MiB", "rate with classes over without", results["over_tcp"],
            ">= 0.98", "no [qos]"),
    ]
    if not args.json:
        print(f"{machine.line(where)}; inline_bytes {args.inline_bytes}, bg's nice {args.bg_nice}, "
              f"fg's copies {args.fg_gap_us} us apart")
    for r in rows:
        if args.json:
            print(json.dumps({**r, "machine": where, "inline_bytes": args.inline_bytes,
                              "bg_nice": args.bg_nice, "fg_gap_us": args.fg_gap_us}))
        else:
            print(f"{r['scenario']}: {r['metric']} {r['value']:.3f} "
                  f"({r['ratio_min']:.3f}-{r['ratio_max']:.3f}, {r['rounds']} rounds; "
                  f"target {r['target']})")


if __name__ == "__main__":
    main()
