#!/usr/bin/env python3
"""Predicted time of every schedule of a workload over a sweep of one size.

    PYTHONPATH=build/python python3 python/examples/sizes.py adam --topology dgx-h100

Prints a table (schedules x sizes, predicted microseconds); with matplotlib
installed it also plots the same numbers, log-log, to --out (default
sizes.png). Each size is one `coconet.predict(workload, sets={size: value})`,
the same prediction as `coconet predict WORKLOAD --set SIZE=VALUE`.
"""
import argparse
import sys

import coconet


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workload", nargs="?", default="adam", help="workload name or YAML file (default adam)")
    p.add_argument("--topology", "-t", default="dgx-h100", help="topology name or YAML file (default dgx-h100)")
    p.add_argument("--nodes", "-N", type=int, help="nodes (default: the topology's)")
    p.add_argument("--size", help="the size to sweep (default: the workload's only, or its first)")
    p.add_argument("--values", help="comma-separated values, e.g. 1M,4M,16M (default: the workload's "
                   "default / 8 to x 2, doubling)")
    p.add_argument("--out", "-o", default="sizes.png", help="the plot, when matplotlib is installed")
    return p.parse_args()


def sweep(workload, size, values, topology, nodes):
    """The size of each point, and {schedule: [predicted time_us at each]}."""
    xs, times = [], {}
    for v in values:
        point = coconet.predict(workload, topology=topology, nodes=nodes, sets={size: v})[0]
        xs.append(point["sizes"][size])
        for row in point["rows"]:
            times.setdefault(row["schedule"], []).append(row["time_us"])
    return xs, times


def print_table(xs, times, size):
    width = max(len(s) for s in times)
    print(f"{'schedule':<{width}}  " + "  ".join(f"{f'{size}={x}':>14}" for x in xs))
    for schedule, ts in sorted(times.items(), key=lambda kv: kv[1][-1]):
        print(f"{schedule:<{width}}  " + "  ".join(f"{t:>14.1f}" for t in ts))


def plot(times, xs, size, title, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for schedule, ts in sorted(times.items()):
        ax.plot(xs, ts, marker="o", label=schedule)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(size)
    ax.set_ylabel("predicted time (us)")
    ax.set_title(title)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(out)
    print(f"wrote {out}", file=sys.stderr)


def main():
    a = parse_args()
    try:  # coconet's message for a bad workload, size, value or topology
        w = coconet.load_workload(a.workload)
        size = a.size or next(iter(w["sizes"]), None)
        if size is None:
            sys.exit(f"sizes.py: workload {w['workload']} has no sizes to sweep")
        if size not in w["sizes"]:
            sys.exit(f"sizes.py: workload {w['workload']} has no size {size}; its sizes: {', '.join(w['sizes'])}")
        if a.values:
            values = [v.strip() for v in a.values.split(",")]
        else:
            values = sorted({max(1, w["sizes"][size] * 2**k // 8) for k in range(5)})
        xs, times = sweep(a.workload, size, values, a.topology, a.nodes)
    except ValueError as e:
        sys.exit(f"sizes.py: {e}")
    title = f"{w['workload']} on {a.topology}: predicted time per schedule"
    print(f"# {title}")
    print_table(xs, times, size)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("(matplotlib is not installed: no plot)", file=sys.stderr)
        return
    plot(times, xs, size, title, a.out)


if __name__ == "__main__":
    main()
