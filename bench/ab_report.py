#!/usr/bin/env python3
"""bench/ab.sh's comparison: for each row uroce was measured in (tool,
transport, kind, size; not the size sweeps), the median and [min-max] of the
passes of build A and of build B, B/A, and a verdict: "better" when B's worst
pass beats A's median, "worse" when B's best pass is worse than A's worst,
else "within noise" (B's range reaches A's, or lies between A's median and
its best). Lower is better for latencies (us), higher for everything else.

Usage: ab_report.py DIR   (DIR/A/<i>/raw.tsv, DIR/B/<i>/raw.tsv)
"""
import csv
import glob
import os
import statistics
import sys


def load(side_dir):
    rows = {}
    for path in sorted(glob.glob(os.path.join(side_dir, "*", "raw.tsv"))):
        with open(path) as f:
            for r in csv.DictReader(f, delimiter="\t"):
                if r["sweep"] != "0" or r["value"] in ("", "FAIL"):
                    continue
                if not r["transport"].startswith("uroce"):
                    continue  # the floors and peers: the same for both builds
                key = (r["tool"], r["transport"], r["kind"], r["size"], r["unit"])
                rows.setdefault(key, []).append(float(r["value"]))
    return rows


def verdict(a, b, lower_better):
    amed = statistics.median(a)
    if lower_better:
        if max(b) < amed:
            return "better"
        if min(b) > max(a):
            return "worse"
    else:
        if min(b) > amed:
            return "better"
        if max(b) < min(a):
            return "worse"
    return "within noise"


def main():
    d = sys.argv[1]
    a, b = load(os.path.join(d, "A")), load(os.path.join(d, "B"))
    ver = {}
    for side in ("A", "B"):
        try:
            with open(os.path.join(d, side, "uroce", "VERSION")) as f:
                ver[side] = f.read().strip().replace("\n", "; ")
        except OSError:
            ver[side] = "?"
    print(f"A: {ver['A']}\nB: {ver['B']}\n")
    print("| tool | transport | size | A median [min-max] | B median [min-max] | B/A | verdict |")
    print("|---|---|---|---|---|---|---|")
    counts = {}
    for key in sorted(set(a) & set(b), key=lambda k: (k[1], k[0], int(k[3]) if k[3].isdigit() else 0)):
        tool, transport, kind, size, unit = key
        va, vb = a[key], b[key]
        lower = unit == "us"
        v = verdict(va, vb, lower)
        counts[v] = counts.get(v, 0) + 1
        ma, mb = statistics.median(va), statistics.median(vb)
        ratio = mb / ma if ma else float("nan")
        print(f"| {tool} | {transport} | {size} | {ma:.4g} [{min(va):.4g}-{max(va):.4g}] {unit} "
              f"| {mb:.4g} [{min(vb):.4g}-{max(vb):.4g}] {unit} | {ratio:.3f} | {v} |")
    missing = sorted(set(a) ^ set(b))
    print()
    print("rows: " + ", ".join(f"{n} {v}" for v, n in sorted(counts.items())) +
          (f"; {len(missing)} measured on one side only" if missing else ""))
    for k in missing:
        print(f"  only in {'A' if k in a else 'B'}: {' '.join(k)}")


if __name__ == "__main__":
    main()
