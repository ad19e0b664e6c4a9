#!/usr/bin/env python3
"""pair_frames.py PCAP: pairs the frames a uroce capture holds twice.

Two processes of one host capturing (uroce capture, UROCE_CAPTURE) record
each RoCE packet once as sent (source MAC 02:00:00:00:00:01) and once as
received (02:00:00:00:00:02). Every received frame must be a copy of a sent
one (same bytes from the BTH to the ICRC), and every sent one received,
except at the very end of a flow, where a QP's process has let it go and
uroced's linger answers for it (uroced captures nothing):
- a sent frame may lack its received copy only if nothing sent to the same
  destination QP after it was received (a tail probe or retransmission that
  reached the socket after its process had read the original and let go:
  under load the original may be read only after the probes were sent);
- a received plain ACK may lack a sent copy if its bytes are those of an ACK
  that was sent (the linger repeats the QP's last ACK for a duplicate).

Prints "N paired, M sent at the end unreceived, L linger ACKs, K bad" and
exits 1 if K > 0 or N == 0. Standard library only.
"""
import struct
import sys
from collections import defaultdict

SENT = bytes.fromhex("020000000001")
RECV = bytes.fromhex("020000000002")


def frames(path):
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack("<I", data[:4])[0]
    if magic in (0xA1B2C3D4, 0xA1B23C4D):
        end, nano = "<", magic == 0xA1B23C4D
    else:
        end, nano = ">", struct.unpack(">I", data[:4])[0] == 0xA1B23C4D
    at = 24
    while at + 16 <= len(data):
        sec, frac, incl, _ = struct.unpack(end + "IIII", data[at:at + 16])
        at += 16
        pkt = data[at:at + incl]
        at += incl
        yield sec + frac / (1e9 if nano else 1e6), pkt


def roce(pkt):
    """(source MAC, BTH.. ICRC bytes, destination QP) of an Ethernet frame."""
    et = pkt[12:14]
    ip = 14
    if et == b"\x08\x00":
        udp = ip + (pkt[ip] & 0xF) * 4
    elif et == b"\x86\xdd":
        udp = ip + 40
    else:
        return None
    ib = pkt[udp + 8:]
    if len(ib) < 12:
        return None
    return pkt[6:12], ib, int.from_bytes(ib[5:8], "big")


def is_plain_ack(ib):
    """An RC ACKNOWLEDGE: BTH, AETH, ICRC, no payload."""
    return (ib[0] & 0x1F) == 0x11 and len(ib) == 12 + 4 + 4


def main():
    sent = defaultdict(list)  # bytes -> [(time, dqp)], not yet paired
    ever_sent = set()
    recv = []
    for t, pkt in frames(sys.argv[1]):
        r = roce(pkt)
        if not r:
            continue
        src, ib, dqp = r
        if src == SENT:
            sent[ib].append((t, dqp))
            ever_sent.add(ib)
        elif src == RECV:
            recv.append(ib)
    paired = bad = linger = 0
    last_paired_send = defaultdict(lambda: float("-inf"))  # dqp -> time
    for ib in recv:
        if sent[ib]:
            t, dqp = sent[ib].pop(0)
            last_paired_send[dqp] = max(last_paired_send[dqp], t)
            paired += 1
        elif is_plain_ack(ib) and ib in ever_sent:
            linger += 1
        else:
            bad += 1
            print("received, never sent: dqp=0x%06x psn=%d" % (int.from_bytes(ib[5:8], "big"),
                                                                int.from_bytes(ib[9:12], "big")))
    at_end = 0
    for ib, left in sent.items():
        for t, dqp in left:
            if last_paired_send[dqp] > t:
                bad += 1
                print("sent, never received, though its QP received what was sent after it: dqp=0x%06x psn=%d"
                      % (dqp, int.from_bytes(ib[9:12], "big")))
            else:
                at_end += 1
    print("%d paired, %d sent at the end unreceived, %d linger ACKs, %d bad" % (paired, at_end, linger, bad))
    return 1 if bad or not paired else 0


if __name__ == "__main__":
    sys.exit(main())
