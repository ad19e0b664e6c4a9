#!/usr/bin/env python3
"""Turns bench/harness.py's raw.tsv into the comparison table (stdout and
table.md), the PNG plots and bench/RESULTS.md.

usage: report.py --out DIR [--results bench/RESULTS.md] [--plots bench/plots]
                 [--elapsed SECONDS] [--command "bench/run.sh ..."]

Medians over the passes, with [min-max]. Ratios are uroce / peer and
uroce / limit: for latency lower is better for uroce, for bandwidth and rate
higher is better.
"""
import argparse
import csv
import datetime
import os
import platform
import shutil
import statistics
import subprocess
from collections import OrderedDict, defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SLOW_XCORE_NS = 200  # cross-core round trip above this = the VM's slow vCPU placement
DISTURBED_PCT = 25  # other workloads took more than this % of the machine during a run

UCX_SHM = ("ucp posix,cma", "ucp sysv,cma")
UDP_ACK = "udp busy-poll + ACK (GSO)"  # bench/harness.py: udp_pingpong -a
PEER_COLS = ["UCX shm", "UCX tcp", "libfabric shm", "libfabric tcp", "libfabric udp", "libfabric udp;rxd",
             "qperf tcp", "UDP", "UDP+ACK", "AF_XDP", "AF_XDP+ACK", "AF_PACKET"]


def num(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


def size_label(n):
    n = int(n)
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20} MiB"
    if n >= 1024 and n % 1024 == 0:
        return f"{n >> 10} KiB"
    return f"{n} B"


def fmt(v):
    if v is None:
        return "-"
    a = abs(v)
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    if a >= 0.1:
        return f"{v:.3f}"
    return f"{v:.3g}"


def fmt_ratio(r):
    if r is None:
        return ""
    return f"{r:.2g}×" if r < 10 else f"{r:.0f}×"


def disturbed(row):
    """Other workloads took more than DISTURBED_PCT % of the machine during this run."""
    return (num(row.get("others_during_pct")) or 0) > DISTURBED_PCT


def slow_xcore(row):
    """The cross-core probe just before or after the run saw the VM's slow mode."""
    return any((num(x) or 0) > SLOW_XCORE_NS for x in (row.get("xcore_rtt_ns") or "").split("/"))


def clean(row):
    return not disturbed(row) and not slow_xcore(row)


class Stat:
    """Median [min-max] of one measurement over its runs. When some runs were clean (not
    disturbed by other workloads, cross-core probe in the fast mode), only those count: this
    VM flips between two cross-core latency modes for minutes at a time and shares its two
    cores with other work, and a comparison is only fair within one state. Without any clean
    run every run counts and the cell is marked with a dagger."""

    def __init__(self, rows):
        self.rows = rows
        good = [r for r in rows if num(r["value"]) is not None]
        self.all_vals = [num(r["value"]) for r in good]
        self.clean_vals = [num(r["value"]) for r in good if clean(r)]
        self.fallback = bool(good) and not self.clean_vals
        vals = self.clean_vals or self.all_vals
        self.vals = vals
        self.n = len(rows)
        self.ok = len(good)
        self.med = statistics.median(vals) if vals else None
        self.lo = min(vals) if vals else None
        self.hi = max(vals) if vals else None

    def cell(self, spread=True):
        if self.med is None:
            return "FAIL" if self.n else "-"
        s = fmt(self.med)
        if spread and len(self.vals) > 1:
            s += f" [{fmt(self.lo)}–{fmt(self.hi)}]"
        if self.ok < self.n:
            s += f" ({self.n - self.ok} failed)"
        if self.fallback:
            s += "†"
        return s


class Shifted:
    """A Stat plus a constant (for derived limits)."""

    def __init__(self, st, add):
        self.med, self.lo, self.hi = st.med + add, st.lo + add, st.hi + add


class Data:
    def __init__(self, path):
        with open(path, newline="") as f:
            self.rows = list(csv.DictReader(f, delimiter="\t"))
        self.points = defaultdict(list)  # (tool, transport, kind, size) -> rows, sweep=0
        self.sweeps = defaultdict(list)  # same key, sweep=1
        self.order = []
        for r in self.rows:
            key = (r["tool"], r["transport"], r["kind"], int(r["size"]))
            target = self.sweeps if r["sweep"] == "1" else self.points
            if key not in self.points and key not in self.sweeps:
                self.order.append(key)
            target[key].append(r)

    def stat(self, tool, transport, kind, size, sweep=False):
        return Stat((self.sweeps if sweep else self.points).get((tool, transport, kind, size), []))

    def med(self, *key):
        return self.stat(*key).med

    def curve(self, tool, transport, kind, points_too=True, sweeps_too=True):
        """size -> Stat over every row of this series (points and sweeps merged)."""
        by = defaultdict(list)
        sources = ([self.points] if points_too else []) + ([self.sweeps] if sweeps_too else [])
        for src in sources:
            for (t, tr, k, s), rows in src.items():
                if (t, tr, k) == (tool, transport, kind):
                    by[s] += rows
        out = OrderedDict()
        for s in sorted(by):
            st = Stat(by[s])
            if st.med is not None:
                out[s] = st
        return out


# ------------------------------------------------------------- the table ----
def derived_write_limit(d, size):
    """One process_vm_writev of SIZE + half a shared-memory round trip (2 B): the floor of an
    intra-host RDMA WRITE whose completion the peer must see."""
    a, b = d.med("process_vm_writev", "1 call", "lat", size), d.med("shm_pingpong", "2 procs", "lat", 2)
    return None if a is None or b is None else a + b


def table_rows(d):
    """[(section, label, unit, better, uroce Stat, {col: (Stat, note)}, (limit value, limit name))]"""
    out = []
    for tool, op in (("ib_send_lat", "SEND"), ("ib_write_lat", "WRITE"), ("ib_read_lat", "READ")):
        for s in (2, 64, 4096):
            u = d.stat(tool, "uroce RC", "lat", s)
            peers = {}
            if op == "SEND":
                peers = {"UCX shm": d.stat("tag_lat", "ucp posix,cma", "lat", s),
                         "UCX tcp": d.stat("tag_lat", "ucp tcp", "lat", s),
                         "libfabric shm": d.stat("fi_pingpong", "libfabric shm", "lat", s),
                         "libfabric tcp": d.stat("fi_pingpong", "libfabric tcp", "lat", s),
                         "qperf tcp": d.stat("tcp_lat", "qperf tcp", "lat", s),
                         "UDP": d.stat("udp_pingpong", "udp busy-poll", "lat", s)}
                lim = (d.med("shm_pingpong", "2 procs", "lat", s), "shm ½RTT")
            elif op == "WRITE":
                peers = {"UCX shm": d.stat("ucp_put_lat", "ucp posix,cma", "lat", s)}
                lim = (derived_write_limit(d, s), "pvw+½RTT")
            else:
                peers = {"UCX shm": d.stat("get -O 1", "uct cma zcopy", "lat", s)}
                lim = (d.med("process_vm_readv", "1 call", "lat", s), "1 pvr")
            out.append(("lat", f"{tool} {size_label(s)}", "µs", "lower", u, peers, lim))
    for tool, op in (("ib_write_bw", "WRITE"), ("ib_read_bw", "READ"), ("ib_send_bw", "SEND")):
        for s in (64, 4096, 65536, 1 << 20):
            u = d.stat(tool, "uroce RC", "bw", s)
            if op == "WRITE":
                peers = {"UCX shm": d.stat("put_bw", "uct cma zcopy", "bw", s),
                         "UCX tcp": d.stat("ucp_put_bw", "ucp tcp", "bw", s)}
            elif op == "READ":
                peers = {"UCX shm": d.stat("get", "uct cma zcopy", "bw", s)}
            else:
                peers = {"UCX shm": d.stat("tag_bw", "ucp posix,cma", "bw", s),
                         "UCX tcp": d.stat("tag_bw", "ucp tcp", "bw", s)}
            if s >= 65536:
                peers["qperf tcp"] = d.stat("tcp_bw", "qperf tcp", "bw", s)
            lim = (d.med("memcpy", "1 core", "bw", s), "memcpy")
            out.append(("bw", f"{tool} {size_label(s)}", "GB/s", "higher", u, peers, lim))
    u = d.stat("ib_send_bw", "uroce RC post list", "rate", 2)
    peers = {"UCX shm": d.stat("tag_bw", "ucp posix,cma", "rate", 2),
             "UCX tcp": d.stat("tag_bw", "ucp tcp", "rate", 2)}
    out.append(("rate", "ib_send_bw 2 B, post list", "Mmsg/s", "higher", u, peers, (None, "")))
    out += network_rows(d)
    out += veth_rows(d)
    out += raw_rows(d)
    return out


def raw_rows(d):
    """Raw Ethernet between the veth namespaces (group raw): perftest's raw_ethernet_* on uroce's
    RAW_PACKET QPs beside an AF_PACKET pair (frames the receiver counts) and the raw AF_XDP
    ping-pong (a 60-byte frame, as raw_ethernet_lat -s 64's)."""
    out = []
    t = "uroce raw AF_XDP veth"
    if d.stat("raw_ethernet_bw", t, "rate", 64).n:
        out.append(("rate", "raw_ethernet_bw 64 B, received (raw QP, veth)", "Mmsg/s", "higher",
                    d.stat("raw_ethernet_bw", t, "rate", 64),
                    {"AF_PACKET": d.stat("packet_pair", "AF_PACKET veth", "rate", 64)}, (None, "")))
    if d.stat("raw_ethernet_bw", t, "bw", 1500).n:
        out.append(("bw", "raw_ethernet_bw 1500 B, received (raw QP, veth)", "GB/s", "higher",
                    d.stat("raw_ethernet_bw", t, "bw", 1500),
                    {"AF_PACKET": d.stat("packet_pair", "AF_PACKET veth", "bw", 1500)}, (None, "")))
    if d.stat("raw_ethernet_lat", t, "lat", 64).n:
        x = d.stat("xdp_pingpong", "veth AF_XDP (generic)", "lat", 64)
        out.append(("lat", "raw_ethernet_lat 64 B (raw QP, veth)", "µs", "lower", d.stat("raw_ethernet_lat", t, "lat", 64),
                    {"AF_XDP": x}, (x.med, "AF_XDP ½RTT")))
    for (tool, tr, kind, size), _ in sorted(d.points.items()):
        if tool == "raw_ethernet_fs_rate":
            out.append(("rate", f"raw_ethernet_fs_rate, {size} rules", "rules/s", "higher",
                        d.stat(tool, tr, kind, size), {}, (None, "")))
    return out


def network_rows(d):
    """The network link (UROCE_LINK=udp: RoCE v2 over UDP on 127.0.0.1) beside the socket-based
    peers; the limit column is the raw UDP ping-pong (latency) or qperf TCP (bandwidth)."""
    out = []
    if d.stat("ib_send_lat", "uroce UDP", "lat", 2).n == 0:
        return out
    for tool in ("ib_send_lat", "ib_write_lat", "ib_read_lat"):
        for s in (2, 64, 4096):
            u = d.stat(tool, "uroce UDP", "lat", s)
            peers = {"UCX tcp": d.stat("tag_lat", "ucp tcp", "lat", s),
                     "libfabric tcp": d.stat("fi_pingpong", "libfabric tcp", "lat", s),
                     "libfabric udp": d.stat("fi_pingpong", "libfabric udp", "lat", s),
                     "libfabric udp;rxd": d.stat("fi_pingpong", "libfabric udp;ofi_rxd", "lat", s),
                     "qperf tcp": d.stat("tcp_lat", "qperf tcp", "lat", s),
                     "UDP": d.stat("udp_pingpong", "udp busy-poll", "lat", s),
                     "UDP+ACK": d.stat("udp_pingpong", UDP_ACK, "lat", s)}
            lim = (d.med("udp_pingpong", "udp busy-poll", "lat", s), "UDP ½RTT")
            out.append(("lat", f"{tool} {size_label(s)} (UDP link)", "µs", "lower", u, peers, lim))
    for tool in ("ib_write_bw", "ib_read_bw", "ib_send_bw"):
        for s in (4096, 65536, 1 << 20):
            u = d.stat(tool, "uroce UDP", "bw", s)
            peers = {"UCX tcp": d.stat("ucp_put_bw" if tool != "ib_send_bw" else "tag_bw", "ucp tcp", "bw", s)}
            qt = d.stat("tcp_bw", "qperf tcp", "bw", s)
            if qt.n:
                peers["qperf tcp"] = qt
            out.append(("bw", f"{tool} {size_label(s)} (UDP link)", "GB/s", "higher", u, peers,
                        (qt.med, "qperf tcp")))
    return out


def veth_rows(d):
    """Two network namespaces joined by a veth pair (group veth): uroce's network link under
    perftest, on UDP sockets and on AF_XDP, beside qperf tcp and the raw ping-pongs over the same
    veth; the limit column is the raw ping-pong of the same kind of socket (latency) or qperf
    TCP (bandwidth)."""
    out = []
    for transport, label, lim_tool, lim_tr, lim_name in (
            ("uroce UDP veth", "UDP link, veth", "udp_pingpong", "veth udp busy-poll", "UDP ½RTT"),
            ("uroce AF_XDP veth", "AF_XDP link, veth", "xdp_pingpong", "veth AF_XDP (generic)", "AF_XDP ½RTT")):
        if d.stat("ib_send_lat", transport, "lat", 2).n == 0:
            continue
        for tool in ("ib_send_lat", "ib_write_lat", "ib_read_lat"):
            u = d.stat(tool, transport, "lat", 2)
            peers = {"qperf tcp": d.stat("tcp_lat", "qperf tcp veth", "lat", 2),
                     "UDP": d.stat("udp_pingpong", "veth udp busy-poll", "lat", 2),
                     "UDP+ACK": d.stat("udp_pingpong", "veth udp busy-poll + ACK (GSO)", "lat", 2),
                     "AF_XDP": d.stat("xdp_pingpong", "veth AF_XDP (generic)", "lat", 2),
                     "AF_XDP+ACK": d.stat("xdp_pingpong", "veth AF_XDP (generic) + ACK", "lat", 2),
                     "UCX tcp": d.stat("tag_lat", "ucp tcp veth", "lat", 2),
                     "libfabric tcp": d.stat("fi_pingpong", "libfabric tcp veth", "lat", 2),
                     "libfabric udp": d.stat("fi_pingpong", "libfabric udp veth", "lat", 2),
                     "libfabric udp;rxd": d.stat("fi_pingpong", "libfabric udp;ofi_rxd veth", "lat", 2)}
            out.append(("lat", f"{tool} 2 B ({label})", "µs", "lower", u, peers,
                        (d.med(lim_tool, lim_tr, "lat", 2), lim_name)))
        for tool in ("ib_write_bw", "ib_send_bw"):
            for s in (65536, 1 << 20):
                u = d.stat(tool, transport, "bw", s)
                qt = d.stat("tcp_bw", "qperf tcp veth", "bw", s)
                peers = {"qperf tcp": qt, "UCX tcp": d.stat("tag_bw", "ucp tcp veth", "bw", s)}
                out.append(("bw", f"{tool} {size_label(s)} ({label})", "GB/s", "higher", u, peers,
                            (qt.med, "qperf tcp")))
    return out


def render_table(d, markdown):
    cols = ["metric", "unit", "uroce median [min–max]"] + [f"{c} (uroce/peer)" for c in PEER_COLS] + \
        ["limit (uroce/limit)"]
    lines = []
    rows = []
    for _, label, unit, _, u, peers, (lim, lim_name) in table_rows(d):
        cells = [label, unit, u.cell()]
        for c in PEER_COLS:
            st = peers.get(c)
            if st is None or st.n == 0:
                cells.append("")
                continue
            r = u.med / st.med if (u.med is not None and st.med) else None
            cells.append(f"{st.cell(spread=False)} ({fmt_ratio(r)})" if r else st.cell(spread=False))
        if lim is not None:
            r = u.med / lim if (u.med is not None and lim) else None
            cells.append(f"{fmt(lim)} {lim_name} ({fmt_ratio(r)})" if r else f"{fmt(lim)} {lim_name}")
        else:
            cells.append("")
        rows.append(cells)
    if markdown:
        lines.append("| " + " | ".join(cols) + " |")
        lines.append("|" + "---|" * len(cols))
        for c in rows:
            lines.append("| " + " | ".join(c) + " |")
    else:
        short = ["metric", "unit", "uroce"] + PEER_COLS + ["limit"]
        w = [max(len(short[i]), *(len(r[i]) for r in rows)) for i in range(len(short))]
        lines.append("  ".join(short[i].ljust(w[i]) for i in range(len(short))))
        lines.append("  ".join("-" * w[i] for i in range(len(short))))
        for r in rows:
            lines.append("  ".join(r[i].ljust(w[i]) for i in range(len(short))))
    return "\n".join(lines)


# ------------------------------------------------------------- targets ------
def targets(d):
    """[(target text, uroce value, threshold, 'le'|'ge', basis text, uncertain)]; uncertain: some
    input had no clean run (see Stat)."""
    out = []
    st = d.stat
    send = st("ib_send_lat", "uroce RC", "lat", 2)
    shm = st("shm_pingpong", "2 procs", "lat", 2)

    def mul(k, s):
        return k * s.med if s.med is not None else None

    out.append(("ib_send_lat 2 B ≤ 1.5 × shared-memory half round trip", send, mul(1.5, shm), "le",
                f"shm ping-pong 2 B one-way {fmt(shm.med)} µs", [shm]))

    def best(tool, transports, kind, size, pick):
        c = [(st(tool, t, kind, size), t) for t in transports]
        c = [x for x in c if x[0].med is not None]
        return pick(c, key=lambda x: x[0].med) if c else (Stat([]), "")

    v, t = best("tag_lat", UCX_SHM, "lat", 2, min)
    out.append(("ib_send_lat 2 B ≤ UCX shm tag_lat 2 B", send, v.med, "le",
                f"tag_lat, {t} (the faster of posix/sysv)", [v]))
    v, t = best("ucp_am_lat", UCX_SHM, "lat", 2, min)
    out.append(("ib_send_lat 2 B ≤ UCX shm ucp_am_lat 2 B", send, v.med, "le", f"ucp_am_lat, {t}", [v]))
    v = st("am_lat", "uct posix", "lat", 8)
    out.append(("ib_send_lat 2 B ≤ UCX shm am_lat (UCT)", send, v.med, "le",
                "UCT am_lat over posix shm at 8 B, its smallest size (8-byte AM header)", [v]))
    # Issue 18's intra-host targets.
    out.append(("ib_send_lat 2 B ≤ 3 × shared-memory half round trip", send, mul(3, shm), "le",
                f"shm ping-pong 2 B one-way {fmt(shm.med)} µs", [shm]))
    w64 = st("ib_write_lat", "uroce RC", "lat", 64)
    put = st("ucp_put_lat", "ucp posix,cma", "lat", 64)
    out.append(("ib_write_lat 64 B ≤ UCX shm ucp_put_lat 64 B", w64, put.med, "le",
                "ucp_put_lat 64 B, ucp posix,cma", [put]))
    w = st("ib_write_lat", "uroce RC", "lat", 2)
    pvw = st("process_vm_writev", "1 call", "lat", 2)
    lim = derived_write_limit(d, 2)
    out.append(("ib_write_lat 2 B ≤ 1.5 × (one process_vm_writev + half shm round trip)", w,
                1.5 * lim if lim else None, "le",
                f"pvw 2 B {fmt(pvw.med)} µs + shm one-way {fmt(shm.med)} µs", [pvw, shm]))
    for tool in ("ib_write_bw", "ib_read_bw"):
        for s in (65536, 1 << 20):
            u = st(tool, "uroce RC", "bw", s)
            m = st("memcpy", "1 core", "bw", s)
            out.append((f"{tool} {size_label(s)} ≥ 0.8 × single-core memcpy", u, mul(0.8, m), "ge",
                        f"memcpy {size_label(s)} {fmt(m.med)} GB/s", [m]))
            c = st("put_bw", "uct cma zcopy", "bw", s)
            out.append((f"{tool} {size_label(s)} ≥ UCX cma put bandwidth", u, c.med, "ge",
                        "UCT put_bw, cma zcopy (one process_vm_writev per put)", [c]))
    r = st("ib_send_bw", "uroce RC post list", "rate", 2)
    out.append(("ib_send_bw 2 B rate with post lists ≥ 10 M msg/s", r, 10.0, "ge", "fixed target", []))
    if st("ib_send_lat", "uroce UDP", "lat", 2).n:
        # Issue 4: the network link (UROCE_LINK=udp) beside raw UDP and TCP loopback.
        u = st("ib_send_lat", "uroce UDP", "lat", 2)
        udp = st("udp_pingpong", "udp busy-poll", "lat", 2)
        ack = st("udp_pingpong", UDP_ACK, "lat", 2)
        floor = ""
        if ack.med is not None and udp.med:
            floor = (f"; with an ACK-sized second datagram per send, the least RC moves per direction"
                     f" (udp_pingpong -a): {fmt(ack.med)} µs = {ack.med / udp.med:.2f} ×,"
                     f" uroce = {u.med / ack.med:.2f} × that" if u.med else "")
        out.append(("UDP link: ib_send_lat 2 B ≤ 1.3 × raw UDP half round trip", u, mul(1.3, udp), "le",
                    f"udp_pingpong 2 B one-way {fmt(udp.med)} µs (busy-polling sockets){floor}", [udp]))
        w = st("ib_write_bw", "uroce UDP", "bw", 65536)
        tcp = st("tcp_bw", "qperf tcp", "bw", 65536)
        out.append(("UDP link: ib_write_bw 64 KiB ≥ 0.5 × TCP loopback bandwidth", w, mul(0.5, tcp), "ge",
                    f"qperf tcp_bw 64 KiB {fmt(tcp.med)} GB/s", [tcp]))
    v, t = best("tag_bw", UCX_SHM, "rate", 2, max)
    out.append(("ib_send_bw 2 B rate with post lists ≥ UCX shm tag_bw rate", r, v.med, "ge",
                f"tag_bw 2 B, {t} (the faster of posix/sysv)", [v]))
    if st("ib_send_lat", "uroce AF_XDP veth", "lat", 2).n:
        # Issue 18: the AF_XDP link between two namespaces beside the UDP-socket link there.
        xs = st("ib_send_lat", "uroce AF_XDP veth", "lat", 2)
        us = st("ib_send_lat", "uroce UDP veth", "lat", 2)
        raw = st("xdp_pingpong", "veth AF_XDP (generic)", "lat", 2)
        out.append(("AF_XDP link: ib_send_lat 2 B ≤ 0.7 × the UDP-socket link's (veth)", xs, mul(0.7, us), "le",
                    f"uroce on UDP sockets over the same veth {fmt(us.med)} µs", [us]))
        ack = st("xdp_pingpong", "veth AF_XDP (generic) + ACK", "lat", 2)
        floor = ""
        if ack.med is not None and raw.med:
            floor = (f"; with an ACK-sized second frame per message, the least RC moves per direction"
                     f" (xdp_pingpong -a): {fmt(ack.med)} µs = {ack.med / raw.med:.2f} ×,"
                     f" uroce = {xs.med / ack.med:.2f} × that" if xs.med else "")
        out.append(("AF_XDP link: ib_send_lat 2 B ≤ 1.3 × raw AF_XDP half round trip (veth)", xs, mul(1.3, raw),
                    "le", f"xdp_pingpong 2 B one-way {fmt(raw.med)} µs{floor}", [raw]))
        xw = st("ib_write_bw", "uroce AF_XDP veth", "bw", 65536)
        uw = st("ib_write_bw", "uroce UDP veth", "bw", 65536)
        out.append(("AF_XDP link: ib_write_bw 64 KiB ≥ the UDP-socket link's (veth)", xw, uw.med, "ge",
                    f"uroce on UDP sockets over the same veth {fmt(uw.med)} GB/s", [uw]))
    if st("ib_read_lat", "uroce UDP veth", "lat", 2).n:
        # Issue 18: the UDP-socket link's READ and large messages (between two namespaces).
        rl = st("ib_read_lat", "uroce UDP veth", "lat", 2)
        wl = st("ib_write_lat", "uroce UDP veth", "lat", 2)
        out.append(("UDP link: ib_read_lat 2 B ≤ 1.2 × its ib_write_lat (veth)", rl, mul(1.2, wl), "le",
                    f"uroce ib_write_lat 2 B over the same veth {fmt(wl.med)} µs", [wl]))
        tcp = st("tcp_bw", "qperf tcp veth", "bw", 1 << 20)
        for tool in ("ib_write_bw", "ib_send_bw"):
            out.append((f"UDP link: {tool} 1 MiB ≥ qperf tcp (veth)", st(tool, "uroce UDP veth", "bw", 1 << 20),
                        tcp.med, "ge", f"qperf tcp_bw 1 MiB over the same veth {fmt(tcp.med)} GB/s", [tcp]))
        utcp = st("tag_bw", "ucp tcp veth", "bw", 1 << 20)
        if utcp.n:
            for tool in ("ib_write_bw", "ib_send_bw"):
                out.append((f"UDP link: {tool} 1 MiB ≥ UCX tcp (veth)", st(tool, "uroce UDP veth", "bw", 1 << 20),
                            utcp.med, "ge", f"UCX tcp tag_bw 1 MiB over the same veth {fmt(utcp.med)} GB/s",
                            [utcp]))
    rate = conn_stat(d, CM_UROCE, "conn_rate")
    if rate.n:
        # Issue 16: connection set-up through the CM on one host (cmtime over uroce_lo).
        out.append(("CM: one connection on one host (cmtime -c 1) ≤ 100 µs", conn_stat(d, CM_UROCE, "conn_lat"),
                    100.0, "le", "fixed target", []))
        out.append(("CM: connections at once (cmtime -c 1000) ≥ 10,000 conn/s (10 kconn/s)", rate, 10.0, "ge",
                    "fixed target", []))
    res = []
    for text, u, thr, how, basis, inputs in out:
        # A measurement whose runs differ by more than 1.5x (this VM's two cross-core modes can
        # flip inside a run, unseen by the probes around it) says so next to its number.
        spread = [f"runs {fmt(x.lo)}–{fmt(x.hi)}" for x in inputs if x.lo and x.hi / x.lo > 1.5]
        if spread:
            basis += " (" + "; ".join(spread) + ")"
        if u.lo and u.hi / u.lo > 1.5:
            basis += f" (uroce runs {fmt(u.lo)}–{fmt(u.hi)})"
        res.append((text, u.med, thr, how, basis, u.fallback or any(x.fallback for x in inputs)))
    return res


# ------------------------------------------------ connection set-up ------
CM_UROCE = ("cmtime", "uroce CM")
CM_PEERS = [("cmtime", "kernel rxe (qemu TCG guest)"), ("tcp_connect", "TCP"),
            ("wake_rtt", "2 process wake-ups")]


def conn_stat(d, who, kind):
    """The Stat of a connection row (rate: its size is the connection count)."""
    tool, transport = who
    keys = [k for k in d.points if k[:3] == (tool, transport, kind)]
    return d.stat(*keys[0]) if keys else Stat([])


def conn_table(d):
    """Markdown rows: uroce's CM beside kernel rxe's and TCP connects."""
    if not conn_stat(d, CM_UROCE, "conn_rate").n:
        return []
    head = "| metric | unit | uroce CM median [min–max] | " + " | ".join(
        f"{t} (uroce/peer)" for _, t in CM_PEERS) + " |"
    rows = [head, "|---|---|---|" + "---|" * len(CM_PEERS)]
    for kind, label, unit in (("conn_rate", "connections at once (rate)", "kconn/s"),
                              ("conn_lat", "one connection (latency)", "µs")):
        u = conn_stat(d, CM_UROCE, kind)
        cells = []
        for who in CM_PEERS:
            p = conn_stat(d, who, kind)
            cells.append(f"{p.cell(False)} ({fmt_ratio(u.med / p.med)})" if p.med and u.med else p.cell(False))
        rows.append(f"| {label} | {unit} | {u.cell()} | " + " | ".join(cells) + " |")
    return rows


def target_rows(d):
    rows = []
    for text, u, thr, how, basis, uncertain in targets(d):
        if u is None or thr is None:
            verdict, by = "not measured", ""
        elif (u <= thr) if how == "le" else (u >= thr):
            verdict = "met"
            by = (f"{thr / u:.3g}× under the bound" if how == "le" else f"{u / thr:.3g}× the bound")
        else:
            verdict = "MISSED"
            by = (f"{u / thr:.3g}× over the bound (+{fmt(u - thr)})" if how == "le"
                  else f"at {100 * u / thr:.0f}% of the bound (needs {thr / u:.3g}×)")
        if uncertain and u is not None and thr is not None:
            verdict += "†"
        rows.append((text, fmt(u), ("≤ " if how == "le" else "≥ ") + fmt(thr), verdict, by, basis))
    return rows


# ------------------------------------------------------------- plots --------
def plots(d, outdir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, NullLocator

    xt = [2, 8, 64, 512, 4096, 32768, 1 << 18, 1 << 20, 1 << 23]

    def axes_common(ax, ylabel, title):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.xaxis.set_major_locator(FixedLocator(xt))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticks(xt, [size_label(x).replace(" ", "\u202f") for x in xt])
        ax.set_xlabel("message size (log scale)")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=12, pad=20)
        reps = max(int(x["rep"]) for x in d.rows)
        ax.text(0.5, 1.012, "lines: one size sweep (uroce: perftest -a); large markers: the table's sizes,"
                f" median of {reps} pass(es) with min–max bars; dashed/dotted: physical limits",
                transform=ax.transAxes, ha="center", va="bottom", fontsize=8.5, color="0.3")
        ax.grid(True, which="major", alpha=0.35)
        ax.grid(True, which="minor", axis="y", alpha=0.12)

    def draw(ax, series, **style):
        """A size sweep, if there is one, as the line; the repeated points (the table's
        sizes) as markers with [min-max] bars. Without a sweep the points make the line."""
        curve, label = series
        if not curve:
            return
        if isinstance(curve, tuple):
            sweep, pts = curve
        else:
            sweep, pts = OrderedDict(), curve
        line = OrderedDict(sorted({**pts, **sweep}.items()))  # a sweep's value wins at shared sizes
        xs = list(line)
        color = style.pop("color", None)
        (h,) = ax.plot(xs, [line[s].med for s in xs], label=label, color=color, **style)
        if pts:
            xs = list(pts)
            ys = [pts[s].med for s in xs]
            lo = [pts[s].med - pts[s].lo for s in xs]
            hi = [pts[s].hi - pts[s].med for s in xs]
            ax.errorbar(xs, ys, yerr=[lo, hi], fmt=style.get("marker") or "none", color=h.get_color(),
                        markersize=(style.get("markersize") or 4) + 2, capsize=3,
                        linewidth=0, elinewidth=1.2, zorder=style.get("zorder", 2) + 1)

    def series(tool, transport, kind):
        return (d.curve(tool, transport, kind, points_too=False), d.curve(tool, transport, kind, sweeps_too=False))

    uroce_style = dict(linewidth=2.6, markersize=5, zorder=5)
    peer_style = dict(linewidth=1.3, markersize=4, alpha=0.9)
    limit_style = dict(linewidth=1.4, linestyle="--", color="0.35")
    files = []

    # --- latency ---
    fig, ax = plt.subplots(figsize=(12, 7))
    draw(ax, (series("ib_send_lat", "uroce RC", "lat"), "uroce ib_send_lat (RC SEND)"),
         color="#d62728", marker="o", **uroce_style)
    draw(ax, (series("ib_write_lat", "uroce RC", "lat"), "uroce ib_write_lat (RC WRITE)"),
         color="#ff7f0e", marker="s", **uroce_style)
    draw(ax, (series("ib_read_lat", "uroce RC", "lat"), "uroce ib_read_lat (RC READ, whole round trip)"),
         color="#8c564b", marker="^", **uroce_style)
    draw(ax, (series("tag_lat", "ucp posix,cma", "lat"), "UCX shm tag_lat (posix+cma)"),
         color="#1f77b4", marker="o", **peer_style)
    draw(ax, (series("ucp_put_lat", "ucp posix,cma", "lat"), "UCX shm ucp_put_lat"),
         color="#17becf", marker="s", **peer_style)
    draw(ax, (series("get -O 1", "uct cma zcopy", "lat"), "UCX cma get (UCT, 1 outstanding)"),
         color="#9edae5", marker="^", **peer_style)
    draw(ax, (series("tag_lat", "ucp tcp", "lat"), "UCX tcp tag_lat"),
         color="#2ca02c", marker="o", **peer_style)
    draw(ax, (series("fi_pingpong", "libfabric shm", "lat"), "libfabric shm fi_pingpong"),
         color="#9467bd", marker="D", **peer_style)
    draw(ax, (series("fi_pingpong", "libfabric tcp", "lat"), "libfabric tcp fi_pingpong"),
         color="#c5b0d5", marker="D", **peer_style)
    draw(ax, (series("tcp_lat", "qperf tcp", "lat"), "qperf tcp_lat (blocking)"),
         color="#bcbd22", marker="v", **peer_style)
    draw(ax, (series("udp_pingpong", "udp busy-poll", "lat"), "raw UDP ping-pong (busy-poll)"),
         color="#7f7f7f", marker="x", **peer_style)
    shm = d.curve("shm_pingpong", "2 procs", "lat")
    draw(ax, (shm, "limit: shm ping-pong, half round trip"), **limit_style)
    pvw = d.curve("process_vm_writev", "1 call", "lat")
    half = shm.get(2)
    if half and pvw:
        lim = OrderedDict((s, Shifted(v, half.med)) for s, v in pvw.items())
        draw(ax, (lim, "limit: 1 process_vm_writev + ½ shm RTT"), linewidth=1.4, linestyle=":", color="black")
    axes_common(ax, "latency, µs (log scale; one-way, READ: whole op)",
                "Latency vs message size — uroce (perftest) vs peers and limits")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=9, frameon=False)
    fig.tight_layout()
    p = os.path.join(outdir, "latency.png")
    fig.savefig(p, dpi=110)
    plt.close(fig)
    files.append(p)

    # --- bandwidth ---
    fig, ax = plt.subplots(figsize=(12, 7))
    draw(ax, (series("ib_write_bw", "uroce RC", "bw"), "uroce ib_write_bw"),
         color="#d62728", marker="o", **uroce_style)
    draw(ax, (series("ib_read_bw", "uroce RC", "bw"), "uroce ib_read_bw"),
         color="#8c564b", marker="^", **uroce_style)
    draw(ax, (series("ib_send_bw", "uroce RC", "bw"), "uroce ib_send_bw"),
         color="#ff7f0e", marker="s", **uroce_style)
    draw(ax, (series("put_bw", "uct cma zcopy", "bw"), "UCX cma put_bw (UCT zcopy)"),
         color="#1f77b4", marker="o", **peer_style)
    draw(ax, (series("get", "uct cma zcopy", "bw"), "UCX cma get (UCT zcopy)"),
         color="#aec7e8", marker="^", **peer_style)
    draw(ax, (series("tag_bw", "ucp posix,cma", "bw"), "UCX shm tag_bw (posix+cma)"),
         color="#17becf", marker="s", **peer_style)
    draw(ax, (series("tag_bw", "ucp tcp", "bw"), "UCX tcp tag_bw"),
         color="#2ca02c", marker="o", **peer_style)
    draw(ax, (series("tcp_bw", "qperf tcp", "bw"), "qperf tcp_bw"),
         color="#bcbd22", marker="v", **peer_style)
    draw(ax, (series("memcpy", "1 core", "bw"), "limit: single-core memcpy"), **limit_style)
    draw(ax, (series("process_vm_writev", "1 call", "bw"), "limit: one process_vm_writev per message"),
         linewidth=1.4, linestyle=":", color="black")
    axes_common(ax, "bandwidth, GB/s (1e9 B/s, log scale)",
                "Bandwidth vs message size — uroce (perftest) vs peers and limits")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=9, frameon=False)
    fig.tight_layout()
    p = os.path.join(outdir, "bandwidth.png")
    fig.savefig(p, dpi=110)
    plt.close(fig)
    files.append(p)
    return files


# ------------------------------------------------------------- RESULTS.md ---
def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=10).stdout.strip()
    except (subprocess.TimeoutExpired, OSError):
        return ""


def machine_facts():
    cpu = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = ""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1048576:.0f} GiB"
    idle = sh("cat /sys/devices/system/cpu/cpuidle/current_driver") or "?"
    os_name = sh(". /etc/os-release && echo $PRETTY_NAME")
    return [("nproc", sh("nproc")), ("CPU", cpu), ("memory", mem), ("kernel", platform.release()),
            ("OS", os_name), ("cpuidle driver", idle)]


def versions():
    out = []
    for pkg in ("perftest", "ucx-utils", "libucx0", "libfabric-bin", "libfabric1", "qperf", "gcc-12",
                "python3-matplotlib"):
        v = sh(f"dpkg-query -W -f '${{Version}}' {pkg} 2>/dev/null")
        out.append((pkg, v or "not installed"))
    return out


WHY_BEGIN = "<!-- why:begin (kept across runs: report.py copies this section from the previous RESULTS.md) -->"
WHY_END = "<!-- why:end -->"
WHY_DEFAULT = """TODO (lead engineer): for every MISSED target above, what the profile shows
(perf / callgrind of post_send + poll_cq, syscalls per operation, where the
time goes). Nothing here is filled in by the harness."""


def old_why(path):
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return WHY_DEFAULT
    i, j = text.find(WHY_BEGIN), text.find(WHY_END)
    if i < 0 or j < 0:
        return WHY_DEFAULT
    return text[i + len(WHY_BEGIN):j].strip("\n") or WHY_DEFAULT


def detail_rows(d):
    rows = []
    for key in d.order:
        tool, transport, kind, size = key
        for sweep in (False, True):
            st = d.stat(tool, transport, kind, size, sweep)
            if st.n == 0:
                continue
            rs = st.rows
            others = [num(r.get("others_during_pct")) for r in rs if num(r.get("others_during_pct")) is not None]
            avg = [num(r["value_avg"]) for r in rs if num(r["value_avg"]) is not None]
            all_med = fmt(statistics.median(st.all_vals)) if st.all_vals else "-"
            rows.append((rs[0]["group"], tool, transport, kind, size_label(size), rs[0]["unit"],
                         "sweep" if sweep else "point", f"{st.ok}/{st.n}", f"{len(st.clean_vals)}/{st.n}",
                         st.cell(), all_med, fmt(statistics.median(avg)) if avg else "",
                         fmt(max(others)) if others else "", f"{sum(1 for r in rs if slow_xcore(r))}/{st.n}"))
    return rows


def commands(d):
    """First command of every distinct run (per group/tool/transport), ports as run."""
    seen, out = set(), []
    for r in d.rows:
        if r["rep"] != "1":
            continue
        key = r["log"]
        if key in seen:
            continue
        seen.add(key)
        out.append((r["group"], r["tool"], r["transport"], r["command"]))
    return out


def write_results(d, args, tgt, table_md, plot_rel):
    facts = machine_facts()
    runs = {r["log"]: r for r in d.rows}
    slow = sum(1 for r in runs.values() if slow_xcore(r))
    others = [num(r.get("others_during_pct")) for r in runs.values() if num(r.get("others_during_pct")) is not None]
    n_dist = sum(1 for r in runs.values() if disturbed(r))
    reps = max(int(r["rep"]) for r in d.rows)
    version = []
    try:
        with open(os.path.join(args.out, "uroce", "VERSION")) as f:
            version = [line.strip() for line in f if line.strip()]
    except OSError:
        pass
    # Measured from the snapshot of uroce (run start) to the last row of raw.tsv.
    t0 = os.path.getmtime(os.path.join(args.out, "uroce", "VERSION")) \
        if os.path.exists(os.path.join(args.out, "uroce", "VERSION")) else None
    t1 = os.path.getmtime(os.path.join(args.out, "raw.tsv"))
    stamp = lambda t, f: datetime.datetime.fromtimestamp(t).astimezone().strftime(f)
    when = (f"{stamp(t0, '%Y-%m-%d %H:%M')}–{stamp(t1, '%H:%M %Z')}" if t0 else stamp(t1, "%Y-%m-%d %H:%M %Z"))
    when += f" (run directory bench/out/{os.path.basename(os.path.abspath(args.out))}, not committed)"
    L = []
    L.append("# uroce benchmark results")
    L.append("")
    L.append("Generated by `bench/run.sh` (do not edit by hand, except the \"Why\" section,"
             " which is kept across runs). Re-run: `bench/run.sh` (about 10 min with the default 3 passes),"
             " `bench/run.sh --quick` for a smoke run.")
    L.append("")
    L.append(f"- **Measured:** {when}")
    L.append(f"- **Command:** `{args.command}`; {reps} pass(es); wall time {args.elapsed / 60:.1f} min")
    head = next((v[len("commit: "):] for v in version if v.startswith("commit: ")), "?")
    dirty = [v for v in version if v.startswith("uncommitted: ")]
    sha = next((v.split(": ", 1)[1] for v in version if "sha256" in v), "?")
    L.append(f"- **uroce measured:** commit {head}" +
             (f", plus uncommitted changes in {len(dirty)} file(s) of src/include" if dirty else "") +
             f" (built into build/ and copied to the run's directory; libibverbs.so.1 sha256 {sha[:16]}…)")
    L.append("- **Machine:** " + "; ".join(f"{k} {v}" for k, v in facts))
    n_clean = sum(1 for r in runs.values() if clean(r))
    L.append(f"- **Conditions:** this 2-core VM is shared with other work, and its cross-core latency"
             f" flips between two modes (cache-line round trip ~50 ns, or > {SLOW_XCORE_NS} ns for minutes"
             " at a time). Before each run the harness waits (bounded) for a quiet machine; around each run"
             " it records the CPU share other workloads took *during* the run (machine busy time minus our"
             " processes') and probes the cross-core round trip just before and after."
             f" {n_dist} of {len(runs)} runs were disturbed (others > {DISTURBED_PCT} % of the machine;"
             f" median {fmt(statistics.median(others)) if others else '?'} %), {slow} saw the slow mode;"
             f" {n_clean} runs were clean. Every median below uses only the clean runs of its"
             " measurement when there is at least one, else all its runs and the cell is marked †"
             " (the \"Every measurement\" table has both).")
    L.append("")
    L.append("## Targets (issue 3: shared-memory link; issue 4: UDP link; issue 16: the CM; issue 18: AF_XDP link,"
             " the UDP link between namespaces)")
    L.append("")
    L.append("Ratios from this one run (a benchmark, not a test). † on a verdict: uroce's value or the"
             " bound came from a measurement without any clean run (see Conditions), so the verdict is"
             " less certain; re-run when the machine is quiet.")
    L.append("")
    L.append("| target | uroce | bound | verdict | by how much | bound from |")
    L.append("|---|---|---|---|---|---|")
    for t in tgt:
        L.append("| " + " | ".join(t) + " |")
    L.append("")
    L.append("## Why (profile)")
    L.append("")
    L.append(WHY_BEGIN)
    L.append(old_why(args.results))
    L.append(WHY_END)
    L.append("")
    L.append("## uroce beside the peers and the limits")
    L.append("")
    L.append("Median over the passes, uroce with [min–max]; each peer cell is the peer's median and,"
             " in parentheses, uroce / peer; the last column is the physical limit and uroce / limit."
             " For latency a ratio above 1 means uroce is slower; for bandwidth and rate a ratio below"
             " 1 means uroce is slower.")
    L.append("")
    L.append(table_md)
    L.append("")
    L.append("What each column is, per row kind:")
    L.append("")
    L.append("- **SEND latency**: UCX shm = `ucx_perftest -t tag_lat` with `UCX_TLS=posix,cma`;"
             " UCX tcp = the same with `UCX_TLS=tcp`; libfabric = `fi_pingpong` (shm provider, rdm"
             " endpoint; tcp provider, msg endpoint; udp provider, dgram endpoint, unreliable;"
             " udp;rxd = libfabric's reliable RDM layer `ofi_rxd` over udp); qperf = `tcp_lat`"
             " (blocking sockets); UDP = `bench/src/udp_pingpong.c` (busy-polling non-blocking"
             " sockets); UDP+ACK = the same with an ACK-sized second datagram in each send"
             " (`udp_pingpong -a`, one UDP GSO send: what RC moves per direction at least);"
             " limit = `bench/src/shm_pingpong.c`, one-way = half the round trip of a cache-line"
             " mailbox between two processes.")
    L.append("- **WRITE latency**: UCX shm = `ucp_put_lat` (posix: a store into the mapped peer"
             " buffer); limit = one `process_vm_writev` of that size + the shm one-way time of 2 B.")
    L.append("- **READ latency** (perftest reports the whole read, a round trip): UCX shm = UCT `get`"
             " over cma zcopy with one outstanding operation; limit = one `process_vm_readv`.")
    L.append("- **WRITE / READ bandwidth**: UCX shm = UCT `put_bw` / `get` over cma zcopy (one"
             " `process_vm_writev`/`readv` per operation); UCX tcp = `ucp_put_bw` over tcp; qperf ="
             " `tcp_bw`; limit = single-core memcpy of that size (`bench/src/memcpy_bw.c`).")
    L.append("- **SEND bandwidth / rate**: UCX = `tag_bw` (posix,cma / tcp).")
    L.append("- **(veth) rows**: server and client in two network namespaces joined by a veth pair"
             " (`bench/harness.py` group veth, root only), uroce on device `uroce_rnic0` with its own"
             " uroced per namespace; qperf = `tcp_lat` / `tcp_bw` across the veth; UCX tcp ="
             " `ucx_perftest` `tag_lat` / `tag_bw` with `UCX_TLS=tcp` on rnic0; libfabric = `fi_pingpong`"
             " (tcp MSG, udp datagrams, udp;ofi_rxd RDM) across the veth; UDP ="
             " `udp_pingpong -H` across the veth; AF_XDP = `bench/xdp_pingpong`: uroce's XDP program"
             " (generic mode) and AF_XDP sockets, both ends spinning on their rings, whole frames with"
             " nothing computed (the floor of an AF_XDP link); UDP+ACK and AF_XDP+ACK = the same with an"
             " ACK-sized second datagram or frame per message in the same send (`-a`), each side answering"
             " once it has both: what perftest's latency tools (tx depth 1: every send signaled, its ACK"
             " awaited) move over RC per direction at least.")
    L.append("")
    L.append("Latency is the median (perftest `t_typical`, UCX 50th percentile, our programs' median"
             " batch) except libfabric `fi_pingpong` and qperf, which only report a mean. uroce's"
             " perftest means are in the raw data (`value_avg`). Bandwidth is payload bytes per second"
             " (1e9 B/s; perftest's MsgRate × size, UCX's MiB/s converted).")
    L.append("")
    cm = conn_table(d)
    if cm:
        L.append("## Connection set-up (issue 16)")
        L.append("")
        L.append("rdmacm-utils' `cmtime`: `-c 1000` connects 1000 ids at once (the rate is 1 / its"
                 " \"connect\" µs per connection), `-c 1` one alone (its \"connect\" total). uroce CM ="
                 " server and client on `uroce_lo` (127.0.0.1), each pinned to a vCPU; kernel rxe ="
                 " both in the qemu guest of ../shared/interop/rxe-qemu over rxe0 (`bench/rxe_cmtime.sh`;"
                 " the guest runs under TCG, every instruction emulated, so its numbers are the kernel's"
                 " path on a much slower CPU); TCP = `bench/src/tcp_connect.c`, 1000 non-blocking"
                 " connects at once and one alone, on 127.0.0.1; 2 process wake-ups ="
                 " `bench/src/wake_rtt.c`, the median round trip of one byte to a process asleep on the"
                 " other vCPU and back, after 1 ms idle: the least any connection between two processes"
                 " exchanges (a request and its answer), as one connection alone finds the machine.")
        L.append("")
        L += cm
        L.append("")
    L.append("## Plots")
    L.append("")
    for p in plot_rel:
        L.append(f"![{os.path.basename(p)}]({p})")
        L.append("")
    L.append("uroce's curves come from `perftest -a` (2 B – 8 MiB) in the first pass; the points at the"
             " table's sizes are medians of every pass, with [min–max] bars.")
    L.append("")
    L.append("## Every measurement")
    L.append("")
    L.append("| group | tool | transport | kind | size | unit | series | ok/runs | clean/runs |"
             " median [min–max] (clean runs if any) | median of all runs | mean (tool's own) |"
             " max others % | slow xcore |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in detail_rows(d):
        L.append("| " + " | ".join(r) + " |")
    L.append("")
    L.append("## Exact commands (first pass)")
    L.append("")
    L.append("Server on CPU {0}, client on CPU {1} (`taskset`). `$OUT` is the run's directory"
             " `bench/out/<timestamp>`: `$OUT/bin` holds the compiled `bench/src/*.c`, `$OUT/uroce` the"
             " copy of uroce's `lib/libibverbs.so.1` and `bin/uroced`. The harness started that `uroced`"
             " itself (`UROCE_DAEMON_NAME=<name> $OUT/uroce/bin/uroced`) and stopped it at the end.".format(*args.cpus))
    L.append("")
    L.append("```")
    for g, tool, tr, cmd in commands(d):
        L.append(cmd)
    L.append("```")
    L.append("")
    L.append("## Versions")
    L.append("")
    L.append(", ".join(f"{p} {v}" for p, v in versions()) + ". Debian 12 ships no fabtests package"
             " (`apt-cache search fabtests` finds nothing), so libfabric is measured with `fi_pingpong`"
             " (libfabric-bin), latency only.")
    L.append("")
    with open(args.results, "w") as f:
        f.write("\n".join(L))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--results", default=os.path.join(ROOT, "bench", "RESULTS.md"))
    ap.add_argument("--plots", default=os.path.join(ROOT, "bench", "plots"))
    ap.add_argument("--no-results", action="store_true", help="only the table and the run's own plots")
    ap.add_argument("--elapsed", type=float, default=0)
    ap.add_argument("--command", default="bench/run.sh")
    ap.add_argument("--cpus", default="0,1")
    args = ap.parse_args()
    args.cpus = args.cpus.split(",")
    d = Data(os.path.join(args.out, "raw.tsv"))
    text_table = render_table(d, markdown=False)
    md_table = render_table(d, markdown=True)
    tgt = target_rows(d)
    print(text_table)
    print()
    w = max(len(t[0]) for t in tgt)
    for t in tgt:
        print(f"{t[0].ljust(w)}  uroce {t[1]:>8}  bound {t[2]:>9}  {t[3]:<12} {t[4]}")
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(md_table + "\n\n| target | uroce | bound | verdict | by how much | bound from |\n|---|---|---|---|---|---|\n")
        for t in tgt:
            f.write("| " + " | ".join(t) + " |\n")
    try:
        files = plots(d, args.out)
    except ValueError as e:  # e.g. only group raw: nothing for the log-scale size plots
        print(f"plots skipped: {e}")
        files = []
    print()
    for p in files:
        print(f"plot: {p}")
    if args.no_results:
        return
    os.makedirs(args.plots, exist_ok=True)
    rel = []
    for p in files:
        dst = os.path.join(args.plots, os.path.basename(p))
        shutil.copyfile(p, dst)
        rel.append(os.path.relpath(dst, os.path.dirname(os.path.abspath(args.results))))
    write_results(d, args, tgt, md_table, rel)
    print(f"wrote {args.results} and {args.plots}/")


if __name__ == "__main__":
    main()
