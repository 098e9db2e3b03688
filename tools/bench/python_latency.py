#!/usr/bin/python3
"""4 KiB copy latency from the Python client, over gRPC and over the native path.

Starts a private isometryd (no calibration; small copies on the inline
path, `inline_bytes = "64KiB"` as in the embedded default config and
isometry_bench's daemon), connects the Python client to
its gRPC socket, and times `copy(src, dst, wait=True)` of 4 KiB between two
sys0 allocations, each right after an empty health check
(grpc.health.v1.Health/Check, which gRPC itself answers) on the same channel:
the floor any unary call pays on this machine. Rounds are paired like
isometry_bench's: each round's median and p99 of both, and the per-round
ratio; the row is the median over rounds.

Where the extension isometry._native is built (issue #55), a second client
opens its session over the local socket natively, and each round also
times its `copy(src, dst)` through the shared-memory rings, each right
before the same copy made by the C++ client itself in that session
(`_native.Session.time_copies`, timed in C++): the native row's baseline,
so its ratio is what Python costs over C++ on the same path.

    /usr/bin/python3 tools/bench/python_latency.py \\
        --isometryd build-release/daemon/isometryd --pythonpath build-release/python

`--json` prints isometry_bench's JSON rows (scenarios latency_4KiB_grpc_python
and latency_4KiB_native_python), which tools/bench/plot.py takes.
"""
import argparse
import contextlib
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
from isometryd_process import ONE_SYS_MEMORY, IsometrydProcess  # noqa: E402

# As the embedded default config and isometry_bench's daemon run small
# copies: on the submitting thread. Without it (the fixture's bare config)
# each copy woke the DMA worker and both channel threads, ~2.4 more context
# switches a call than the daemon users run.
CONFIG = '[runtime]\ninline_bytes = "64KiB"\n' + ONE_SYS_MEMORY
COPY_BYTES = 4096
WARM_UP = 200


def percentile(sorted_us, p):
    """The p-th percentile (0-100) of sorted samples, nearest rank."""
    k = max(0, min(len(sorted_us) - 1, int(round(p / 100.0 * len(sorted_us) + 0.5)) - 1))
    return sorted_us[k]


def one_round(client, health, src, dst, iterations):
    """`iterations` (empty call, copy) pairs; microseconds of each."""
    floor_us, copy_us = [], []
    for _ in range(iterations):
        t0 = time.perf_counter()
        health(b"")
        t1 = time.perf_counter()
        client.copy(src, dst, wait=True)
        t2 = time.perf_counter()
        floor_us.append((t1 - t0) * 1e6)
        copy_us.append((t2 - t1) * 1e6)
    return sorted(copy_us), sorted(floor_us)


def native_round(client, session, src, dst, iterations):
    """`iterations` (Python native copy, C++ copy) pairs on one session;
    microseconds of each."""
    ends = client._native.instances(src.id, dst.id)  # the extension's handles, for C++
    native_us, cpp_us = [], []
    for _ in range(iterations):
        t0 = time.perf_counter()
        client.copy(src, dst)
        t1 = time.perf_counter()
        native_us.append((t1 - t0) * 1e6)
        cpp_us.append(session.time_copies(ends[0], ends[1], 1)[0])
    return sorted(native_us), sorted(cpp_us)


GRPC = ("latency_4KiB_grpc_python", "empty gRPC call (Python)")
NATIVE = ("latency_4KiB_native_python", "C++ client copy, same session (native path)")


def row(metric, values, baselines, percentiles=None, baseline_percentiles=None, kind=GRPC):
    ratios = [v / b for v, b in zip(values, baselines)]
    out = {
        "scenario": kind[0], "metric": metric,
        "value": statistics.median(values), "unit": "us",
        "baseline": kind[1], "baseline_value": statistics.median(baselines),
        "ratio": statistics.median(ratios), "target": "report", "rounds": len(values),
        "ratio_min": min(ratios), "ratio_max": max(ratios),
        "round_values": values, "round_baselines": baselines, "round_ratios": ratios,
        "predicted": None, "plan": "latency rows have no plan", "bytes": COPY_BYTES,
    }
    if percentiles:
        out["percentiles"] = percentiles
        out["baseline_percentiles"] = baseline_percentiles
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--isometryd", default="build-release/daemon/isometryd",
                    help="the daemon binary to start (default: %(default)s)")
    ap.add_argument("--pythonpath", default="build-release/python",
                    help="directory holding the isometry package and its generated gRPC modules "
                         "(default: %(default)s)")
    ap.add_argument("--rounds", type=int, default=5, help="paired rounds (default: 5)")
    ap.add_argument("--iterations", type=int, default=2000,
                    help="copies per round, after %d to warm up (default: 2000)" % WARM_UP)
    ap.add_argument("--json", action="store_true", help="JSON rows instead of a table")
    ap.add_argument("--no-native", action="store_true",
                    help="time the gRPC path only, even where isometry._native is built")
    args = ap.parse_args()
    where = machine.measure()  # before the daemon runs
    if args.rounds < 1 or args.iterations < 100:
        ap.error("--rounds must be at least 1 and --iterations at least 100")
    if not os.access(args.isometryd, os.X_OK):
        ap.error(f"no daemon binary at {args.isometryd}: build it or pass --isometryd")
    sys.path.insert(0, os.path.abspath(args.pythonpath))
    try:
        from isometry import Client, native_available
    except ImportError as e:
        sys.exit(f"python_latency: cannot import the isometry package from "
                 f"{args.pythonpath} ({e}); build the tree or pass --pythonpath")

    try:
        directory, daemon = IsometrydProcess.started_in_temp_dir(
            args.isometryd, CONFIG, "isometry-pylat-", daemon={"log_level": "warn"})
    except AssertionError as e:  # the fixture's way of saying the daemon did not start
        sys.exit(f"python_latency: {e}")
    native = native_available() and not args.no_native
    local_socket = os.path.join(directory, "local.sock")
    nat = {"medians": [], "cpp_medians": [], "p99s": [], "cpp_p99s": [], "all": [], "cpp_all": []}
    try:
        with Client(daemon.socket, name="python-latency") as c, (
                Client(daemon.socket, name="python-latency-native", local_socket=local_socket,
                       native=True) if native else contextlib.nullcontext()) as n:
            health = c._channel.unary_unary("/grpc.health.v1.Health/Check")
            insts = []
            for _ in range(2):
                a = c.allocate("sys0", COPY_BYTES)
                insts.append(c.register_instance(a, [COPY_BYTES], [("b", 1)], "F,x"))
            src, dst = insts
            one_round(c, health, src, dst, WARM_UP)
            if n is not None:
                nsrc, ndst = (n.register_instance(n.allocate("sys0", COPY_BYTES), [COPY_BYTES],
                                                  [("b", 1)], "F,x") for _ in range(2))
                native_round(n, n._native.session, nsrc, ndst, WARM_UP)
            medians, floor_medians, p99s, floor_p99s = [], [], [], []
            all_copy, all_floor = [], []
            for r in range(args.rounds):
                copy_us, floor_us = one_round(c, health, src, dst, args.iterations)
                medians.append(percentile(copy_us, 50))
                floor_medians.append(percentile(floor_us, 50))
                p99s.append(percentile(copy_us, 99))
                floor_p99s.append(percentile(floor_us, 99))
                all_copy += copy_us
                all_floor += floor_us
                print(f"  round {r + 1}: copy median {medians[-1]:.1f} us, p99 {p99s[-1]:.1f} us; "
                      f"empty call median {floor_medians[-1]:.1f} us, p99 {floor_p99s[-1]:.1f} us",
                      file=sys.stderr)
                if n is not None:
                    native_us, cpp_us = native_round(n, n._native.session, nsrc, ndst,
                                                     args.iterations)
                    for key, sample in (("", native_us), ("cpp_", cpp_us)):
                        nat[key + "medians"].append(percentile(sample, 50))
                        nat[key + "p99s"].append(percentile(sample, 99))
                        nat[key + "all"] += sample
                    print(f"  round {r + 1}: native copy median {nat['medians'][-1]:.1f} us, "
                          f"p99 {nat['p99s'][-1]:.1f} us; C++ client median "
                          f"{nat['cpp_medians'][-1]:.1f} us, p99 {nat['cpp_p99s'][-1]:.1f} us",
                          file=sys.stderr)
    finally:
        status = daemon.stop()
        daemon.close()
        shutil.rmtree(directory, ignore_errors=True)
    if status != 0:
        sys.exit(f"python_latency: isometryd exited with {status}")
    all_copy.sort()
    all_floor.sort()
    cdf = list(range(100)) + [99.5, 99.9, 99.99, 100]  # as isometry_bench's rows
    rows = [
        row("median", medians, floor_medians,
            [[p, percentile(all_copy, p)] for p in cdf],
            [[p, percentile(all_floor, p)] for p in cdf]),
        row("p99", p99s, floor_p99s),
    ]
    if native:
        nat["all"].sort()
        nat["cpp_all"].sort()
        rows += [
            row("median", nat["medians"], nat["cpp_medians"],
                [[p, percentile(nat["all"], p)] for p in cdf],
                [[p, percentile(nat["cpp_all"], p)] for p in cdf], kind=NATIVE),
            row("p99", nat["p99s"], nat["cpp_p99s"], kind=NATIVE),
        ]
    if not args.json:
        print(machine.line(where))
    for r in rows:
        if args.json:
            print(json.dumps({**r, "machine": where}))
        else:
            path = "gRPC" if r["scenario"] == GRPC[0] else "native"
            print(f"4 KiB {path} copy, Python client, {r['metric']}: {r['value']:.1f} us; "
                  f"{r['baseline']} {r['baseline_value']:.1f} us; ratio {r['ratio']:.2f} "
                  f"({r['ratio_min']:.2f}-{r['ratio_max']:.2f}, {r['rounds']} rounds)")


if __name__ == "__main__":
    main()
