#!/usr/bin/env python3
"""Plots of bench/incast.py's results: goodput against the number of senders
(aggregate / port rate per tool, with and without CE marking), and the small
ping-pong's latency through the loaded port (p50 and p99 per tool).

Usage: /usr/bin/python3 bench/plot_incast.py -o DIR RESULT.json...
  Each RESULT.json is what `incast.py --json` wrote (a list of runs); runs
  of one tool, sender count and marking setting from several files are
  averaged, and those that failed are left out (so are runs with the
  latency probe from the goodput plot). Writes DIR/incast_goodput.png
  and, if any run measured latency, DIR/incast_latency.png. Needs
  python3-matplotlib (bench/setup.sh).
"""
import argparse
import json
import os
import sys
from collections import defaultdict

LABELS = {"uroce-udp": "uroce (UDP sockets)", "uroce-xdp": "uroce (AF_XDP)", "tcp": "TCP (iperf3)",
          "ucx-tcp": "UCX tcp"}


def load(paths):
    runs = []
    for p in paths:
        with open(p) as f:
            runs += [r for r in json.load(f) if not r.get("failed")]
    return runs


def goodput(runs, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = defaultdict(lambda: defaultdict(list))  # (tool, ecn) -> senders -> [share]
    for r in runs:
        if "latency_us" in r:  # the probe's own traffic and CPU: not a goodput run
            continue
        series[(r["tool"], bool(r.get("ecn")))][r["senders"]].append(r["port_share"])
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for (tool, ecn), by_n in sorted(series.items()):
        ns = sorted(by_n)
        ys = [100 * sum(by_n[n]) / len(by_n[n]) for n in ns]
        ax.plot(ns, ys, marker="o", linestyle="--" if ecn else "-",
                label=LABELS.get(tool, tool) + (", CE marking" if ecn else ""))
    ax.axhline(90, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xticks(sorted({r["senders"] for r in runs}))
    ax.set_xlabel("senders into one port")
    ax.set_ylabel("aggregate goodput (% of the port)")
    ax.set_ylim(0, 105)
    rate = runs[0].get("rate", "") if runs else ""
    ax.set_title(f"Incast through one shaped port ({rate}, {runs[0].get('queue', '') if runs else ''} queue)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(out, "incast_goodput.png")
    fig.savefig(path, dpi=110)
    print(path)


def latency(runs, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lat = [r for r in runs if r.get("latency_us")]
    if not lat:
        return
    fig, ax = plt.subplots(figsize=(7, 4.2))
    how = {"ib_send_lat": "spinning", "verbs_pingpong": "sleeping", "tcp_pingpong": "sleeping"}
    names = [f"{LABELS.get(r['tool'], r['tool'])}\n"
             f"{how.get(r.get('latency_probe'), '?')} probe\n{r['senders']} flows, {100 * r['port_share']:.0f} %"
             for r in lat]
    xs = range(len(lat))
    ax.bar([x - 0.2 for x in xs], [r["latency_us"]["p50"] for r in lat], width=0.4, label="p50")
    ax.bar([x + 0.2 for x in xs], [r["latency_us"]["p99"] for r in lat], width=0.4, label="p99")
    ax.set_yscale("log")
    ax.set_xticks(list(xs))
    ax.set_xticklabels(names, fontsize=8)
    ax.set_ylabel("64-byte ping-pong, half round trip (µs)")
    ax.set_title("Latency through the loaded port")
    ax.legend()
    fig.tight_layout()
    path = os.path.join(out, "incast_latency.png")
    fig.savefig(path, dpi=110)
    print(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", required=True, help="output directory")
    ap.add_argument("results", nargs="+")
    a = ap.parse_args()
    runs = load(a.results)
    if not runs:
        print("no runs that succeeded", file=sys.stderr)
        return 1
    os.makedirs(a.o, exist_ok=True)
    goodput(runs, a.o)
    latency(runs, a.o)
    return 0


if __name__ == "__main__":
    sys.exit(main())
