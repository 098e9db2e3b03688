#!/usr/bin/python3
"""Incremental checkpoint benchmark of Active Access (docs/guides/active-access.md
"Active Access"): a pool allocation of --mib MiB checkpointed to a file of
a DSK memory, full versus incremental after --dirty-percent of its pages
were written through the daemon (a `dirty_pages` watch sees them).

Each round, back to back on the same file: a full checkpoint (the base
image, rewritten), then writes from another client to that share of pages
(random pages, 64 bytes each), then an incremental checkpoint (one record
appended to the base's delta file), then a restore of base + delta into a
second allocation. All are durable (the daemon syncs the files). Prints
per round the three times and the ratio full / incremental (target >= 20),
then the medians; at the end the restored allocation is compared with the
image byte for byte.

Usage (Debian's python3 has grpc):
  /usr/bin/python3 tools/bench/checkpoint_bench.py --isometryd build-release/daemon/isometryd \\
      --pythonpath build-release/python [--mib 1024] [--dirty-percent 1] [--rounds 3] \\
      [--dir /var/tmp] [--json]
"""

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "pyfixture"))
sys.path.insert(0, HERE)
import machine  # noqa: E402  (tools/bench/machine.py)

PAGE = 4096
CHUNK = 4 << 20

CONFIG = """
[[memory]]
name = "sys0"
kind = "SYS"
pool = "{pool}"
client_quota = "{pool}"
staging = "64MiB"

[[memory]]
name = "dsk0"
kind = "DSK"
directory = "{{dir}}/dsk"
staging = "64MiB"

[[channel]]
name = "memcpy0"
kind = "memcpy"

[[channel]]
name = "disk_read0"
kind = "disk_read"

[[channel]]
name = "disk_write0"
kind = "disk_write"
"""


def fill(client, alloc, size, seed):
    """Writes a pseudo-random image through `client`; returns it."""
    rng = random.Random(seed)
    image = bytearray(size)
    for at in range(0, size, CHUNK):
        part = rng.randbytes(min(CHUNK, size - at))
        image[at:at + len(part)] = part
        client.write(alloc, at, part)
    return image


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--isometryd", required=True)
    ap.add_argument("--pythonpath", required=True, help="the build's python/ folder")
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--dirty-percent", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default="/var/tmp", help="where the daemon and its DSK memory live")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    where = machine.measure()  # before the daemon runs
    print(machine.line(where))
    sys.path.insert(0, args.pythonpath)
    import isometry
    from isometryd_process import IsometrydProcess

    size = args.mib << 20
    pool = f"{2 * args.mib + 64}MiB"  # the table and the restore target
    directory, daemon = IsometrydProcess.started_in_temp_dir(
        args.isometryd, CONFIG.format(pool=pool), os.path.join(args.dir, "isometry-ckpt-"),
        dirs=["dsk"], daemon=dict(log_level="warn"))
    rows = []
    try:
        owner = isometry.Client(daemon.socket, name="owner", connect_timeout=10)
        writer = isometry.Client(daemon.socket, name="writer", connect_timeout=10)
        table = owner.allocate("sys0", size)
        restored = owner.allocate("sys0", size)
        image = fill(owner, table, size, 1)
        owner.publish(table)  # the writer reaches it through the daemon
        owner.watch(table, 0, size, action="apply_log", handler="dirty_pages", log_data=False,
                    log_bytes=16 << 20)
        pages = size // PAGE
        dirty = max(1, int(pages * args.dirty_percent / 100))
        rng = random.Random(2)
        for r in range(args.rounds):
            full = timed(lambda: owner.checkpoint(table, "dsk0", "image.bin", full=True))
            owner.dirty_pages(table, clear=True)
            for p in rng.sample(range(pages), dirty):
                data = rng.randbytes(64)
                writer.write(table, p * PAGE + 100, data)
                image[p * PAGE + 100:p * PAGE + 164] = data
            answer = {}

            def incremental_checkpoint():
                answer["r"] = owner.checkpoint(table, "dsk0", "image.bin")

            incremental = timed(incremental_checkpoint)
            restore = timed(lambda: owner.restore(restored, "dsk0", "image.bin"))
            rows.append((full, incremental, restore))
            print(f"round {r + 1}: full {full:.3f} s ({size / full / 1e9:.2f} GB/s), "
                  f"incremental ({dirty} of {pages} pages dirty, "
                  f"{'full!' if answer['r'].full else 'delta'}) {incremental:.4f} s, "
                  f"ratio {full / incremental:.1f}x, restore {restore:.3f} s", flush=True)
        same = all(owner.read(restored, at, min(CHUNK, size - at)) == bytes(image[at:at + CHUNK])
                   for at in range(0, size, CHUNK))
        full_m = statistics.median(f for f, _, _ in rows)
        inc_m = statistics.median(i for _, i, _ in rows)
        res_m = statistics.median(x for _, _, x in rows)
        ratios = [f / i for f, i, _ in rows]
        print(f"median of {len(rows)}: full {full_m:.3f} s, incremental {inc_m:.4f} s, ratio "
              f"{full_m / inc_m:.1f}x (rounds {min(ratios):.1f}-{max(ratios):.1f}x; target >= 20); "
              f"restore (base + delta) {res_m:.3f} s; restored image "
              f"{'matches' if same else 'DIFFERS FROM'} the allocation")
        if args.json:
            for metric, value in (("full_s", full_m), ("incremental_s", inc_m),
                                  ("restore_s", res_m)):
                print(json.dumps(dict(scenario=f"checkpoint_{args.mib}MiB_{args.dirty_percent}pct",
                                      metric=metric, value=value, unit="s",
                                      baseline="full_checkpoint" if metric == "incremental_s"
                                      else None,
                                      baseline_value=full_m if metric == "incremental_s" else None,
                                      ratio=full_m / inc_m if metric == "incremental_s" else None,
                                      verified=same, machine=where)))
        writer.close()
        owner.close()
        if not same:
            return 1
    finally:
        daemon.stop(timeout_s=30)
        daemon.close()
        shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
