#!/usr/bin/python3
"""Remote hashtable inserts with Active Access (docs/guides/active-access.md "Active
Access"): node a owns a hashtable in a pool allocation; a client on node b
inserts --inserts (key, value) pairs, one at a time, three ways, in the
same run:

  active     one active put per insert: a 16-byte record copied from b
             into a's watched region (handler hash_insert, log_only); a's
             daemon inserts it and the copy completes after that.
  notify     the way without Active Access: the record is copied into a
             mailbox slot of a's allocation, then a separate notification
             RPC (TCP on loopback) tells the owner on a, which reads the
             slot and writes the table entry, then answers.
  rmw        read-modify-write with two round trips: b reads the home
             bucket from a (a copy a -> b), picks the slot (probing on
             locally), and writes the bucket back (a copy b -> a).

All three tables use the daemon's slot layout ({used, key, value}, 24-byte
slots, linear probing, the same hash) and are checked after each round:
every key present with its value. Prints inserts/s for each per round,
the medians and the ratios active/notify and active/rmw (target in the
issue: active >= 2x the best baseline).

Usage (Debian's python3 has grpc):
  /usr/bin/python3 tools/bench/active_hashtable_bench.py \\
      --isometryd build-release/daemon/isometryd --pythonpath build-release/python \\
      [--inserts 2000] [--rounds 3] [--eager-put-size 64KiB] [--dir /var/tmp] [--json]

With --json, one object per line:
  {"scenario","metric","value","unit","baseline","baseline_value","ratio"}
"""

import argparse
import json
import os
import socket
import statistics
import struct
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "cluster"))
sys.path.insert(0, HERE)
import machine  # noqa: E402  (tools/bench/machine.py)

PAGE = 4096
REC = 16  # (key, value) record of a put
SLOT = 24  # {used, key, value}
MASK = (1 << 64) - 1


def hash_key(k):
    """The daemon's HashKey (daemon/node/watch_state.cc)."""
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & MASK
    k ^= k >> 33
    return k


def table_bytes(inserts):
    """Room for the keys at a load factor of at most 1/2, in whole pages."""
    return -(-(2 * inserts + 1) * SLOT // PAGE) * PAGE


def check_table(raw, expect):
    found = {}
    for at in range(0, len(raw) - SLOT + 1, SLOT):
        used, key, value = struct.unpack_from("<QQQ", raw, at)
        if used:
            found[key] = value
    return found == expect


def byte_instance(client, alloc, n, offset=0, memory=""):
    return client.register_instance(alloc, [n], [("v", 1)], "F,x", offset=offset, memory=memory)


class Owner:
    """The table's owner on node a for the notify baseline: a TCP server
    whose every request names a mailbox record to insert; it reads the
    record from its allocation, writes the slot, then answers."""

    def __init__(self, client, alloc, mailbox, slots):
        self.client, self.alloc, self.mailbox, self.slots = client, alloc, mailbox, slots
        self.used = {}  # slot -> key (the owner is the table's only writer)
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(1)
        self.port = self.server.getsockname()[1]
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        conn, _ = self.server.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with conn:
            while True:
                msg = conn.recv(8)
                if len(msg) < 8:
                    return
                (index,) = struct.unpack("<Q", msg)
                key, value = struct.unpack(
                    "<QQ", self.client.read(self.alloc, self.mailbox + index * REC, REC))
                slot = hash_key(key) % self.slots
                while self.used.get(slot, key) != key:
                    slot = (slot + 1) % self.slots
                self.used[slot] = key
                self.client.write(self.alloc, slot * SLOT, struct.pack("<QQQ", 1, key, value))
                conn.sendall(b"k")


def run_active(ca, cb, n, keys, values):
    tbytes = table_bytes(n)
    table = ca.allocate("sys0", tbytes)
    ca.write(table, 0, bytes(tbytes))
    ca.publish(table)
    ca.watch(table, 0, tbytes, action="log_only", handler="hash_insert", value_bytes=8,
             log_data=False)
    src = cb.allocate("sys0", n * REC)
    cb.write(src, 0, b"".join(struct.pack("<QQ", k, v) for k, v in zip(keys, values)))
    src_i = byte_instance(cb, src, n * REC)
    dst_i = byte_instance(cb, table.id, n * REC, memory="a:sys0")
    t0 = time.perf_counter()
    for i in range(n):
        cb.copy(src_i, dst_i, box=[(i * REC, (i + 1) * REC)])
    took = time.perf_counter() - t0
    ok = check_table(ca.read(table, 0, tbytes), dict(zip(keys, values)))
    return took, ok, (table, src)


def run_notify(ca, cb, n, keys, values):
    tbytes = table_bytes(n)
    alloc = ca.allocate("sys0", tbytes + n * REC)  # the table, then the mailbox
    ca.write(alloc, 0, bytes(tbytes + n * REC))
    ca.publish(alloc)
    owner = Owner(ca, alloc, tbytes, tbytes // SLOT)
    src = cb.allocate("sys0", n * REC)
    cb.write(src, 0, b"".join(struct.pack("<QQ", k, v) for k, v in zip(keys, values)))
    src_i = byte_instance(cb, src, n * REC)
    dst_i = byte_instance(cb, alloc.id, n * REC, offset=tbytes, memory="a:sys0")
    conn = socket.create_connection(("127.0.0.1", owner.port))
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    t0 = time.perf_counter()
    for i in range(n):
        cb.copy(src_i, dst_i, box=[(i * REC, (i + 1) * REC)])
        conn.sendall(struct.pack("<Q", i))
        if conn.recv(1) != b"k":
            raise RuntimeError("the owner hung up")
    took = time.perf_counter() - t0
    conn.close()
    owner.thread.join(timeout=10)
    owner.server.close()
    ok = check_table(ca.read(alloc, 0, tbytes), dict(zip(keys, values)))
    return took, ok, (alloc, src)


def run_rmw(ca, cb, n, keys, values):
    tbytes = table_bytes(n)
    slots = tbytes // SLOT
    table = ca.allocate("sys0", tbytes)
    ca.write(table, 0, bytes(tbytes))
    ca.publish(table)
    # b's copy of the table's buckets, at the same offsets (a box names
    # the same bytes at both ends).
    mirror = cb.allocate("sys0", tbytes)
    local = byte_instance(cb, mirror, tbytes)
    remote = byte_instance(cb, table.id, tbytes, memory="a:sys0")
    t0 = time.perf_counter()
    for key, value in zip(keys, values):
        slot = hash_key(key) % slots
        while True:
            box = [(slot * SLOT, (slot + 1) * SLOT)]
            cb.copy(remote, local, box=box)  # round trip 1: the bucket from a
            used, k, _ = struct.unpack("<QQQ", cb.read(mirror, slot * SLOT, SLOT))
            if not used or k == key:
                break
            slot = (slot + 1) % slots
        cb.write(mirror, slot * SLOT, struct.pack("<QQQ", 1, key, value))
        cb.copy(local, remote, box=box)  # round trip 2: the bucket back
    took = time.perf_counter() - t0
    ok = check_table(ca.read(table, 0, tbytes), dict(zip(keys, values)))
    return took, ok, (table, mirror)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--isometryd", required=True)
    ap.add_argument("--pythonpath", default="build-release/python")
    ap.add_argument("--inserts", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where the daemons' directories go")
    ap.add_argument("--eager-put-size", default="0",
                    help="both daemons' cluster.eager_put_size (e.g. 64KiB; 0: off): small "
                         "puts, the active one and the baselines' alike, in one peer call")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    where = machine.measure()  # before the daemons run
    print(machine.line(where))
    sys.path.insert(0, args.pythonpath)
    os.environ.setdefault("ISOMETRY_PYTHONPATH", args.pythonpath)
    import cluster_fixture as cf

    n = args.inserts
    cluster = cf.Cluster(args.isometryd, ["a", "b"], root=args.dir, request="256KiB",
                         extra_cluster=f'eager_put_size = "{args.eager_put_size}"')
    rates = {"active": [], "notify": [], "rmw": []}
    verified = True
    try:
        cluster.start()
        with cluster["a"].client("owner") as ca, cluster["b"].client("inserter") as cb:
            for r in range(args.rounds):
                rng = __import__("random").Random(r)
                keys = rng.sample(range(1, 1 << 62), n)
                values = [rng.getrandbits(63) for _ in keys]
                line = []
                for name, fn in (("active", run_active), ("notify", run_notify),
                                 ("rmw", run_rmw)):
                    took, ok, allocs = fn(ca, cb, n, keys, values)
                    verified &= ok
                    rates[name].append(n / took)
                    line.append(f"{name} {n / took:8.0f}/s{'' if ok else ' (TABLE WRONG)'}")
                    for c, alloc in zip((ca, cb), allocs):
                        c.free(alloc)
                print(f"round {r + 1}: " + ", ".join(line), flush=True)
    finally:
        cluster.stop()
    med = {k: statistics.median(v) for k, v in rates.items()}
    best = max(med["notify"], med["rmw"])
    print(f"median of {args.rounds} rounds of {n} inserts from node b into node a's table "
          f"(cluster.eager_put_size {args.eager_put_size}):")
    print(f"  active put (one operation)      {med['active']:10.0f} inserts/s")
    print(f"  put + notification RPC          {med['notify']:10.0f} inserts/s   "
          f"active/notify {med['active'] / med['notify']:.2f}x")
    print(f"  read-modify-write (2 trips)     {med['rmw']:10.0f} inserts/s   "
          f"active/rmw {med['active'] / med['rmw']:.2f}x")
    print(f"  active / best baseline {med['active'] / best:.2f}x (target >= 2); tables "
          f"{'verified' if verified else 'WRONG'}")
    if args.json:
        for base in ("notify", "rmw"):
            print(json.dumps(dict(scenario="active_hashtable",
                                  metric=f"inserts/s, active put, eager {args.eager_put_size}",
                                  value=med["active"], unit="1/s", baseline=base,
                                  baseline_value=med[base], ratio=med["active"] / med[base],
                                  machine=where)))
    return 0 if verified else 1


if __name__ == "__main__":
    sys.exit(main())
