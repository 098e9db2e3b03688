#!/usr/bin/python3
"""The Python client's native path against the C++ client, in one session.

Starts a private isometryd (its config as isometry_bench's daemon: small
copies inline, two memcpy threads; a pool large enough for 2 GiB) and
opens a native session (isometry._native, issue #55). Two scenarios, in
paired rounds like isometry_bench's (each round times Python, then the
same work from C++ in the same session; the row is the median over
rounds of each and of the per-round ratio):

* ``aos_to_soa_1GiB``: 1 GiB array of structs (2^26 records of four
  float32 fields, a NumPy structured array over a mapped allocation,
  registered with ``register_array``) into a struct of arrays in another
  mapped allocation: ``client.copy(src, dst)`` from Python against
  ``_native.Session.time_copies`` (the C++ client's ``Copy``) on the same
  instances. GiB/s; the result is checked against NumPy once.
* ``private_aos_to_soa_1GiB``: the same copy between two NumPy arrays of
  this process's own memory (``register_private``): Python's
  ``client.copy`` with the hops next to its own memory run in the process
  (``in_process``, the default) against the C++ client's ``Copy`` on the
  same instances, and (a second row) the daemon moving it with cma
  (``in_process=False``) against the in-process copy.
* ``async_4KiB_x10000``: 10,000 copies of 4 KiB (64 pairs of instances,
  round robin) in flight from one asyncio task (``asyncio.gather`` of
  ``acopy``), and the same from ``copy_future`` (concurrent futures),
  against the C++ client submitting the 10,000 to the ring and then
  waiting for each (``_native.Session.time_in_flight``). Copies/s; each
  round's figure of each is the median of three runs, interleaved.

No assertion on speed: it prints the figures and their ratios (Python
over C++; 1.0 is parity), with the machine line (tools/bench/machine.py).

    /usr/bin/python3 tools/bench/python_native_bench.py \\
        --isometryd build-release/daemon/isometryd --pythonpath build-release/python

``--json`` prints isometry_bench-style rows instead of the table.
"""
import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "pyfixture"))
sys.path.insert(0, HERE)
import machine  # noqa: E402  (tools/bench/machine.py)
from isometryd_process import IsometrydProcess  # noqa: E402

CONFIG = """[runtime]
inline_bytes = "64KiB"
[[memory]]
name = "sys0"
kind = "SYS"
pool = "2304MiB"
client_quota = "2304MiB"
staging = "64MiB"
[[channel]]
name = "memcpy0"
kind = "memcpy"
threads = 2
[[channel]]
name = "cma0"
kind = "cma"
"""
SMALL = 4096
PAIRS = 64
SMALL_RUNS = 3  # runs of the small copies per round and side (their median)


def aos_to_soa(np, c, mib):
    """A structured array over one allocation (AOS), a struct of arrays
    in another: the two instances and a check of the copy."""
    fields = [("a", "<f4"), ("b", "<f4"), ("c", "<f4"), ("d", "<f4")]
    n = (mib << 20) // 16
    a, b = c.allocate("sys0", n * 16), c.allocate("sys0", n * 16)
    x = np.frombuffer(a.buffer, dtype=fields)
    for k, (name, _) in enumerate(fields):
        x[name] = np.arange(n, dtype=np.float32) + k
    src = c.register_array(a, x)                                       # "F,x"
    dst = c.register_instance(b, [n], [(f, 4) for f, _ in fields], "x,F")
    soa = np.frombuffer(b.buffer, dtype=np.float32).reshape(4, n)

    def check():
        for k, (name, _) in enumerate(fields):
            if not np.array_equal(soa[k], x[name]):
                sys.exit(f"python_native_bench: field {name} of the SOA copy differs")
        soa[...] = 0

    return src, dst, n * 16, check


def private_aos_to_soa(np, c, mib, arrays=None):
    """Two NumPy arrays of this process (an AOS of four float32 fields, its
    SOA), registered on `c` as private ranges: the instances, the arrays
    (to register on another client too) and a check of the copy."""
    fields = [("a", "<f4"), ("b", "<f4"), ("c", "<f4"), ("d", "<f4")]
    n = (mib << 20) // 16
    if arrays is None:
        x = np.zeros(n, dtype=fields)
        for k, (name, _) in enumerate(fields):
            x[name] = np.arange(n, dtype=np.float32) + k
        arrays = (x, np.zeros((4, n), dtype=np.float32))
    x, soa = arrays
    src = c.register_instance(private_range=c.register_private(x), bounds=[n],
                              fields=[(f, 4) for f, _ in fields], layout="F,x")
    dst = c.register_instance(private_range=c.register_private(soa), bounds=[n],
                              fields=[(f, 4) for f, _ in fields], layout="x,F")

    def check():
        for k, (name, _) in enumerate(fields):
            if not np.array_equal(soa[k], x[name]):
                sys.exit(f"python_native_bench: field {name} of the private SOA copy differs")
        soa[...] = 0

    return src, dst, arrays, check


def small_pairs(c):
    out = []
    for _ in range(PAIRS):
        s, d = (c.register_instance(c.allocate("sys0", SMALL), [SMALL], [("v", 1)], "F,x")
                for _ in range(2))
        out.append((s, d))
    return out


def python_async(c, pairs, count):
    async def run():
        t0 = time.perf_counter()
        await asyncio.gather(*(c.acopy(*pairs[i % len(pairs)]) for i in range(count)))
        return time.perf_counter() - t0

    return asyncio.run(run())


def python_futures(c, pairs, count):
    t0 = time.perf_counter()
    futures = [c.copy_future(*pairs[i % len(pairs)]) for i in range(count)]
    for f in futures:
        f.result()
    return time.perf_counter() - t0


def row(scenario, metric, unit, values, baselines, baseline, nbytes):
    ratios = [v / b for v, b in zip(values, baselines)]
    return {
        "scenario": scenario, "metric": metric, "value": statistics.median(values),
        "unit": unit, "baseline": baseline, "baseline_value": statistics.median(baselines),
        "ratio": statistics.median(ratios), "target": "report", "rounds": len(values),
        "ratio_min": min(ratios), "ratio_max": max(ratios), "round_values": values,
        "round_baselines": baselines, "round_ratios": ratios, "predicted": None,
        "plan": "through the rings of one native session", "bytes": nbytes,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--isometryd", default="build-release/daemon/isometryd")
    ap.add_argument("--pythonpath", default="build-release/python")
    ap.add_argument("--rounds", type=int, default=5, help="paired rounds (default: 5)")
    ap.add_argument("--mib", type=int, default=1024,
                    help="size of the AOS->SOA copy in MiB (default: 1024)")
    ap.add_argument("--copies", type=int, default=10000,
                    help="small copies in flight per round (default: 10000)")
    ap.add_argument("--json", action="store_true", help="JSON rows instead of a table")
    args = ap.parse_args()
    if args.rounds < 1 or args.mib < 1 or args.copies < 1:
        ap.error("--rounds, --mib and --copies must be at least 1")
    where = machine.measure()  # before the daemon runs
    if not os.access(args.isometryd, os.X_OK):
        ap.error(f"no daemon binary at {args.isometryd}: build it or pass --isometryd")
    sys.path.insert(0, os.path.abspath(args.pythonpath))
    try:
        import numpy as np

        import isometry
    except ImportError as e:
        sys.exit(f"python_native_bench: cannot import numpy or the isometry package from "
                 f"{args.pythonpath} ({e})")
    if not isometry.native_available():
        print(f"python_native_bench: skipped: {isometry.native_unavailable_reason()}",
              file=sys.stderr)
        sys.exit(77)
    try:
        directory, daemon = IsometrydProcess.started_in_temp_dir(
            args.isometryd, CONFIG, "isometry-pynat-", daemon={"log_level": "warn"})
    except AssertionError as e:
        sys.exit(f"python_native_bench: {e}")
    big = {"py": [], "cpp": []}
    own = {"py": [], "cpp": [], "cma": []}
    small = {"async": [], "futures": [], "cpp": []}
    try:
        with isometry.Client(daemon.socket, name="python-native-bench", native=True,
                             local_socket=os.path.join(directory, "local.sock")) as c:
            session = c._native.session
            src, dst, nbytes, check = aos_to_soa(np, c, args.mib)
            ends = c._native.instances(src.id, dst.id)
            c.copy(src, dst)                                   # warm: pages touched, plan cached
            check()
            session.time_copies(ends[0], ends[1], 1)
            cma = isometry.Client(daemon.socket, name="python-native-bench-cma", native=True,
                                  in_process=False,
                                  local_socket=os.path.join(directory, "local.sock"))
            psrc, pdst, arrays, pcheck = private_aos_to_soa(np, c, args.mib)
            csrc, cdst, _, _ = private_aos_to_soa(np, cma, args.mib, arrays)
            pends = c._native.instances(psrc.id, pdst.id)
            c.copy(psrc, pdst)
            pcheck()
            cma.copy(csrc, cdst)
            pcheck()
            pairs = small_pairs(c)
            handles = [c._native.instances(s.id, d.id) for s, d in pairs]
            srcs, dsts = [h[0] for h in handles], [h[1] for h in handles]
            python_async(c, pairs, min(args.copies, 1000))
            session.time_in_flight(srcs, dsts, min(args.copies, 1000))
            gib = nbytes / float(1 << 30)
            for r in range(args.rounds):
                t0 = time.perf_counter()
                c.copy(src, dst)
                big["py"].append(gib / (time.perf_counter() - t0))
                big["cpp"].append(gib / (session.time_copies(ends[0], ends[1], 1)[0] / 1e6))
                t0 = time.perf_counter()
                c.copy(psrc, pdst)
                own["py"].append(gib / (time.perf_counter() - t0))
                own["cpp"].append(gib / (session.time_copies(pends[0], pends[1], 1)[0] / 1e6))
                t0 = time.perf_counter()
                cma.copy(csrc, cdst)
                own["cma"].append(gib / (time.perf_counter() - t0))
                # A 10,000-copy run lasts tens of milliseconds, short enough
                # for one scheduling hiccup to move it: each side's figure
                # is the median of three, interleaved (C++ first, then
                # Python), so that what the large copies above left behind
                # lands on both sides alike.
                runs = {"cpp": [], "async": [], "futures": []}
                for _ in range(SMALL_RUNS):
                    runs["cpp"].append(args.copies / session.time_in_flight(srcs, dsts,
                                                                           args.copies))
                    runs["async"].append(args.copies / python_async(c, pairs, args.copies))
                    runs["futures"].append(args.copies / python_futures(c, pairs, args.copies))
                for k, v in runs.items():
                    small[k].append(statistics.median(v))
                print(f"  round {r + 1}: AOS->SOA Python {big['py'][-1]:.2f} GiB/s, C++ "
                      f"{big['cpp'][-1]:.2f} GiB/s; private {own['py'][-1]:.2f}, C++ "
                      f"{own['cpp'][-1]:.2f}, cma {own['cma'][-1]:.2f} GiB/s; "
                      f"{args.copies} x 4 KiB in flight: asyncio "
                      f"{small['async'][-1]:.0f}/s, futures {small['futures'][-1]:.0f}/s, C++ "
                      f"{small['cpp'][-1]:.0f}/s", file=sys.stderr)
            c.copy(src, dst)
            check()
            cma.copy(csrc, cdst)
            pcheck()
            cma.close()
    finally:
        status = daemon.stop()
        daemon.close()
        shutil.rmtree(directory, ignore_errors=True)
    if status != 0:
        sys.exit(f"python_native_bench: isometryd exited with {status}")
    cpp_copy = "C++ client Copy, same session and instances"
    cpp_flight = "C++ client Submit x N then Wait, same session and instances"
    rows = [
        row(f"aos_to_soa_{args.mib}MiB_native_python", "throughput", "GiB/s", big["py"],
            big["cpp"], cpp_copy, nbytes),
        row(f"private_aos_to_soa_{args.mib}MiB_in_process_python", "throughput", "GiB/s",
            own["py"], own["cpp"], cpp_copy, nbytes),
        row(f"private_aos_to_soa_{args.mib}MiB_cma_python", "throughput", "GiB/s", own["cma"],
            own["py"], "Python, its hops run in the process (in_process)", nbytes),
        row(f"async_4KiB_x{args.copies}_asyncio_python", "copies_per_s", "1/s", small["async"],
            small["cpp"], cpp_flight, SMALL),
        row(f"async_4KiB_x{args.copies}_futures_python", "copies_per_s", "1/s",
            small["futures"], small["cpp"], cpp_flight, SMALL),
    ]
    if not args.json:
        print(machine.line(where))
    for r in rows:
        if args.json:
            print(json.dumps({**r, "machine": where}))
        else:
            print(f"{r['scenario']}: Python {r['value']:.4g} {r['unit']}; {r['baseline']} "
                  f"{r['baseline_value']:.4g} {r['unit']}; ratio {r['ratio']:.2f} "
                  f"({r['ratio_min']:.2f}-{r['ratio_max']:.2f}, {r['rounds']} rounds)")


if __name__ == "__main__":
    main()
