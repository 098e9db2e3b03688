#!/usr/bin/python3
"""4 KiB copy latency over gRPC from the Python client, against an empty gRPC call.

Starts a private isometryd (no calibration; small copies on the inline
path, `inline_bytes = "64KiB"` as in the embedded default config and
isometry_bench's daemon), connects the Python client to
its gRPC socket, and times `copy(src, dst, wait=True)` of 4 KiB between two
sys0 allocations, each right after an empty health check
(grpc.health.v1.Health/Check, which gRPC itself answers) on the same channel:
the floor any unary call pays on this machine. Rounds are paired like
isometry_bench's: each round's median and p99 of both, and the per-round
ratio; the row is the median over rounds.

    /usr/bin/python3 tools/bench/python_latency.py \\
        --isometryd build-release/daemon/isometryd --pythonpath build-release/python

`--json` prints isometry_bench's JSON rows (scenario latency_4KiB_grpc_python),
which tools/bench/plot.py takes.
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "pyfixture"))
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


def row(metric, values, baselines, percentiles=None, baseline_percentiles=None):
    ratios = [v / b for v, b in zip(values, baselines)]
    out = {
        "scenario": "latency_4KiB_grpc_python", "metric": metric,
        "value": statistics.median(values), "unit": "us",
        "baseline": "empty gRPC call (Python)", "baseline_value": statistics.median(baselines),
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
    args = ap.parse_args()
    if args.rounds < 1 or args.iterations < 100:
        ap.error("--rounds must be at least 1 and --iterations at least 100")
    if not os.access(args.isometryd, os.X_OK):
        ap.error(f"no daemon binary at {args.isometryd}: build it or pass --isometryd")
    sys.path.insert(0, os.path.abspath(args.pythonpath))
    try:
        from isometry import Client
    except ImportError as e:
        sys.exit(f"python_latency: cannot import the isometry package from "
                 f"{args.pythonpath} ({e}); build the tree or pass --pythonpath")

    try:
        directory, daemon = IsometrydProcess.started_in_temp_dir(
            args.isometryd, CONFIG, "isometry-pylat-", daemon={"log_level": "warn"})
    except AssertionError as e:  # the fixture's way of saying the daemon did not start
        sys.exit(f"python_latency: {e}")
    try:
        with Client(daemon.socket, name="python-latency") as c:
            health = c._channel.unary_unary("/grpc.health.v1.Health/Check")
            insts = []
            for _ in range(2):
                a = c.allocate("sys0", COPY_BYTES)
                insts.append(c.register_instance(a, [COPY_BYTES], [("b", 1)], "F,x"))
            src, dst = insts
            one_round(c, health, src, dst, WARM_UP)
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
    for r in rows:
        if args.json:
            print(json.dumps(r))
        else:
            print(f"4 KiB gRPC copy, Python client, {r['metric']}: {r['value']:.1f} us; "
                  f"empty gRPC call {r['baseline_value']:.1f} us; ratio {r['ratio']:.2f} "
                  f"({r['ratio_min']:.2f}-{r['ratio_max']:.2f}, {r['rounds']} rounds)")


if __name__ == "__main__":
    main()
