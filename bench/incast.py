#!/usr/bin/env python3
"""Incast through one shaped port: N sender "hosts" and one receiver, each a
network namespace with one veth (named rnic0, so the uroce device is
uroce_rnic0 everywhere) into a bridge in a switch namespace. The bridge's
port toward the receiver is shaped by tbf (rate, queue); optionally (--ecn)
a tc program on that port marks ECN CE on ECT packets while a phantom queue
draining at 95 % of the rate holds more than 30 KB (bench/ecn_mark.bpf.c:
the marking DCQCN's switches do, without RED, which this kernel lacks:
../shared/research/congestion.md, section 6), counting what it marks.

Each run moves bulk data from every sender to the receiver at once, for a
fixed time, with one of:
  uroce-udp  perftest's ib_write_bw on uroce, UDP-socket link (UROCE_LINK_XDP=0)
  uroce-xdp  the same on the AF_XDP link (UROCE_LINK_XDP=require)
  tcp        iperf3 (the kernel's TCP, its default congestion control)
  ucx-tcp    UCX's tcp transport (ucx_perftest tag_bw, UCX_TLS=tcp), the
             software transport an RDMA program could pick instead
and reports: aggregate goodput / port rate, per-flow goodput and Jain's
fairness index, bytes the senders put on their veths / bytes the receiver's
veth took, drops and CE marks at the port, and (uroce) the senders' and
receiver's `uroce stat` counters that say why. With --latency it also runs a
small-message ping-pong from one more sender through the same port while the
flows run (uroce: ib_send_lat, which spins on its CQ; tcp:
bench/src/tcp_pingpong, which sleeps in recv) and reports its p50 and p99;
--latency-events runs bench/src/verbs_pingpong instead of ib_send_lat (it
sleeps on its completion channel; ib_send_lat -e stops when the port drops an
ACK, as it would on any NIC).

Usage: incast.py [--senders N] [--rate 1gbit] [--queue 128kb] [--ecn] [--no-offloads]
                 [--seconds S] [--size BYTES] [--latency [--latency-events]] [--json FILE]
                 [--build DIR] TOOL [TOOL ...]
Root only (namespaces); every namespace and process it makes is removed at
the end, also on failure or Ctrl-C.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUBNET = "10.99.0"
RX_HOST = 1  # the receiver is 10.99.0.1; senders 10.99.0.(10 + i)


def sh(argv, check=True):
    r = subprocess.run(argv, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {r.stderr.strip()}")
    return r.stdout


class Topology:
    """The namespaces, veths, bridge and shaping of one run; removed by close()."""

    def __init__(self, senders, rate, queue, ecn, probe, offloads=True):
        self.tag = f"uic{os.getpid() % 100000}"
        self.sw = f"{self.tag}-sw"
        self.rx = f"{self.tag}-rx"
        self.tx = [f"{self.tag}-s{i}" for i in range(senders)]
        # One more sender for the latency probe (its index: senders).
        self.probe = f"{self.tag}-probe" if probe else None
        self.made = []
        self.tmp = None  # the marking program's build directory
        self.mark_prog = None  # its BPF program id
        self.port = f"{self.tag}p0"  # the switch's port toward the receiver
        try:
            self._build(rate, queue, ecn, offloads)
        except BaseException:
            self.close()
            raise

    def _build(self, rate, queue, ecn, offloads):
        ends = [self.rx] + self.tx + ([self.probe] if self.probe else [])
        for ns in [self.sw] + ends:
            sh(["ip", "netns", "add", ns])
            self.made.append(ns)
        sh(["ip", "-n", self.sw, "link", "add", "br0", "type", "bridge"])
        sh(["ip", "-n", self.sw, "link", "set", "br0", "up"])
        for k, ns in enumerate(ends):
            a, b = f"{self.tag}p{k}", f"{self.tag}h{k}"
            sh(["ip", "link", "add", a, "type", "veth", "peer", "name", b])
            sh(["ip", "link", "set", a, "netns", self.sw])
            sh(["ip", "link", "set", b, "netns", ns])
            sh(["ip", "-n", self.sw, "link", "set", a, "master", "br0"])
            sh(["ip", "-n", self.sw, "link", "set", a, "up"])
            sh(["ip", "-n", ns, "link", "set", b, "name", "rnic0"])
            host = RX_HOST if k == 0 else 10 + k
            sh(["ip", "-n", ns, "addr", "add", f"{SUBNET}.{host}/24", "dev", "rnic0"])
            sh(["ip", "-n", ns, "link", "set", "rnic0", "up"])
            sh(["ip", "-n", ns, "link", "set", "lo", "up"])
            # --no-offloads: checksums filled in and GSO datagrams cut at the
            # sender, datagrams kept apart at the receiver. (veth's default
            # offloads carry a UDP GSO send as one skb to the shaped port.)
            if not offloads:
                sh(["ip", "netns", "exec", ns, "ethtool", "-K", "rnic0", "tx", "off", "gro", "off"], check=False)
        # tbf with a small bucket (no hidden burst) and the queue asked for.
        sh(["ip", "netns", "exec", self.sw, "tc", "qdisc", "add", "dev", self.port, "root", "tbf",
            "rate", rate, "burst", "16kb", "limit", queue])
        if ecn:
            self._mark(int(rate_bytes(rate) * 0.95), 30000)
        # Neighbours known before the first packet (the AF_XDP link needs the
        # kernel's neighbour of its peer).
        for ns in ends[1:]:
            sh(["ip", "netns", "exec", ns, "ping", "-c1", "-W1", f"{SUBNET}.{RX_HOST}"], check=False)

    def addr(self, k):
        return f"{SUBNET}.{RX_HOST if k < 0 else 11 + k}"

    def port_stats(self):
        """(sent bytes, sent packets, dropped, overlimits) at the shaped port."""
        out = sh(["ip", "netns", "exec", self.sw, "tc", "-s", "qdisc", "show", "dev", self.port])
        m = re.search(r"Sent (\d+) bytes (\d+) pkt \(dropped (\d+), overlimits (\d+)", out)
        return tuple(int(x) for x in m.groups()) if m else (0, 0, 0, 0)

    def _mark(self, rate_bps, depth):
        """The port marks CE above a phantom queue (bench/ecn_mark.bpf.c,
        built for these numbers); the receiver counts what arrives marked."""
        self.tmp = tempfile.mkdtemp(prefix="uroce-incast-")
        obj = os.path.join(self.tmp, "ecn_mark.bpf.o")
        arch = subprocess.run(["gcc", "-dumpmachine"], capture_output=True, text=True).stdout.strip()
        sh(["clang", "-O2", "-g", "-target", "bpf", f"-I/usr/include/{arch}", f"-DRATE_BPS={rate_bps}",
            f"-DDEPTH_BYTES={depth}", "-c", os.path.join(ROOT, "bench", "ecn_mark.bpf.c"), "-o", obj])
        sh(["ip", "netns", "exec", self.sw, "tc", "qdisc", "add", "dev", self.port, "clsact"])
        sh(["ip", "netns", "exec", self.sw, "tc", "filter", "add", "dev", self.port, "egress", "bpf",
            "direct-action", "obj", obj, "sec", "tc"])
        out = sh(["ip", "netns", "exec", self.sw, "tc", "filter", "show", "dev", self.port, "egress"])
        m = re.search(r" id (\d+) ", out)
        if not m:
            raise RuntimeError(f"tc did not say the marking program's id: {out}")
        self.mark_prog = int(m.group(1))

    def ce_marked(self):
        """Packets the port marked CE (the marking program's count)."""
        return phantom_marked(self.mark_prog) if self.mark_prog else 0

    def dev_bytes(self, ns, what):
        return int(sh(["ip", "netns", "exec", ns, "cat", f"/sys/class/net/rnic0/statistics/{what}"]).strip())

    def close(self):
        for ns in self.made:
            for pid in sh(["ip", "netns", "pids", ns], check=False).split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass
        time.sleep(0.1)
        for ns in self.made:
            sh(["ip", "netns", "del", ns], check=False)
        self.made = []
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None


def bpf(cmd, attr):
    """The bpf(2) system call (x86-64) on a bpf_attr given as bytes."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(attr, 128)
    r = libc.syscall(321, cmd, buf, 128)
    if r < 0:
        raise OSError(ctypes.get_errno(), f"bpf({cmd})")
    return r, buf


def phantom_marked(prog_id):
    """The `marked` count in bench/ecn_mark.bpf.c's map, found from its
    program's id (no bpftool needed)."""
    import ctypes
    import struct
    prog_fd, _ = bpf(13, struct.pack("=I", prog_id))  # BPF_PROG_GET_FD_BY_ID
    try:
        ids = (ctypes.c_uint32 * 1)()
        info = ctypes.create_string_buffer(struct.pack("=52xIQ", 1, ctypes.addressof(ids)), 64)  # bpf_prog_info
        bpf(15, struct.pack("=IIQ", prog_fd, 64, ctypes.addressof(info)))  # BPF_OBJ_GET_INFO_BY_FD
        map_fd, _ = bpf(14, struct.pack("=I", ids[0]))  # BPF_MAP_GET_FD_BY_ID
        try:
            key = ctypes.c_uint32(0)
            val = ctypes.create_string_buffer(40)  # struct phantom
            bpf(1, struct.pack("=IIQQQ", map_fd, 0, ctypes.addressof(key), ctypes.addressof(val), 0))
            return struct.unpack_from("=Q", val.raw, 24)[0]
        finally:
            os.close(map_fd)
    finally:
        os.close(prog_fd)


def rate_bytes(rate):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kmg]?)bit", rate.lower())
    if not m:
        raise SystemExit(f"--rate {rate}: e.g. 1gbit, 500mbit")
    return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)] / 8


def jain(xs):
    return (sum(xs) ** 2) / (len(xs) * sum(x * x for x in xs)) if xs and any(xs) else 0.0


class Run:
    """One tool through one topology."""

    def __init__(self, topo, args, tool):
        self.t, self.a, self.tool = topo, args, tool
        self.procs = []
        lib = os.path.join(args.build, "lib")
        self.env = dict(os.environ, LD_LIBRARY_PATH=lib)
        self.env["UROCE_UROCED"] = os.path.join(args.build, "bin", "uroced")
        if tool == "ucx-tcp":
            # No uroce under UCX: its tcp transport on the namespace's veth.
            self.env = dict(os.environ, UCX_TLS="tcp,self", UCX_NET_DEVICES="rnic0")
            self.env.pop("LD_LIBRARY_PATH", None)
        elif tool == "uroce-udp":
            self.env["UROCE_LINK_XDP"] = "0"
        elif tool == "uroce-xdp":
            # One process per interface has its AF_XDP socket: the senders (one
            # per namespace) all do; of the receiver's servers, the first.
            self.env["UROCE_LINK_XDP"] = "1"

    def spawn(self, ns, argv):
        p = subprocess.Popen(["ip", "netns", "exec", ns] + argv, env=self.env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.procs.append(p)
        return p

    def finish(self, p, timeout):
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
            out += "\n[killed: timeout]"
        return out

    def uroce_stat(self, ns):
        cli = os.path.join(self.a.build, "bin", "uroce")
        r = subprocess.run(["ip", "netns", "exec", ns, cli, "stat", "-j"], env=self.env, capture_output=True, text=True)
        return r.stdout

    def flows(self):
        n = len(self.t.tx)
        secs = self.a.seconds
        servers, clients = [], []
        base = 18515 + (os.getpid() % 1000) * 10
        for i in range(n):
            port = base + i
            if self.tool == "tcp":
                servers.append(self.spawn(self.t.rx, ["iperf3", "-s", "-1", "-p", str(port)]))
            elif self.tool == "ucx-tcp":
                servers.append(self.spawn(self.t.rx, ["timeout", str(secs + 15), "ucx_perftest", "-p", str(port)]))
            else:
                servers.append(self.spawn(self.t.rx, ["ib_write_bw", "-d", "uroce_rnic0", "-x", "1", "-p",
                                                      str(port), "-s", str(self.a.size), "-D", str(secs)] +
                                          self.a.perftest_args))
        time.sleep(0.5)
        for i in range(n):
            port = base + i
            ns = self.t.tx[i]
            if self.tool == "tcp":
                clients.append(self.spawn(ns, ["iperf3", "-c", self.t.addr(-1), "-p", str(port), "-t", str(secs),
                                               "-J"]))
            elif self.tool == "ucx-tcp":
                # No time limit in ucx_perftest: stopped after `secs`, its
                # last once-a-second report says what it moved.
                clients.append(self.spawn(ns, ["timeout", "-s", "INT", str(secs), "ucx_perftest", self.t.addr(-1),
                                               "-p", str(port), "-t", "tag_bw", "-s", str(self.a.size), "-n",
                                               "1000000000"]))
            else:
                clients.append(self.spawn(ns, ["ib_write_bw", "-d", "uroce_rnic0", "-x", "1", "-p", str(port),
                                               "-s", str(self.a.size), "-D", str(secs)] + self.a.perftest_args +
                                          [self.t.addr(-1)]))
        return servers, clients

    def go(self):
        t = self.t
        tx0 = [t.dev_bytes(ns, "tx_bytes") for ns in t.tx]
        rx0 = t.dev_bytes(t.rx, "rx_bytes")
        port0 = t.port_stats()
        ce0 = t.ce_marked()
        lat = None
        servers, clients = self.flows()
        if self.a.latency:
            settle = min(2, self.a.seconds / 3)
            time.sleep(settle)
            # The sleeping probes stop a second before the flows do: what
            # they measure after that is an idle port.
            lat = self.latency(max(1.0, self.a.seconds - settle - 1))
        outs = [self.finish(c, self.a.seconds + 30) for c in clients]
        souts = [self.finish(s, 10) for s in servers]
        stats = {}
        if self.tool.startswith("uroce"):
            # The device totals of the senders and the receiver (uroced keeps
            # them a few seconds after its last client).
            keys = ("req.packets", "req.retransmits", "req.timeouts", "req.seq_naks", "req.naks_reordered", "req.probes",
                    "resp.seq_naks", "resp.duplicates", "cc.delay_cuts", "cc.loss_cuts", "cc.timeouts",
                    "xdp.send_full", "udp.send_errors")
            for ns in t.tx + [t.rx]:
                try:
                    dev = json.loads(self.uroce_stat(ns))
                except ValueError:
                    continue
                for d in dev:
                    for k in keys:
                        stats[k] = stats.get(k, 0) + d["counters"].get(k, 0)
        tx1 = [t.dev_bytes(ns, "tx_bytes") for ns in t.tx]
        rx1 = t.dev_bytes(t.rx, "rx_bytes")
        port1 = t.port_stats()
        res = {"tool": self.tool, "senders": len(t.tx), "rate": self.a.rate, "queue": self.a.queue,
               "ecn": self.a.ecn, "seconds": self.a.seconds}
        per = []
        for o in outs:
            per.append(self.goodput(o))
        res["flows_MBps"] = per
        res["aggregate_MBps"] = sum(x for x in per if x)
        res["port_share"] = res["aggregate_MBps"] * 1e6 / rate_bytes(self.a.rate)
        res["jain"] = jain([x or 0 for x in per])
        sent = sum(b - a for a, b in zip(tx0, tx1))
        got = rx1 - rx0
        res["sent_over_delivered"] = sent / got if got else None
        res["port_drops"] = port1[2] - port0[2]
        res["port_packets"] = port1[1] - port0[1]
        res["port_overlimits"] = port1[3] - port0[3]
        res["ce_marked"] = t.ce_marked() - ce0 if self.a.ecn else None
        if lat:
            res["latency_us"] = lat
            # Which probe: asleep until its reply (tcp_pingpong in recv,
            # verbs_pingpong on its channel) or spinning (ib_send_lat).
            res["latency_probe"] = ("tcp_pingpong" if self.tool == "tcp" else
                                    "verbs_pingpong" if self.a.latency_events else "ib_send_lat")
        if stats:
            res["uroce_stat"] = stats
        res["failed"] = [i for i, x in enumerate(per) if x is None]
        if res["failed"]:
            res["outputs"] = {i: outs[i][-2000:] + "\n--server--\n" + souts[i][-1000:] for i in res["failed"]}
        return res

    def goodput(self, out):
        """MB/s (10^6) from a client's output; None if it printed none."""
        if self.tool == "tcp":
            try:
                j = json.loads(out)
                return j["end"]["sum_received"]["bits_per_second"] / 8e6
            except (ValueError, KeyError):
                return None
        if self.tool == "ucx-tcp":
            # "[thread 0] iterations p50 avg overall bw_avg bw_overall ...", MB = 2^20 bytes.
            last = None
            for line in out.splitlines():
                f = line.split()
                if line.startswith("[thread") and len(f) >= 9:
                    last = float(f[7]) * (1 << 20) / 1e6
            return last
        # perftest: "#bytes #iterations BW_peak BW_average MsgRate", MB = 2^20 bytes.
        for line in out.splitlines():
            f = line.split()
            if len(f) == 5 and all(re.fullmatch(r"\d+(\.\d+)?", x) for x in f):
                return float(f[3]) * (1 << 20) / 1e6
        return None

    def latency(self, seconds):
        """{"p50": us, "p99": us}: a 64-byte ping-pong's half round trip from
        the probe namespace through the loaded port (uroce: ib_send_lat's
        t_typical and 99%, or verbs_pingpong's; tcp: tcp_pingpong), or None
        if it failed."""
        port = str(17515 + os.getpid() % 1000)
        if self.tool == "ucx-tcp":
            print("latency: not measured for ucx-tcp (ucx_perftest reports one percentile per run)",
                  file=sys.stderr)
            return None
        if self.tool == "tcp":
            srv = self.spawn(self.t.rx, [self.a.tcp_pingpong, "-l", port, "-s", "64"])
            time.sleep(0.2)
            cli = self.spawn(self.t.probe, [self.a.tcp_pingpong, "-c", self.t.addr(-1), port, "-s", "64",
                                            "-n", str(self.a.latency_iters), "-t", str(seconds)])
        elif self.a.latency_events:
            # Asleep on the completion channel, as tcp_pingpong waits in recv
            # (bench/src/verbs_pingpong.c: ib_send_lat -e stops when the
            # port drops an ACK).
            vpp = os.path.join(self.a.build, "bin", "verbs_pingpong")
            srv = self.spawn(self.t.rx, [vpp, "-d", "uroce_rnic0", "-g", "1", "-l", port, "-s", "64",
                                         "-n", str(self.a.latency_iters)])
            time.sleep(0.5)
            cli = self.spawn(self.t.probe, [vpp, "-d", "uroce_rnic0", "-g", "1", "-c", self.t.addr(-1), port,
                                            "-s", "64", "-n", str(self.a.latency_iters), "-t", str(seconds)])
        else:
            srv = self.spawn(self.t.rx, ["ib_send_lat", "-d", "uroce_rnic0", "-x", "1", "-p", port, "-s", "64",
                                         "-n", str(self.a.latency_iters)])
            time.sleep(0.5)
            cli = self.spawn(self.t.probe, ["ib_send_lat", "-d", "uroce_rnic0", "-x", "1", "-p", port, "-s",
                                            "64", "-n", str(self.a.latency_iters)] + [self.t.addr(-1)])
        out = self.finish(cli, self.a.seconds + 20)
        self.finish(srv, 5)
        for line in out.splitlines():
            f = line.split()
            # (perftest prints a standard deviation of -nan when one sample
            # dwarfs the rest)
            if not f or not all(re.fullmatch(r"\d+(\.\d+)?|-?nan", x) for x in f):
                continue
            if (self.tool == "tcp" or self.a.latency_events) and len(f) == 4:
                return {"p50": float(f[2]), "p99": float(f[3])}
            if self.tool != "tcp" and not self.a.latency_events and len(f) == 9:
                return {"p50": float(f[4]), "p99": float(f[7])}
        print(f"latency probe failed:\n{out[-1500:]}", file=sys.stderr)
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tools", nargs="+", choices=["uroce-udp", "uroce-xdp", "tcp", "ucx-tcp"])
    ap.add_argument("--senders", type=int, default=1)
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--queue", default="128kb")
    ap.add_argument("--ecn", action="store_true")
    ap.add_argument("--no-offloads", action="store_true")
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--size", type=int, default=65536)
    ap.add_argument("--latency", action="store_true")
    ap.add_argument("--latency-iters", type=int, default=5000)
    ap.add_argument("--latency-events", action="store_true")
    ap.add_argument("--perftest", default="", help="more ib_write_bw arguments, both sides (e.g. -e)")
    ap.add_argument("--json")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    a = ap.parse_args()
    a.perftest_args = a.perftest.split()
    if os.geteuid() != 0:
        print("SKIP: network namespaces need root")
        return 77
    a.tcp_pingpong = None
    if a.latency and "tcp" in a.tools:
        a.tcp_pingpong = os.path.join(a.build, "tcp_pingpong")
        src = os.path.join(ROOT, "bench", "src", "tcp_pingpong.c")
        sh(["gcc", "-O2", "-Wall", "-o", a.tcp_pingpong, src])
    results = []
    for tool in a.tools:
        topo = Topology(a.senders, a.rate, a.queue, a.ecn, a.latency, not a.no_offloads)
        try:
            r = Run(topo, a, tool).go()
        finally:
            topo.close()
        results.append(r)
        flows = " ".join(f"{x:.1f}" if x is not None else "FAIL" for x in r["flows_MBps"])
        print(f"{tool:10} n={r['senders']} aggregate {r['aggregate_MBps']:.1f} MB/s "
              f"({100 * r['port_share']:.0f} % of the port) jain {r['jain']:.3f} "
              f"sent/delivered {r['sent_over_delivered'] or 0:.3f} drops {r['port_drops']}/{r['port_packets']}"
              f"{'' if r['ce_marked'] is None else ' CE ' + str(r['ce_marked'])} flows [{flows}]"
              f"{'' if not r.get('latency_us') else ' latency p50 %.1f p99 %.1f us' % (r['latency_us']['p50'], r['latency_us']['p99'])}",
              flush=True)
        if r.get("uroce_stat"):
            print("           " + " ".join(f"{k}={v}" for k, v in r["uroce_stat"].items() if v))
        for i, o in r.get("outputs", {}).items():
            print(f"--- flow {i} output ---\n{o}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
