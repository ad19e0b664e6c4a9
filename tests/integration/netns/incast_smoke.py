#!/usr/bin/env python3
"""Incast smoke test (correctness, not speed): two sender namespaces and a
receiver behind one shaped bridge port (bench/incast.py's topology: tbf at
200 Mbit/s with a 32 KiB queue, so the two flows' bursts overflow it), each
sender running Debian's ibv_rc_pingpong with data checks (-c) against its
own server in the receiver's namespace, both at once; on UDP sockets, then
on the AF_XDP link, each once with a port that only drops and once with one
that also marks ECN (bench/incast.py --ecn: nftables sets CE on what
exceeds 95 % of the rate).

Passes when every pingpong exits 0 having moved all its messages intact
(rdma-core's -c compares every byte), and each sender's device counted
round-trip samples (congestion control ran); with marking, when the
receiver counted CE-marked requests and sent CNPs and the senders received
them; and when both sides' QPs learnt that their peers keep packets past a
gap (selective repeat: wire/caps_mad.h). Prints the port's drops and the senders' window cuts. Root only (77
otherwise); every namespace and process it makes is removed at the end.

Usage: incast_smoke.py BUILD_DIR PORT
"""
import importlib.util
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("incast", os.path.join(HERE, "..", "..", "..", "bench", "incast.py"))
incast = importlib.util.module_from_spec(spec)
spec.loader.exec_module(incast)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    build, port = sys.argv[1], int(sys.argv[2])
    if os.geteuid() != 0:
        print("SKIP: network namespaces need root")
        return 77
    for tool in ("ip", "tc", "ethtool", "nft", "ibv_rc_pingpong"):
        if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode != 0:
            print(f"SKIP: {tool} not installed (scripts/setup.sh)")
            return 77
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(build, "lib"),
               UROCE_UROCED=os.path.join(build, "bin", "uroced"))
    failed = False
    # The last phase leaves veth's offloads on, with small messages: a
    # reply and an ACK from the receiver's second server (on UDP sockets)
    # leave as one UDP GSO send, which veth carries whole to the sender's
    # AF_XDP socket as one frame of two packets (XdpPort::on_gso_run).
    phases = (("udp", "0", False, False, 65536), ("xdp", "1", False, False, 65536), ("udp", "0", True, False, 65536),
              ("xdp", "1", True, False, 65536), ("xdp", "1", False, True, 64))
    for link, xdp, ecn, offloads, size in phases:
        name = link + (" ecn" if ecn else "") + (" offloads" if offloads else "")
        # Checksums filled in and GSO sends cut at each sender's veth, as in
        # the other two-host tests (with_netns.sh): a GSO send carried whole
        # to an AF_XDP receiver is one frame too big for its socket
        # (docs/afxdp-link.md, "Limits").
        topo = incast.Topology(2, "200mbit", "32kb", ecn=ecn, probe=False, offloads=offloads)
        procs = []
        try:
            e = dict(env, UROCE_LINK_XDP=xdp)

            def spawn(ns, argv):
                p = subprocess.Popen(["ip", "netns", "exec", ns] + argv, env=e, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
                procs.append(p)
                return p

            pp = ["ibv_rc_pingpong", "-d", "uroce_rnic0", "-g", "1", "-c", "-s", str(size), "-n", "100"]
            servers = [spawn(topo.rx, pp + ["-p", str(port + i)]) for i in range(2)]
            time.sleep(0.5)
            clients = [spawn(ns, pp + ["-p", str(port + i), topo.addr(-1)]) for i, ns in enumerate(topo.tx)]
            outs = []
            for p in clients + servers:
                try:
                    out, _ = p.communicate(timeout=60)
                except subprocess.TimeoutExpired:
                    p.kill()
                    out, _ = p.communicate()
                    out += "\n[killed: 60 s]"
                outs.append((p.returncode, out))
            drops = topo.port_stats()[2]
            marked = topo.ce_marked() if ecn else 0

            def counters(ns):
                r = subprocess.run(["ip", "netns", "exec", ns, os.path.join(build, "bin", "uroce"), "stat", "-j"],
                                   env=e, capture_output=True, text=True)
                total = {}
                try:
                    for d in json.loads(r.stdout):
                        for k, v in d["counters"].items():
                            total[k] = total.get(k, 0) + v
                except ValueError:
                    pass
                return total

            samples, cuts, cnps, selective, holes = 0, 0, 0, 0, 0
            for ns in topo.tx:
                c = counters(ns)
                selective += c.get("req.caps_selective", 0)
                holes += c.get("req.holes_resent", 0)
                samples += c.get("cc.rtt_samples", 0)
                cuts += c.get("cc.delay_cuts", 0) + c.get("cc.loss_cuts", 0) + c.get("cc.timeouts", 0)
                cuts += c.get("cc.cnp_cuts", 0)
                cnps += c.get("cc.cnps", 0)
            rx = counters(topo.rx)
            ok = all(rc == 0 and "100 iters in" in out for rc, out in outs)
            if not ok:
                failed = True
                for rc, out in outs:
                    print(f"--- exit {rc} ---\n{out[-1500:]}")
            if samples == 0:
                ok = False
                print(f"{name}: no round-trip samples counted by the senders")
            notes = (f", selective repeat: {selective} + {rx.get('req.caps_selective', 0)} QPs, "
                     f"holes resent {holes}, packets kept past a gap {rx.get('resp.ooo_kept', 0)}")
            if selective < 2 or rx.get("req.caps_selective", 0) < 2:
                ok = False
                print(f"{name}: the QPs did not all learn that their peers keep packets past a gap{notes}")
            if ecn:
                seen, sent = rx.get("np.ce_marked", 0), rx.get("np.cnps_sent", 0)
                notes += f", CE marked {marked}, seen {seen}, CNPs sent {sent}, received {cnps}"
                if not (marked and seen and sent and cnps):
                    ok = False
                    print(f"{name}: the marks did not come back as CNPs{notes}")
            failed = failed or not ok
            print(f"{'PASS' if ok else 'FAIL'} {name}: 2 x 100 checked {size}-byte pingpongs through one "
                  f"shaped port; port drops {drops}, round-trip samples {samples}, window cuts {cuts}{notes}",
                  flush=True)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
            topo.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
