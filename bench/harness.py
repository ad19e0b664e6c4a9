#!/usr/bin/env python3
"""Runs every measurement of bench/run.sh and appends one TSV row per number.

uroce is measured with the unmodified Debian perftest binaries on device
uroce_lo; beside it run the peers a user would pick instead (UCX ucx_perftest
over shared memory and tcp, libfabric fi_pingpong over shm and tcp, qperf over
tcp, a raw UDP ping-pong) and the physical limits (bench/src/*.c). Each pass
runs everything once; passes are repeated (-r) so that the repetitions of one
measurement are minutes apart, and the report takes medians.

Every process is started in its own session, pinned with taskset (server on
--srv-cpu, client on --cli-cpu), bounded by a timeout, and its process group
is killed when the run ends. All traffic is on 127.0.0.1, shared memory, or (group
veth, root only) a veth pair between two network namespaces the harness makes and removes.

Usage: harness.py --out DIR --bin DIR [--uroce DIR] [-r N] [--quick] [--groups a,b] [--no-sweeps]
Conventions of the rows: lat = one-way latency in us (round trip / 2) except
ib_read_lat and UCT get latency, which time a whole read (a round trip by
nature); bw = GB/s (1e9 B/s, payload); rate = million messages/s.
"""
import argparse
import os
import shutil
import re
import resource
import shlex
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LAT_POINTS = [2, 64, 4096]
BW_POINTS = [64, 4096, 65536, 1 << 20]
RATE_SIZE = 2
# Extra sizes some peers run only for the plots (uroce's perftest -a covers 2 B .. 8 MiB).
LAT_SWEEP = [8, 512, 32768, 65536, 262144, 1 << 20]
BW_SWEEP = [512, 32768, 262144, 4 << 20]

COLUMNS = ["rep", "run", "group", "tool", "transport", "kind", "size", "value", "unit", "value_avg",
           "sweep", "extra", "rc", "secs", "bg_busy_pct", "others_during_pct", "xcore_rtt_ns", "log", "command"]


SLOW_XCORE_NS = 200  # cross-core cache-line round trip above this: the VM's slow mode


def num(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


def say(msg):
    print(time.strftime("[%H:%M:%S] ") + msg, file=sys.stderr, flush=True)


def size_label(n):
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20}MiB"
    if n >= 1024 and n % 1024 == 0:
        return f"{n >> 10}KiB"
    return f"{n}B"


# ------------------------------------------------------------------ machine --
def cpu_times():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return sum(v), v[3] + v[4]


def busy_pct(secs):
    t1, i1 = cpu_times()
    time.sleep(secs)
    t2, i2 = cpu_times()
    tot = t2 - t1
    return 0 if tot <= 0 else round(100 * (tot - (i2 - i1)) / tot)


def ports_in_use():
    used = set()
    for name in ("tcp", "tcp6", "udp", "udp6"):
        try:
            with open(f"/proc/net/{name}") as f:
                next(f)
                for line in f:
                    used.add(int(line.split()[1].rsplit(":", 1)[1], 16))
        except OSError:
            pass
    return used


def port_bound(port, proto, pid=None):
    """True once something listens on TCP `port` (or has UDP `port` bound), in the network
    namespace of process `pid` (default: ours)."""
    names = ("tcp", "tcp6") if proto == "tcp" else ("udp", "udp6")
    where = f"/proc/{pid}/net" if pid else "/proc/net"
    for name in names:
        try:
            with open(f"{where}/{name}") as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if int(fields[1].rsplit(":", 1)[1], 16) != port:
                        continue
                    if proto == "udp" or fields[3] == "0A":  # 0A = LISTEN
                        return True
        except OSError:
            pass
    return False


# ------------------------------------------------------------------ runner ---
class Bench:
    def __init__(self, a):
        self.a = a
        self.out = a.out
        self.bin = a.bin
        self.logs = os.path.join(a.out, "logs")
        os.makedirs(self.logs, exist_ok=True)
        self.tsv_path = os.path.join(a.out, "raw.tsv")
        new = not os.path.exists(self.tsv_path)
        self.tsv = open(self.tsv_path, "a")
        if new:
            self.tsv.write("\t".join(COLUMNS) + "\n")
        self.run_no = 0
        self.rep = 0
        self.port = a.port_base
        self.live = []  # Popen objects whose process group we must end
        self.quiet_spent = 0.0
        self.daemon = None
        self.daemon_name = f"bench-{os.getpid()}"
        self.lib = os.path.join(a.uroce, "lib")
        self.uroce_env = {"LD_LIBRARY_PATH": self.lib, "UROCE_DAEMON_NAME": self.daemon_name}

    # -- processes --
    def spawn(self, argv, env_extra, log_path, cpu):
        env = dict(os.environ)
        # Peers must load Debian's libibverbs (if any), never ours.
        env.pop("LD_LIBRARY_PATH", None)
        env.update(env_extra or {})
        log = open(log_path, "ab")
        p = subprocess.Popen(["taskset", "-c", str(cpu)] + argv, stdout=log, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, env=env, start_new_session=True, cwd=self.out)
        log.close()
        self.live.append(p)
        return p

    def end(self, p, grace):
        """Waits up to `grace` s for p to exit, then ends its process group."""
        deadline = time.monotonic() + grace
        while p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(p.pid, sig)  # the group p leads: only what we started
            except ProcessLookupError:
                break
            t = time.monotonic() + 3
            while p.poll() is None and time.monotonic() < t:
                time.sleep(0.02)
        if p.poll() is None:
            p.wait(timeout=5)
        # The group may outlive its leader (forked children): end it too.
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if p in self.live:
            self.live.remove(p)
        return p.returncode

    def cleanup(self):
        for p in list(self.live):
            self.end(p, 0)
        self.stop_daemon()
        self.drop_veth()

    # -- two "hosts": network namespaces joined by a veth pair --
    VETH_ADDR = ("10.79.0.1", "10.79.0.2")

    def veth(self):
        """The namespaces (server, client) of the veth group, made on first use; None (and one
        line said) when they cannot be made (not root)."""
        if getattr(self, "_veth", None) is not None:
            return self._veth or None
        self._veth = ()
        if os.geteuid() != 0:
            say("  veth: skipped (network namespaces need root)")
            return None
        tag = f"ubench{os.getpid()}"
        ns = (f"{tag}-s", f"{tag}-c")
        cmds = [["ip", "netns", "add", ns[0]], ["ip", "netns", "add", ns[1]],
                ["ip", "link", "add", f"{tag}a", "type", "veth", "peer", "name", f"{tag}b"],
                ["ip", "link", "set", f"{tag}a", "netns", ns[0]], ["ip", "link", "set", f"{tag}b", "netns", ns[1]]]
        for i, (n, dev) in enumerate(zip(ns, (f"{tag}a", f"{tag}b"))):
            cmds += [["ip", "-n", n, "link", "set", dev, "name", "rnic0"],
                     ["ip", "-n", n, "addr", "add", f"{self.VETH_ADDR[i]}/24", "dev", "rnic0"],
                     ["ip", "-n", n, "link", "set", "rnic0", "up"], ["ip", "-n", n, "link", "set", "lo", "up"]]
        self._veth_ns = ns
        for c in cmds:
            r = subprocess.run(c, capture_output=True, text=True, timeout=10)
            if r.returncode != 0:
                say(f"  veth: skipped ({' '.join(c)}: {r.stderr.strip()})")
                self.drop_veth()
                return None
        self._veth = ns
        return ns

    def drop_veth(self):
        for n in getattr(self, "_veth_ns", ()):
            pids = subprocess.run(["ip", "netns", "pids", n], capture_output=True, text=True).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            subprocess.run(["ip", "netns", "del", n], capture_output=True)
        self._veth_ns = ()
        self._veth = ()

    def mac_in(self, ns, dev="rnic0"):
        r = subprocess.run(["ip", "netns", "exec", ns, "cat", f"/sys/class/net/{dev}/address"],
                           capture_output=True, text=True, timeout=10)
        return r.stdout.strip()

    def start_daemon(self):
        """Our own uroced for the whole run (found by name by the library), ended at the end."""
        uroced = os.path.join(self.a.uroce, "bin", "uroced")
        env = {"UROCE_DAEMON_NAME": self.daemon_name, "UROCED_IDLE_MS": "120000"}
        self.daemon = self.spawn([uroced], env, os.path.join(self.logs, "uroced.log"),
                                 f"{self.a.srv_cpu},{self.a.cli_cpu}")
        self.live.remove(self.daemon)
        time.sleep(0.2)

    def stop_daemon(self):
        if self.daemon is not None:
            self.live.append(self.daemon)
            self.end(self.daemon, 0)
            self.daemon = None

    def next_port(self):
        used = ports_in_use()
        while True:
            self.port += 3
            if self.port > 60000:
                self.port = self.a.port_base
            if not {self.port, self.port + 1, self.port + 2} & used:
                return self.port

    def wait_quiet(self):
        """Waits (bounded: --quiet-wait per run, --quiet-total in all) until other workloads leave
        the machine below --quiet-max % busy and the cross-core probe is in the VM's fast mode.
        Returns (busy %, probe ns) as last seen."""
        bg, xc = busy_pct(0.25), self.xcore()
        start = time.monotonic()

        def bad():
            return bg > self.a.quiet_max or (num(xc) or 0) > SLOW_XCORE_NS

        while (bad() and time.monotonic() - start < self.a.quiet_wait
               and self.quiet_spent + (time.monotonic() - start) < self.a.quiet_total):
            bg, xc = busy_pct(0.5), self.xcore()
        self.quiet_spent += time.monotonic() - start
        if bad():
            say(f"  machine {bg}% busy, cross-core round trip {xc} ns; measuring anyway")
        return bg, xc

    def xcore(self):
        """Cross-core cache-line round trip right now (ns): this VM flips between ~50 and ~400 ns."""
        try:
            r = subprocess.run([os.path.join(self.bin, "cacheline_rtt"), str(self.a.srv_cpu),
                                str(self.a.cli_cpu), "20000"], capture_output=True, text=True, timeout=5)
            m = re.search(r"rtt_ns=([\d.]+)", r.stdout)
            return m.group(1) if m else "-"
        except (subprocess.TimeoutExpired, OSError):
            return "-"

    def run(self, group, name, client, server=None, env=None, port=None, proto="tcp",
            timeout=None, srv_grace=5.0, extra_clients=()):
        """One measurement: optional server on srv_cpu, then client(s) on cli_cpu.
        Returns (rc, client log text, plus the server log when rc != 0)."""
        self.run_no += 1
        tag = re.sub(r"[^A-Za-z0-9._-]", "_", f"{self.run_no:04d}-{group}-{name}")
        slog = os.path.join(self.logs, tag + ".srv.log")
        clog = os.path.join(self.logs, tag + ".cli.log")
        timeout = timeout or self.a.run_timeout
        envs = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())

        def fmt(argv, cpu):  # as a shell command line: env, then taskset, then the tool
            return (envs + " " if envs else "") + f"taskset -c {cpu} " + " ".join(shlex.quote(x) for x in argv)

        cmd = f"{fmt(server, self.a.srv_cpu)} & " if server else ""
        clients = [client] + list(extra_clients)
        cmd += " ; ".join(fmt(c, self.a.cli_cpu) for c in clients)
        cmd = cmd.replace(self.out + "/", "$OUT/")
        bg, xc0 = self.wait_quiet()
        # CPU time of the whole machine vs that of our own (reaped) children during the run:
        # the difference is what other workloads took while we measured.
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu0 = cpu_times()
        t0 = time.monotonic()
        srv = None
        rc = 0
        try:
            if server:
                srv = self.spawn(server, env, slog, self.a.srv_cpu)
                if port:
                    deadline = time.monotonic() + 10
                    # In the server's network namespace (the veth group's servers run in one).
                    while (not port_bound(port, proto, srv.pid) and time.monotonic() < deadline
                           and srv.poll() is None):
                        time.sleep(0.02)
                else:
                    time.sleep(0.3)
            with open(clog, "w") as f:
                f.write(f"# {cmd}\n")
            for c in clients:
                p = self.spawn(c, env, clog, self.a.cli_cpu)
                try:
                    p.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    say(f"  {name}: client timed out after {timeout}s")
                    rc = 124
                crc = self.end(p, 0)
                if rc == 0:
                    rc = crc if crc is not None else 0
        finally:
            if srv is not None:
                self.end(srv, srv_grace)
        secs = time.monotonic() - t0
        cpu1 = cpu_times()
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        busy_s = ((cpu1[0] - cpu0[0]) - (cpu1[1] - cpu0[1])) / os.sysconf("SC_CLK_TCK")
        ours_s = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
        others = max(0, round(100 * (busy_s - ours_s) / (secs * (os.cpu_count() or 1))))
        xc1 = self.xcore()
        with open(clog, errors="replace") as f:
            text = f.read()
        if rc != 0 and os.path.exists(slog):
            with open(slog, errors="replace") as f:
                text += "\n# server log:\n" + f.read()
        self.last_slog = slog
        self.ctx = dict(rc=rc, secs=f"{secs:.1f}", bg=bg, others=others, xcore=f"{xc0}/{xc1}", log=os.path.basename(clog),
                        cmd=cmd, group=group)
        return rc, text

    def record(self, tool, transport, kind, size, value, unit, value_avg="", sweep=0, extra=""):
        c = self.ctx
        if isinstance(value, float):
            value = f"{value:.6g}"
        if isinstance(value_avg, float):
            value_avg = f"{value_avg:.6g}"
        row = [self.rep, self.run_no, c["group"], tool, transport, kind, size,
               value if value is not None else "FAIL", unit, value_avg, sweep, extra, c["rc"], c["secs"],
               c["bg"], c["others"], c["xcore"], c["log"], c["cmd"]]
        self.tsv.write("\t".join(str(x) for x in row) + "\n")
        self.tsv.flush()

    def fail(self, tool, transport, kind, size, unit, why, sweep=0):
        self.record(tool, transport, kind, size, None, unit, sweep=sweep, extra=why)

    def sweeps_now(self):
        """Size sweeps (for the plots) run in the first --sweep-reps passes only: perftest -a
        spends ~1 s per size on its own CPU-clock sampling, whatever the transport."""
        return self.a.sweeps and self.rep <= self.a.sweep_reps

    def it(self, n):
        return max(1, n // 10) if self.a.quick else n


# ------------------------------------------------------------------ parsers --
def parse_kv_lines(text, prefix):
    rows = []
    for line in text.splitlines():
        f = line.split()
        if len(f) > 1 and f[0] == "RESULT" and f[1] == prefix:
            rows.append(dict(kv.split("=", 1) for kv in line.split()[2:] if "=" in kv))
    return rows


def parse_perftest_lat(text):
    """-> [(size, typical_us, avg_us)] from the result table (t_typical may be absent with -D)."""
    rows, cols = [], None
    for line in text.splitlines():
        f = line.split()
        if f and f[0] == "#bytes":
            cols = f
            continue
        if cols and f and f[0].isdigit() and len(f) >= 3:
            d = dict(zip(cols, f))
            typ = d.get("t_typical[usec]")
            avg = d.get("t_avg[usec]")
            rows.append((int(f[0]), float(typ) if typ else (float(avg) if avg else None),
                         float(avg) if avg else None))
    return rows


def parse_perftest_bw(text):
    """-> [(size, GB/s, Mmsg/s)]; GB/s computed from MsgRate x size (unit-free)."""
    rows, cols = [], None
    for line in text.splitlines():
        f = line.split()
        if f and f[0] == "#bytes":
            cols = True
            continue
        if cols and len(f) >= 5 and f[0].isdigit():
            size, mpps = int(f[0]), float(f[-1])
            rows.append((size, mpps * size / 1e3, mpps))
    return rows


def parse_ucx_batch(text):
    """-> {label: final-fields}; fields: iters, p50_us, avg_us, overall_us, bw_avg, bw_all (MiB/s), rate_avg, rate_all."""
    out, label = {}, None
    for line in text.splitlines():
        m = re.match(r"^\+([A-Za-z0-9_.]+)[-+]", line)
        if m:
            label = m.group(1)
            continue
        if line.startswith("Final:") and label:
            f = line.split()[1:]
            if len(f) >= 8:
                out[label] = [float(x) for x in f[:8]]
    return out


def parse_fi_pingpong(text):
    """-> [(size, usec/xfer)] (fi_pingpong: usec/xfer = one-way, i.e. time / (2 x iterations))."""
    rows, cols = [], None
    mult = {"k": 1024, "m": 1 << 20, "g": 1 << 30}
    for line in text.splitlines():
        f = line.split()
        if f and f[0] == "bytes":
            cols = f
            continue
        if cols and f and f[0][0].isdigit() and len(f) == len(cols):
            s = f[0]
            size = int(s[:-1]) * mult[s[-1]] if s[-1] in mult else int(s)
            rows.append((size, float(f[cols.index("usec/xfer")])))
    return rows


def parse_qperf(text, key):
    """qperf prints 'latency = 31.2 us' / 'bw = 4.4 GB/sec': -> us or GB/s."""
    scale = {"ns": 1e-3, "us": 1, "ms": 1e3, "sec": 1e6,
             "bytes/sec": 1e-9, "KB/sec": 1e-6, "MB/sec": 1e-3, "GB/sec": 1, "TB/sec": 1e3}
    v = None
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 4 and f[0] == key and f[1] == "=":
            v = float(f[2].replace(",", "")) * scale.get(f[3], float("nan"))
    return v


# ------------------------------------------------------------------ groups ---
def group_limits(b):
    binp = lambda n: os.path.join(b.bin, n)
    ms = "30" if b.a.quick else "100"
    sizes = sorted(set(LAT_POINTS + BW_POINTS + LAT_SWEEP + BW_SWEEP + [16 << 20]))
    bw_sizes = [s for s in sizes if s >= 64]
    rc, text = b.run("limit", "memcpy", [binp("memcpy_bw"), str(b.a.cli_cpu), ms] + [str(s) for s in bw_sizes])
    got = {int(r["size"]): r for r in parse_kv_lines(text, "memcpy")}
    for s in bw_sizes:
        r = got.get(s)
        if r:
            b.record("memcpy", "1 core", "bw", s, r["gbyte_s"], "GB/s", r["gbyte_s_avg"], sweep=int(s not in BW_POINTS))
        else:
            b.fail("memcpy", "1 core", "bw", s, "GB/s", f"rc={rc}")

    rc, text = b.run("limit", "cacheline", [binp("cacheline_rtt"), str(b.a.srv_cpu), str(b.a.cli_cpu),
                                            str(b.it(2000000))])
    r = parse_kv_lines(text, "cacheline")
    if r:
        b.record("cacheline", f"cpu{b.a.srv_cpu}<->cpu{b.a.cli_cpu}", "lat", 64, float(r[0]["oneway_ns"]) / 1e3,
                 "us", extra=f"rtt_ns={r[0]['rtt_ns']}")
    else:
        b.fail("cacheline", f"cpu{b.a.srv_cpu}<->cpu{b.a.cli_cpu}", "lat", 64, "us", f"rc={rc}")

    shm_sizes = sorted(set(LAT_POINTS + LAT_SWEEP))
    rc, text = b.run("limit", "shm_pingpong", [binp("shm_pingpong"), str(b.a.srv_cpu), str(b.a.cli_cpu), ms]
                     + [str(s) for s in shm_sizes])
    got = {int(r["size"]): r for r in parse_kv_lines(text, "shm_pingpong")}
    for s in shm_sizes:
        r = got.get(s)
        if r:
            b.record("shm_pingpong", "2 procs", "lat", s, float(r["oneway_ns"]) / 1e3, "us",
                     sweep=int(s not in LAT_POINTS), extra=f"rtt_ns={r['rtt_ns']}")
        else:
            b.fail("shm_pingpong", "2 procs", "lat", s, "us", f"rc={rc}", sweep=int(s not in LAT_POINTS))

    pvm_sizes = sorted(set(LAT_POINTS + BW_POINTS + LAT_SWEEP + BW_SWEEP))
    rc, text = b.run("limit", "pvm_copy", [binp("pvm_copy"), str(b.a.cli_cpu), ms] + [str(s) for s in pvm_sizes])
    got = {(r["op"], int(r["size"])): r for r in parse_kv_lines(text, "pvm")}
    for op in ("writev", "readv"):
        tool = f"process_vm_{op}"
        for s in pvm_sizes:
            r = got.get((op, s))
            if not r:
                b.fail(tool, "1 call", "lat", s, "us", f"rc={rc}")
                continue
            b.record(tool, "1 call", "lat", s, r["us"], "us", sweep=int(s not in LAT_POINTS))
            b.record(tool, "1 call", "bw", s, r["gbyte_s"], "GB/s", sweep=int(s not in BW_POINTS))


def perftest_pair(b, group, env, prefix="", dev="uroce_lo", addr="127.0.0.1", in_srv=None, in_cli=None):
    """Runs one perftest tool as server + client on dev (GID 1) under env; the client connects to
    addr; in_srv/in_cli wrap each side's command (e.g. into a network namespace)."""
    keep = lambda argv: argv

    def pair(tool, args, name):
        port = b.next_port()
        srv = [tool, "-d", dev, "-x", "1", "-p", str(port)] + args
        return b.run(group, prefix + name, (in_cli or keep)(srv + [addr]), server=(in_srv or keep)(srv),
                     env=env, port=port, srv_grace=10)
    return pair


def perftest_points(b, pair, transport, lat_n, lat_sizes=None, bw_tools=("ib_write_bw", "ib_read_bw", "ib_send_bw"),
                    bw_sizes=None, rate=True):
    """The latency tools at lat_sizes (LAT_POINTS) and bw_tools at bw_sizes (BW_POINTS), 1 s each;
    rate: the bandwidth runs' message rates too."""
    for tool in ("ib_send_lat", "ib_write_lat", "ib_read_lat"):
        for s in lat_sizes or LAT_POINTS:
            rc, text = pair(tool, ["-s", str(s), "-n", str(lat_n)], f"{tool}-{s}")
            rows = [r for r in parse_perftest_lat(text) if r[0] == s]
            if rc == 0 and rows:
                b.record(tool, transport, "lat", s, rows[0][1], "us", rows[0][2])
            else:
                b.fail(tool, transport, "lat", s, "us", f"rc={rc}")
    for tool in bw_tools:
        for s in bw_sizes or BW_POINTS:
            rc, text = pair(tool, ["-s", str(s), "-D", "1"], f"{tool}-{s}")
            rows = [r for r in parse_perftest_bw(text) if r[0] == s]
            if rc == 0 and rows:
                b.record(tool, transport, "bw", s, f"{rows[0][1]:.4f}", "GB/s")
                if rate:
                    b.record(tool, transport, "rate", s, f"{rows[0][2]:.4f}", "Mmsg/s")
            else:
                b.fail(tool, transport, "bw", s, "GB/s", f"rc={rc}")


def group_uroce(b):
    pair = perftest_pair(b, "uroce", b.uroce_env)
    perftest_points(b, pair, "uroce RC", b.it(30000))
    dur = "1"
    # Message rate: 2-byte SENDs posted in lists of 32 (one ibv_post_send per 32 WRs).
    tx = ["-l", str(b.a.post_list), "-t", str(max(128, 4 * b.a.post_list))]
    rc, text = pair("ib_send_bw", ["-s", str(RATE_SIZE)] + tx + ["-D", dur], "ib_send_bw-rate")
    rows = [r for r in parse_perftest_bw(text) if r[0] == RATE_SIZE]
    label = "uroce RC post list"
    if rc == 0 and rows:
        b.record("ib_send_bw", label, "rate", RATE_SIZE, f"{rows[0][2]:.4f}", "Mmsg/s", extra=" ".join(tx))
    else:
        b.fail("ib_send_bw", label, "rate", RATE_SIZE, "Mmsg/s", f"rc={rc}")
    if not b.sweeps_now():
        return
    for tool in ("ib_send_lat", "ib_write_lat", "ib_read_lat"):
        rc, text = pair(tool, ["-a", "-n", str(b.it(200))], f"{tool}-sweep")
        rows = parse_perftest_lat(text)
        for s, typ, avg in rows:
            b.record(tool, "uroce RC", "lat", s, typ, "us", avg, sweep=1)
        if not rows:
            b.fail(tool, "uroce RC", "lat", 0, "us", f"sweep rc={rc}", sweep=1)
    for tool in ("ib_write_bw", "ib_read_bw", "ib_send_bw"):
        rc, text = pair(tool, ["-a", "-n", str(b.it(1000))], f"{tool}-sweep")
        rows = parse_perftest_bw(text)
        for s, gbs, mpps in rows:
            b.record(tool, "uroce RC", "bw", s, f"{gbs:.4f}", "GB/s", sweep=1)
        if not rows:
            b.fail(tool, "uroce RC", "bw", 0, "GB/s", f"sweep rc={rc}", sweep=1)


def group_uroce_udp(b):
    """uroce's network link: the same perftest tools with UROCE_LINK=udp, so every packet is
    RoCE v2 over UDP on 127.0.0.1 (one process per side, as between two hosts)."""
    pair = perftest_pair(b, "uroce_udp", dict(b.uroce_env, UROCE_LINK="udp"), prefix="udp-")
    perftest_points(b, pair, "uroce UDP", b.it(20000))


def ucx_iters(kind, size, fast, quick, floor_us=0.0):
    """Iterations for ~0.2-0.3 s: per-message time guessed from the transport (shm or tcp);
    floor_us: per-operation cost (cma: one process_vm_* syscall per operation)."""
    if kind == "lat":
        per_us = 2 * ((0.15 + size / 5000) if fast else (6 + size / 1000))
        n = int(200000 / per_us)
        lo, hi = 1000, 1000000
    else:
        per_us = max(size / 8000, 0.05, floor_us) if fast else max(size / 2500, 0.5)
        n = int(300000 / per_us)
        lo, hi = 200, 4000000
    n = max(lo, min(hi, n))
    return max(lo // 10, n // 10) if quick else n


def run_ucx_batch(b, name, lines, env, addr="127.0.0.1", in_srv=None, in_cli=None, group="ucx"):
    """lines: [(label, tool, transport, kind, size, sweep, args)]: one ucx_perftest server/client
    pair runs them all (-b batch file on both sides). in_srv / in_cli: wrap each side's argv
    (network namespaces, group veth)."""
    path = os.path.join(b.logs, f"ucx-{name}-{b.rep}.batch")
    with open(path, "w") as f:
        for line in lines:
            f.write(f"{line[0]} {line[6]}\n")
    port = b.next_port()
    base = ["ucx_perftest", "-p", str(port), "-b", path]
    wrap_s = in_srv or (lambda argv: argv)
    wrap_c = in_cli or (lambda argv: argv)
    rc, text = b.run(group, name, wrap_c(base[:1] + [addr] + base[1:]), server=wrap_s(base), env=env,
                     port=port, timeout=b.a.run_timeout * 2, srv_grace=10)
    res = parse_ucx_batch(text)
    for label, tool, transport, kind, size, sweep, _ in lines:
        f = res.get(label)
        if f is None:
            b.fail(tool, transport, "lat" if kind == "lat" else "bw", size, "us" if kind == "lat" else "GB/s",
                   f"rc={rc}", sweep=sweep)
        elif kind == "lat":
            b.record(tool, transport, "lat", size, f[1], "us", f[2], sweep=sweep)
        else:
            b.record(tool, transport, "bw", size, f"{f[5] * 1048576 / 1e9:.4f}", "GB/s", sweep=sweep)
            b.record(tool, transport, "rate", size, f"{f[7] / 1e6:.4f}", "Mmsg/s", sweep=sweep)


def group_ucx(b):
    q = b.a.quick
    ucx_env = {"UCX_NET_DEVICES": "lo", "UCX_WARN_UNUSED_ENV_VARS": "n"}
    pts = lambda sizes: [(s, 0) for s in sizes]
    lat_all = pts(LAT_POINTS) + ([(s, 1) for s in LAT_SWEEP] if b.sweeps_now() else [])
    bw_all = pts([RATE_SIZE] + BW_POINTS) + ([(s, 1) for s in BW_SWEEP] if b.sweeps_now() else [])

    def lines_for(transport, fast, spec):
        out = []
        for test, kind, sizes, extra in spec:
            for s, sw in sizes:
                n = ucx_iters("lat" if kind == "lat" else "bw", s, fast, q, 1.5 if "cma" in extra else 0.0)
                if "-O 1" in extra:  # one outstanding get: a whole round trip per iteration
                    n //= 4
                tool = test + (" -O 1" if "-O 1" in extra else "")
                out.append((f"{test}_{s}{'_O1' if '-O 1' in extra else ''}", tool, transport, kind, s, sw,
                            f"-t {test} -s {s} -n {n} {extra}".strip()))
        return out

    # UCP over shared memory, as an MPI/OpenSHMEM user gets it: posix or sysv mappings + cma.
    spec = [("tag_lat", "lat", lat_all, ""), ("ucp_am_lat", "lat", pts(LAT_POINTS), ""),
            ("ucp_put_lat", "lat", pts(LAT_POINTS), ""), ("tag_bw", "bw", bw_all, ""),
            ("ucp_put_bw", "bw", pts(BW_POINTS), ""), ("ucp_get", "bw", pts(BW_POINTS), "")]
    run_ucx_batch(b, "posix+cma", lines_for("ucp posix,cma", True, spec), dict(ucx_env, UCX_TLS="posix,cma"))
    spec = [("tag_lat", "lat", pts(LAT_POINTS), ""), ("ucp_am_lat", "lat", pts([2]), ""),
            ("tag_bw", "bw", pts([RATE_SIZE, 65536, 1 << 20]), "")]
    run_ucx_batch(b, "sysv+cma", lines_for("ucp sysv,cma", True, spec), dict(ucx_env, UCX_TLS="sysv,cma"))
    # UCP over tcp on lo.
    spec = [("tag_lat", "lat", lat_all, ""), ("tag_bw", "bw", bw_all, ""), ("ucp_put_bw", "bw", pts(BW_POINTS), "")]
    run_ucx_batch(b, "tcp", lines_for("ucp tcp", False, spec), dict(ucx_env, UCX_TLS="tcp"))
    # UCT, the transport layer (closest to verbs): AM over posix shm, put/get zero-copy over cma.
    # UCT short AMs carry an 8-byte header inside the message, so 8 B is their smallest size.
    bwz = pts(BW_POINTS) + ([(s, 1) for s in BW_SWEEP] if b.sweeps_now() else [])
    lines = lines_for("uct posix", True, [("am_lat", "lat", pts([8, 64]), "-x posix -d memory"),
                                          ("am_bw", "rate", pts([8]), "-x posix -d memory")])
    lines += lines_for("uct cma zcopy", True, [("put_bw", "bw", bwz, "-x cma -d memory -D zcopy"),
                                               ("get", "bw", bwz, "-x cma -d memory -D zcopy"),
                                               ("get", "lat", pts(LAT_POINTS), "-x cma -d memory -D zcopy -O 1")])
    run_ucx_batch(b, "uct", lines, ucx_env)


def group_fabric(b):
    # libfabric picks eth0 for its tcp endpoints unless told: keep everything on lo.
    env = {"FI_TCP_IFACE": "lo"}
    sizes = LAT_POINTS + ([65536, 1 << 20] if b.sweeps_now() else [])
    # udp: unreliable datagrams (one message per datagram; 4 KiB does not fit the provider);
    # udp;ofi_rxd: libfabric's reliable layer over it (RDM), the closest peer of RC over UDP.
    for prov, ep, extra, fast, psizes in (("shm", "rdm", [], True, sizes), ("tcp", "msg", ["-d", "lo"], False, sizes),
                                          ("udp", "dgram", [], False, [2, 64]),
                                          ("udp;ofi_rxd", "rdm", [], False, LAT_POINTS)):
        for s in psizes:
            per_us = 2 * ((0.3 + s / 3000) if fast else (6 + s / 700))
            n = b.it(max(200, min(200000, int(300000 / per_us))))
            port = b.next_port()
            common = ["fi_pingpong", "-p", prov, "-e", ep, "-I", str(n), "-S", str(s)] + extra
            rc, text = b.run("fabric", f"fi_pingpong-{prov.replace(';', '+')}-{s}", common + ["-P", str(port), "127.0.0.1"],
                             server=common + ["-B", str(port)], env=env, port=port, srv_grace=10)
            rows = [r for r in parse_fi_pingpong(text) if r[0] == s]
            sw = int(s not in LAT_POINTS)
            if rc == 0 and rows:
                b.record("fi_pingpong", f"libfabric {prov}", "lat", s, rows[0][1], "us", rows[0][1], sweep=sw)
            else:
                b.fail("fi_pingpong", f"libfabric {prov}", "lat", s, "us", f"rc={rc}", sweep=sw)


def group_qperf(b):
    port = b.next_port()
    t = "1"
    tests = [("tcp_lat", s, "latency", "lat") for s in LAT_POINTS] + \
            [("tcp_bw", s, "bw", "bw") for s in (65536, 1 << 20)]
    clients = [["qperf", "127.0.0.1", "-lp", str(port), "-ip", str(port + 1), "-t", t, "-m", str(s), test]
               for test, s, _, _ in tests]
    # The qperf server never exits by itself: one server for all five clients, then ended.
    rc, text = b.run("qperf", "qperf", clients[0], server=["qperf", "-lp", str(port)], port=port,
                     srv_grace=0.5, extra_clients=clients[1:])
    # Outputs come in order; split per client on the test name lines qperf prints.
    blocks = re.split(r"(?m)^(tcp_lat|tcp_bw):\s*$", text)
    found = []
    for i in range(1, len(blocks) - 1, 2):
        found.append((blocks[i], blocks[i + 1]))
    for idx, (test, s, key, kind) in enumerate(tests):
        v = parse_qperf(found[idx][1], key) if idx < len(found) and found[idx][0] == test else None
        if v is None:
            b.fail(test, "qperf tcp", kind, s, "us" if kind == "lat" else "GB/s", f"rc={rc}")
        else:
            b.record(test, "qperf tcp", kind, s, f"{v:.4f}", "us" if kind == "lat" else "GB/s")


UDP_ACK = "udp busy-poll + ACK (GSO)"


def group_udp(b):
    port = b.next_port()
    sizes = LAT_POINTS + ([512, 32768, 65507] if b.sweeps_now() else [])
    ms = "30" if b.a.quick else "150"
    u = os.path.join(b.bin, "udp_pingpong")
    rc, text = b.run("udp", "udp_pingpong", [u, "client", str(port), ms] + [str(s) for s in sizes],
                     server=[u, "server", str(port), str(b.a.run_timeout)], port=port, proto="udp")
    got = {int(r["size"]): r for r in parse_kv_lines(text, "udp_pingpong")}
    for s in sizes:
        r = got.get(s)
        sw = int(s not in LAT_POINTS)
        if r:
            b.record("udp_pingpong", "udp busy-poll", "lat", s, r["oneway_us"], "us", sweep=sw,
                     extra=f"lost={r['lost']}")
        else:
            b.fail("udp_pingpong", "udp busy-poll", "lat", s, "us", f"rc={rc}", sweep=sw)
    # The same with an ACK-sized second datagram in each send (-a): the least an RC
    # ping-pong over UDP sockets moves per direction (the message and the ACK of the peer's).
    port = b.next_port()
    rc, text = b.run("udp", "udp_pingpong-ack", [u, "-a", "client", str(port), ms] + [str(s) for s in LAT_POINTS],
                     server=[u, "-a", "server", str(port), str(b.a.run_timeout)], port=port, proto="udp")
    got = {int(r["size"]): r for r in parse_kv_lines(text, "udp_pingpong_ack")}
    for s in LAT_POINTS:
        r = got.get(s)
        if r:
            b.record("udp_pingpong", UDP_ACK, "lat", s, r["oneway_us"], "us", extra=f"lost={r['lost']}")
        else:
            b.fail("udp_pingpong", UDP_ACK, "lat", s, "us", f"rc={rc}")


def group_veth(b):
    """Two "hosts" (network namespaces joined by a veth pair, server in one, client in the
    other): the raw floors (UDP sockets, AF_XDP) and uroce's network link under perftest, on
    UDP sockets and on AF_XDP. Root only."""
    ns = b.veth()
    if not ns:
        return
    srv_ip, _cli_ip = b.VETH_ADDR
    in_ns = lambda n, argv: ["ip", "netns", "exec", n] + argv
    ms = "30" if b.a.quick else "150"
    # The raw ping-pongs across the veth: UDP sockets (busy-polled, as group udp) and AF_XDP
    # (generic XDP on the veth, both ends spinning on their rings); each also with an ACK-sized
    # second datagram or frame per message (-a): what an RC ping-pong whose sends are all
    # signaled (perftest's latency tools: tx depth 1) moves per direction at least.
    u = os.path.join(b.bin, "udp_pingpong")
    x = os.path.join(b.bin, "xdp_pingpong")
    xdp_sizes = [s for s in LAT_POINTS if s <= 2048]
    raw = [("udp_pingpong", "veth udp busy-poll", [], LAT_POINTS),
           ("udp_pingpong", "veth udp busy-poll + ACK (GSO)", ["-a"], [2]),
           ("xdp_pingpong", "veth AF_XDP (generic)", [], xdp_sizes),
           ("xdp_pingpong", "veth AF_XDP (generic) + ACK", ["-a"], [2])]
    for tool, transport, opt, sizes in raw:
        name = tool + ("_ack" if opt else "")
        if tool == "udp_pingpong":
            port = b.next_port()
            rc, text = b.run("veth", name, in_ns(ns[1], [u] + opt + ["-H", srv_ip, "client", str(port), ms]
                                                 + [str(s) for s in sizes]),
                             server=in_ns(ns[0], [u] + opt + ["-H", srv_ip, "server", str(port),
                                                              str(b.a.run_timeout)]),
                             port=port, proto="udp")
        elif os.access(x, os.X_OK):
            rc, text = b.run("veth", name, in_ns(ns[1], [x] + opt + ["client", "rnic0", srv_ip, b.mac_in(ns[0]), ms]
                                                 + [str(s) for s in sizes]),
                             server=in_ns(ns[0], [x] + opt + ["server", "rnic0", str(b.a.run_timeout)]))
        else:
            continue
        got = {int(r["size"]): r for r in parse_kv_lines(text, name)}
        for s in sizes:
            r = got.get(s)
            if r:
                b.record(tool, transport, "lat", s, r["oneway_us"], "us", extra=f"lost={r['lost']}")
            else:
                b.fail(tool, transport, "lat", s, "us", f"rc={rc}")
    # uroce under perftest between the namespaces, each with its own uroced: the RC QPs on
    # the UDP-socket link, then on the AF_XDP link (UROCE_LINK_XDP=require: fails rather
    # than fall back).
    for link, xdp_env, transport in (("udp", "0", "uroce UDP veth"), ("xdp", "require", "uroce AF_XDP veth")):
        env = dict(b.uroce_env, UROCE_UROCED=os.path.join(b.a.uroce, "bin", "uroced"), UROCE_LINK_XDP=xdp_env)
        env.pop("UROCE_DAEMON_NAME", None)
        pair = perftest_pair(b, "veth", env, prefix=f"{link}-", dev="uroce_rnic0", addr=srv_ip,
                             in_srv=lambda argv: in_ns(ns[0], argv), in_cli=lambda argv: in_ns(ns[1], argv))
        perftest_points(b, pair, transport, b.it(20000), lat_sizes=[2], bw_tools=("ib_write_bw", "ib_send_bw"),
                        bw_sizes=(65536, 1 << 20), rate=False)
    # UCX over TCP across the veth (UCP tag matching: what an MPI user gets from UCX between hosts).
    if shutil.which("ucx_perftest"):
        lines = [("tag_lat_2", "tag_lat", "ucp tcp veth", "lat", 2, 0, f"-t tag_lat -s 2 -n {b.it(20000)}")]
        lines += [(f"tag_bw_{s}", "tag_bw", "ucp tcp veth", "bw", s, 0, f"-t tag_bw -s {s} -n {b.it(20000) // 10}")
                  for s in (65536, 1 << 20)]
        run_ucx_batch(b, "tcp-veth", lines, dict(UCX_NET_DEVICES="rnic0", UCX_TLS="tcp", UCX_WARN_UNUSED_ENV_VARS="n"),
                      addr=srv_ip, in_srv=lambda argv: in_ns(ns[0], argv), in_cli=lambda argv: in_ns(ns[1], argv),
                      group="veth")
    # libfabric across the veth: tcp (MSG endpoints), udp (datagrams) and udp;ofi_rxd (its
    # reliable layer over UDP, RDM: the closest peer of RC over UDP), as group fabric runs them on lo.
    if shutil.which("fi_pingpong"):
        for prov, ep, extra in (("tcp", "msg", ["-d", "rnic0"]), ("udp", "dgram", []), ("udp;ofi_rxd", "rdm", [])):
            port = b.next_port()
            common = ["fi_pingpong", "-p", prov, "-e", ep, "-I", str(b.it(5000)), "-S", "2"] + extra
            name = f"fi_pingpong-{prov.replace(';', '+')}"
            rc, text = b.run("veth", name, in_ns(ns[1], common + ["-P", str(port), srv_ip]),
                             server=in_ns(ns[0], common + ["-B", str(port)]), env={"FI_TCP_IFACE": "rnic0"},
                             port=port, proto="udp" if prov.startswith("udp") else "tcp", srv_grace=10)
            rows = [r for r in parse_fi_pingpong(text) if r[0] == 2]
            if rc == 0 and rows:
                b.record("fi_pingpong", f"libfabric {prov} veth", "lat", 2, rows[0][1], "us", rows[0][1])
            else:
                b.fail("fi_pingpong", f"libfabric {prov} veth", "lat", 2, "us", f"rc={rc}")
    # qperf's TCP across the veth.
    port = b.next_port()
    tests = [("tcp_lat", 2, "latency", "lat"), ("tcp_bw", 65536, "bw", "bw"), ("tcp_bw", 1 << 20, "bw", "bw")]
    clients = [in_ns(ns[1], ["qperf", srv_ip, "-lp", str(port), "-ip", str(port + 1), "-t", "1", "-m", str(s), t])
               for t, s, _, _ in tests]
    rc, text = b.run("veth", "qperf", clients[0], server=in_ns(ns[0], ["qperf", "-lp", str(port)]), port=port,
                     srv_grace=0.5, extra_clients=clients[1:])
    blocks = re.split(r"(?m)^(tcp_lat|tcp_bw):\s*$", text)
    found = [(blocks[i], blocks[i + 1]) for i in range(1, len(blocks) - 1, 2)]
    for idx, (t, s, key, kind) in enumerate(tests):
        v = parse_qperf(found[idx][1], key) if idx < len(found) and found[idx][0] == t else None
        unit = "us" if kind == "lat" else "GB/s"
        if v is None:
            b.fail(t, "qperf tcp veth", kind, s, unit, f"rc={rc}")
        else:
            b.record(t, "qperf tcp veth", kind, s, f"{v:.4f}", unit)


def parse_cmtime(text):
    """-> {step: (total_ms, max_ms, min_us, us_per_conn)} from cmtime's table."""
    rows = {}
    for line in text.splitlines():
        m = re.match(r"^(\w[\w ]*?)\s*:\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$", line)
        if m:
            rows[m.group(1).strip()] = tuple(float(m.group(i)) for i in range(2, 6))
    return rows


def group_cm(b):
    """Connection set-up: rdmacm-utils' cmtime over uroce's librdmacm on uroce_lo (127.0.0.1),
    beside TCP connects on 127.0.0.1 (bench/src/tcp_connect.c). cmtime connects all its ids
    at once: its "connect" us/conn is a rate; with -c 1 its total is one connection's latency."""
    n = b.it(1000)
    for count, kind in ((n, "rate"), (1, "lat")):
        port = b.next_port()
        rc, text = b.run("cm", f"cmtime-{count}", ["cmtime", "-s", "127.0.0.1", "-p", str(port), "-c", str(count)],
                         server=["cmtime", "-b", "127.0.0.1", "-p", str(port)], env=b.uroce_env, port=None,
                         srv_grace=0.5)
        rows = parse_cmtime(text)
        if rc == 0 and "connect" in rows:
            total_ms, _max_ms, _min_us, per = rows["connect"]
            if kind == "rate":
                b.record("cmtime", "uroce CM", "conn_rate", count, f"{1e6 / per / 1e3:.2f}", "kconn/s",
                         extra=f"us_per_conn={per}")
            else:
                b.record("cmtime", "uroce CM", "conn_lat", 1, f"{total_ms * 1e3:.1f}", "us")
        else:
            b.fail("cmtime", "uroce CM", "conn_rate" if kind == "rate" else "conn_lat", count,
                   "kconn/s" if kind == "rate" else "us", f"rc={rc}")
    # Kernel rxe's CM in the qemu guest (TCG: emulated, see bench/rxe_cmtime.sh).
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rxe_cmtime.sh")
    rc, text = b.run("cm", "rxe-cmtime", ["bash", script, str(n)], timeout=900)
    parts = re.split(r"^== cmtime -c (\d+)\s*$", text, flags=re.M)
    got = {int(parts[i]): parse_cmtime(parts[i + 1]) for i in range(1, len(parts) - 1, 2)}
    for count, kind in ((n, "rate"), (1, "lat")):
        rows = got.get(count, {})
        if rc == 0 and "connect" in rows:
            total_ms, _max_ms, _min_us, per = rows["connect"]
            if kind == "rate":
                b.record("cmtime", "kernel rxe (qemu TCG guest)", "conn_rate", count, f"{1e6 / per / 1e3:.2f}",
                         "kconn/s", extra=f"us_per_conn={per}")
            else:
                b.record("cmtime", "kernel rxe (qemu TCG guest)", "conn_lat", 1, f"{total_ms * 1e3:.1f}", "us")
        elif rc != 77:
            b.fail("cmtime", "kernel rxe (qemu TCG guest)", "conn_rate" if kind == "rate" else "conn_lat", count,
                   "kconn/s" if kind == "rate" else "us", f"rc={rc}")
    port = b.next_port()
    t = os.path.join(b.bin, "tcp_connect")
    rc, text = b.run("cm", "tcp_connect", [t, "client", str(port), str(n)], server=[t, "server", str(port), "3"],
                     port=port, srv_grace=5)
    rows = {r.get("mode"): r for r in parse_kv_lines(text, "tcp_connect")}
    if rc == 0 and "parallel" in rows and "serial" in rows:
        b.record("tcp_connect", "TCP", "conn_rate", n, f"{1e3 / float(rows['parallel']['us_per_conn']):.2f}",
                 "kconn/s", extra=f"us_per_conn={rows['parallel']['us_per_conn']}")
        b.record("tcp_connect", "TCP", "conn_lat", 1, rows["serial"]["us_per_conn"], "us",
                 extra=f"min_us={rows['serial']['min_us']}")
    else:
        b.fail("tcp_connect", "TCP", "conn_rate", n, "kconn/s", f"rc={rc}")
    # The floor under one connection alone: a request to a process asleep on the other CPU and
    # its answer, after 1 ms idle (bench/src/wake_rtt.c).
    w = os.path.join(b.bin, "wake_rtt")
    rc, text = b.run("cm", "wake_rtt", [w, str(b.a.srv_cpu), str(b.a.cli_cpu), str(b.it(500)), "1000"])
    rows = parse_kv_lines(text, "wake_rtt")
    if rc == 0 and rows:
        b.record("wake_rtt", "2 process wake-ups", "conn_lat", 1, rows[0]["median_us"], "us",
                 extra=f"min_us={rows[0]['min_us']} p90_us={rows[0]['p90_us']}")
    else:
        b.fail("wake_rtt", "2 process wake-ups", "conn_lat", 1, "us", f"rc={rc}")


def group_raw(b):
    """Raw Ethernet between the veth group's namespaces (docs/raw-ethernet.md): perftest's
    raw_ethernet_bw on uroce's RAW_PACKET QPs (AF_XDP link) at 64 B (message rate) and 1500 B
    (bandwidth), as the receiving server counts them, beside an AF_PACKET sender and receiver
    (bench/src/packet_pair.c, sendmmsg/recvmmsg: what a program without an RDMA NIC would use);
    raw_ethernet_lat 64 B beside the raw AF_XDP ping-pong; raw_ethernet_fs_rate (flow rules per
    second). perftest's -s counts the 4-byte FCS: its frames are size - 4 bytes, and so are
    packet_pair's. Root only."""
    ns = b.veth()
    if not ns or not shutil.which("raw_ethernet_bw"):
        return
    srv_ip, cli_ip = b.VETH_ADDR
    in_ns = lambda n, argv: ["ip", "netns", "exec", n] + argv
    smac, cmac = b.mac_in(ns[0]), b.mac_in(ns[1])
    env = dict(b.uroce_env, UROCE_UROCED=os.path.join(b.a.uroce, "bin", "uroced"), UROCE_LINK_XDP="require")
    env.pop("UROCE_DAEMON_NAME", None)
    dur = 2 if b.a.quick else 4
    later = lambda delay, argv: ["sh", "-c", f"sleep {delay}; exec " + " ".join(shlex.quote(x) for x in argv)]

    def server_text():
        with open(b.last_slog, errors="replace") as f:
            return f.read()
    pp = os.path.join(b.bin, "packet_pair")
    flow = ["-J", srv_ip, "-j", cli_ip, "-K", "5001", "-k", "5002"]
    for size in (64, 1500):
        if os.access(pp, os.X_OK):
            rc, text = b.run("raw", f"packet_pair-{size}",
                             in_ns(ns[1], later(0.5, [pp, "source", "rnic0", smac, cli_ip, srv_ip, "5001",
                                                      str(size - 4), str(dur)])),
                             server=in_ns(ns[0], [pp, "sink", "rnic0", "5001", str(dur)]), srv_grace=dur + 12)
            got = {k: v for k, v in re.findall(r"(\w+)=([\d.]+)", server_text())}
            sent = {k: v for k, v in re.findall(r"(\w+)=([\d.]+)", text)}
            if got.get("rate_mpps"):
                mpps = float(got["rate_mpps"])
                b.record("packet_pair", "AF_PACKET veth", "rate", size, f"{mpps:.4f}", "Mmsg/s",
                         extra=f"sent_mpps={sent.get('rate_mpps', '?')}")
                b.record("packet_pair", "AF_PACKET veth", "bw", size, f"{mpps * size / 1e3:.4f}", "GB/s")
            else:
                b.fail("packet_pair", "AF_PACKET veth", "rate", size, "Mmsg/s", f"rc={rc}")
        args = ["-d", "uroce_rnic0"] + flow + ["-s", str(size), "-D", str(dur)]
        rc, text = b.run("raw", f"raw_ethernet_bw-{size}",
                         in_ns(ns[1], later(1.5, ["raw_ethernet_bw", "--client", "-B", cmac, "-E", smac] + args)),
                         server=in_ns(ns[0], ["raw_ethernet_bw", "--server", "-B", smac, "-E", cmac] + args),
                         env=env, srv_grace=dur + 12)
        srows = [r for r in parse_perftest_bw(server_text()) if r[0] == size]
        crows = [r for r in parse_perftest_bw(text) if r[0] == size]
        if rc == 0 and srows:
            b.record("raw_ethernet_bw", "uroce raw AF_XDP veth", "rate", size, f"{srows[0][2]:.4f}", "Mmsg/s",
                     extra=f"sent_mpps={crows[0][2] if crows else '?'}")
            b.record("raw_ethernet_bw", "uroce raw AF_XDP veth", "bw", size, f"{srows[0][1]:.4f}", "GB/s")
        else:
            b.fail("raw_ethernet_bw", "uroce raw AF_XDP veth", "rate", size, "Mmsg/s", f"rc={rc}")
    # Latency: the raw AF_XDP ping-pong (the floor) and raw_ethernet_lat, 64 B.
    x = os.path.join(b.bin, "xdp_pingpong")
    if os.access(x, os.X_OK):
        ms = "30" if b.a.quick else "150"
        # SIZE 2: a 60-byte frame (Ethernet, IPv4, UDP, BTH, 2 bytes, ICRC), as raw_ethernet_lat -s 64's.
        rc, text = b.run("raw", "xdp_pingpong", in_ns(ns[1], [x, "client", "rnic0", srv_ip, smac, ms, "2"]),
                         server=in_ns(ns[0], [x, "server", "rnic0", str(b.a.run_timeout)]))
        rows = {int(r["size"]): r for r in parse_kv_lines(text, "xdp_pingpong")}
        if 2 in rows:
            b.record("xdp_pingpong", "veth AF_XDP (generic)", "lat", 64, rows[2]["oneway_us"], "us")
        else:
            b.fail("xdp_pingpong", "veth AF_XDP (generic)", "lat", 64, "us", f"rc={rc}")
    largs = ["-d", "uroce_rnic0"] + flow + ["-s", "64", "-n", str(b.it(20000))]
    rc, text = b.run("raw", "raw_ethernet_lat-64",
                     in_ns(ns[1], later(1.5, ["raw_ethernet_lat", "--client", "-B", cmac, "-E", smac] + largs)),
                     server=in_ns(ns[0], ["raw_ethernet_lat", "--server", "-B", smac, "-E", cmac] + largs), env=env)
    rows = [r for r in parse_perftest_lat(text) if r[0] == 64]
    if rc == 0 and rows:
        b.record("raw_ethernet_lat", "uroce raw AF_XDP veth", "lat", 64, rows[0][1], "us", rows[0][2])
    else:
        b.fail("raw_ethernet_lat", "uroce raw AF_XDP veth", "lat", 64, "us", f"rc={rc}")
    rc, text = b.run("raw", "raw_ethernet_fs_rate",
                     in_ns(ns[0], ["raw_ethernet_fs_rate", "-d", "uroce_rnic0", "--server", "-B", smac] + flow), env=env)
    m = re.search(r"(?m)^\s*(\d+)\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+([\d.]+)\s*$", text)
    if rc == 0 and m:
        b.record("raw_ethernet_fs_rate", "uroce raw AF_XDP veth", "rate", int(m.group(1)), m.group(2), "rules/s")
    else:
        b.fail("raw_ethernet_fs_rate", "uroce raw AF_XDP veth", "rate", 0, "rules/s", f"rc={rc}")


GROUPS = {"limits": group_limits, "uroce": group_uroce, "uroce_udp": group_uroce_udp, "ucx": group_ucx,
          "fabric": group_fabric, "qperf": group_qperf, "udp": group_udp, "cm": group_cm, "veth": group_veth,
          "raw": group_raw}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--bin", required=True, help="directory of the compiled bench/src programs")
    ap.add_argument("--uroce", default=os.path.join(ROOT, "build"),
                    help="directory with lib/libibverbs.so.1 and bin/uroced (default: build/)")
    ap.add_argument("-r", "--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="1/10 of the iterations (smoke test)")
    ap.add_argument("--groups", default=",".join(GROUPS))
    ap.add_argument("--no-sweeps", dest="sweeps", action="store_false")
    ap.add_argument("--sweep-reps", type=int, default=1, help="passes that also run the size sweeps (1)")
    ap.add_argument("--srv-cpu", type=int, default=int(os.environ.get("SRV_CPU", 0)))
    ap.add_argument("--cli-cpu", type=int, default=int(os.environ.get("CLI_CPU", 1)))
    ap.add_argument("--post-list", type=int, default=32)
    ap.add_argument("--run-timeout", type=int, default=int(os.environ.get("RUN_TMO", 60)))
    ap.add_argument("--quiet-max", type=int, default=int(os.environ.get("QUIET_MAX", 20)))
    ap.add_argument("--quiet-wait", type=float, default=float(os.environ.get("QUIET_WAIT", 20)))
    ap.add_argument("--quiet-total", type=float, default=float(os.environ.get("QUIET_TOTAL", 240)))
    ap.add_argument("--port-base", type=int, default=int(os.environ.get("PORT_BASE", 47100)))
    a = ap.parse_args()
    if a.quick and "QUIET_TOTAL" not in os.environ:
        a.quiet_total = 60  # a smoke run should not spend minutes waiting for a quiet machine
    groups = [g for g in a.groups.split(",") if g]
    for g in groups:
        if g not in GROUPS:
            ap.error(f"unknown group {g} (known: {', '.join(GROUPS)})")
    b = Bench(a)

    def on_signal(signum, _frame):
        say(f"signal {signum}: cleaning up")
        b.cleanup()
        sys.exit(128 + signum)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        if "uroce" in groups or "uroce_udp" in groups or "cm" in groups:
            b.start_daemon()
        for rep in range(1, a.reps + 1):
            b.rep = rep
            say(f"=== pass {rep}/{a.reps}")
            for g in groups:
                t0 = time.monotonic()
                GROUPS[g](b)
                say(f"  {g}: {time.monotonic() - t0:.0f} s")
    finally:
        b.cleanup()
    say(f"waited {b.quiet_spent:.0f} s in total for other workloads to quiet down")


if __name__ == "__main__":
    main()
