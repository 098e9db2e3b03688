#!/usr/bin/python3
"""Charts of isometry_bench results.

    isometry_bench --json > results.jsonl
    tools/bench/plot.py results.jsonl -o charts/
    isometry_bench --json --scenario contiguous --contiguous-mib 16,64,256,1024 \\
        | tools/bench/plot.py -o charts/

Reads the one-object-per-line output of `isometry_bench --json` (a file, or
standard input when INPUT is absent or "-"; several runs may be
concatenated) and writes PNG charts into the output directory:

  throughput_<scenario>.png  throughput against size for a scenario whose
                             rows were measured at several sizes: Isometry
                             (whiskers: the slowest and fastest round), each
                             baseline, and the plan's prediction
  ratios.png                 every other throughput or time row: the median
                             of the paired rounds' ratios (ours / baseline)
                             as a bar, the rounds' range as whiskers, and the
                             row's target as a mark
  latency_cdf.png            the distribution of every row that carries
                             latency percentiles, with its baseline's

Prints the path of each file written. Needs matplotlib (Debian's
python3-matplotlib, for /usr/bin/python3). Exit status: 0 when it wrote at
least one chart, 1 when the input held no usable row, 2 on a usage error.
"""

import argparse
import json
import os
import re
import sys


def read_rows(stream):
    """The JSON objects of `stream`, one per line; other lines are skipped
    (a table or a log line mixed in), with a note on stderr."""
    rows = []
    for number, line in enumerate(stream, 1):
        line = line.strip()
        if not line:
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            print(f"plot.py: line {number} is not JSON, skipped", file=sys.stderr)
            continue
        if isinstance(row, dict) and "scenario" in row and "value" in row:
            rows.append(row)
    return rows


def safe_name(text):
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "scenario"


def size_label(size):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size} B"


def sweeps(rows):
    """{scenario: rows} for throughput rows measured at two sizes or more."""
    by_scenario = {}
    for row in rows:
        if row.get("unit") == "GB/s" and row.get("bytes"):
            by_scenario.setdefault(row["scenario"], []).append(row)
    return {s: rs for s, rs in by_scenario.items() if len({r["bytes"] for r in rs}) >= 2}


def plot_sweep(plt, scenario, rows, out_dir):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ours = {}
    baselines = {}
    predicted = {}
    for row in rows:
        size = row["bytes"]
        ours.setdefault(size, row)
        if row.get("baseline_value"):
            baselines.setdefault(row["baseline"], {})[size] = row["baseline_value"]
        if row.get("predicted"):
            predicted[size] = row["predicted"]
    sizes = sorted(ours)
    values = [ours[s]["value"] for s in sizes]
    low = [v - min(ours[s].get("round_values") or [v]) for s, v in zip(sizes, values)]
    high = [max(ours[s].get("round_values") or [v]) - v for s, v in zip(sizes, values)]
    ax.errorbar(sizes, values, yerr=[low, high], marker="o", capsize=3, label="Isometry")
    for name, points in sorted(baselines.items()):
        xs = sorted(points)
        ax.plot(xs, [points[x] for x in xs], marker="s", linestyle="--", label=name)
    if predicted:
        xs = sorted(predicted)
        ax.plot(xs, [predicted[x] for x in xs], linestyle=":", color="gray", label="predicted")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes)
    ax.set_xticklabels([size_label(s) for s in sizes], rotation=30)
    ax.set_xlabel("size per copy")
    ax.set_ylabel("GB/s (median of rounds)")
    ax.set_title(scenario)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    path = os.path.join(out_dir, f"throughput_{safe_name(scenario)}.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def target_of(row):
    """The number in a target such as ">= 0.95" when it bounds the ratio,
    else None (a target in microseconds bounds the value, not the ratio)."""
    match = re.fullmatch(r"\s*[<>]=?\s*([0-9.]+)\s*", row.get("target") or "")
    return float(match.group(1)) if match else None


def plot_ratios(plt, rows, out_dir):
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(rows) + 1.5))
    labels, ratios, low, high = [], [], [], []
    for row in rows:
        label = f"{row['scenario']} / {row['metric']}"
        if row.get("bytes") and row.get("unit") == "GB/s":
            label += f" ({size_label(row['bytes'])})"
        ratio = row.get("ratio") or 0
        labels.append(f"{label}\nvs {row.get('baseline', '')}")
        ratios.append(ratio)
        low.append(max(0.0, ratio - row.get("ratio_min", ratio)))
        high.append(max(0.0, row.get("ratio_max", ratio) - ratio))
    ys = list(range(len(rows)))
    ax.barh(ys, ratios, xerr=[low, high], capsize=3, color="tab:blue", alpha=0.8)
    for y, row in zip(ys, rows):
        target = target_of(row)
        if target is not None:
            ax.plot([target], [y], marker="|", color="tab:red", markersize=16, mew=2)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(ys)
    ax.set_yticklabels(labels, fontsize="x-small")
    ax.invert_yaxis()
    ax.set_xlabel("ours / baseline (median of rounds; whiskers: min-max; red: target)")
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    path = os.path.join(out_dir, "ratios.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_cdf(plt, rows, out_dir):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    baselines = {}
    for row in rows:
        points = row["percentiles"]
        ax.plot([v for _, v in points], [p / 100 for p, _ in points], label=row["scenario"])
        if row.get("baseline_percentiles"):
            baselines.setdefault(row.get("baseline", "baseline"), row["baseline_percentiles"])
    for name, points in baselines.items():
        ax.plot([v for _, v in points], [p / 100 for p, _ in points], linestyle="--", label=name)
    ax.set_xscale("log")
    ax.set_xlabel(f"latency ({rows[0].get('unit', 'us')})")
    ax.set_ylabel("fraction of copies")
    ax.set_title("latency CDF (all rounds)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    path = os.path.join(out_dir, "latency_cdf.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot(rows, out_dir):
    """Writes the charts for `rows` into `out_dir`; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(out_dir, exist_ok=True)
    written = []
    swept = sweeps(rows)
    for scenario, scenario_rows in sorted(swept.items()):
        written.append(plot_sweep(plt, scenario, scenario_rows, out_dir))
    # Latency rows have their CDF; their ratio to an in-process memcpy is
    # in the thousands and would flatten every other bar.
    others = [
        r
        for r in rows
        if r["scenario"] not in swept and r.get("ratio") and not r.get("percentiles")
        and r.get("unit") != "us"
    ]
    if others:
        written.append(plot_ratios(plt, others, out_dir))
    latency = [r for r in rows if r.get("percentiles")]
    if latency:
        written.append(plot_cdf(plt, latency, out_dir))
    return written


def main(argv):
    parser = argparse.ArgumentParser(
        description="PNG charts of `isometry_bench --json` output.",
        epilog="Charts: throughput_<scenario>.png (size sweeps), ratios.png, latency_cdf.png.",
    )
    parser.add_argument("input", nargs="?", default="-",
                        help="JSON lines from isometry_bench --json (default: standard input)")
    parser.add_argument("-o", "--out-dir", default=".", help="where the PNGs go (default: .)")
    args = parser.parse_args(argv)
    if args.input == "-":
        rows = read_rows(sys.stdin)
    else:
        try:
            with open(args.input, encoding="utf-8") as f:
                rows = read_rows(f)
        except OSError as e:
            print(f"plot.py: {e}", file=sys.stderr)
            return 2
    if not rows:
        print("plot.py: no isometry_bench JSON rows in the input", file=sys.stderr)
        return 1
    try:
        written = plot(rows, args.out_dir)
    except ImportError as e:
        print(f"plot.py: matplotlib is missing ({e}): apt-get install python3-matplotlib",
              file=sys.stderr)
        return 2
    for path in written:
        print(path)
    return 0 if written else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
