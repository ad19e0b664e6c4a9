#!/usr/bin/env python3
"""Writes the seed corpus of the `transport` fuzz target (transport_fuzz.cc):
a configuration byte, then records [2-byte big-endian length][packet], the
packets in sequence from PSN 100 as the fuzz target's QPs expect them, so
the fuzzer starts deep inside the state machines. Run from anywhere:
    python3 tests/fuzz/gen_transport_corpus.py
"""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "transport")
VA, RKEY = 0x10000, 0x1234


def bth(op, psn, dqp=7, ack=False, se=False, payload_len=0):
    pad = (4 - payload_len % 4) % 4
    b0 = op
    b1 = (0x80 if se else 0) | (pad << 4)
    return struct.pack(">BBHI", b0, b1, 0xFFFF, dqp & 0xFFFFFF) + struct.pack(">I", (0x80000000 if ack else 0) | psn), pad


def pkt(op, psn, ext=b"", payload=b"", **kw):
    h, pad = bth(op, psn, payload_len=len(payload), **kw)
    return h + ext + payload + b"\0" * pad + b"\0\0\0\0"  # ICRC: not checked by decode


def reth(va, rkey, length):
    return struct.pack(">QII", va, rkey, length)


def aeth(syndrome, msn):
    return struct.pack(">I", syndrome << 24 | msn)


def records(cfg, packets):
    return bytes([cfg]) + b"".join(struct.pack(">H", len(p)) + p for p in packets)


def main():
    os.makedirs(OUT, exist_ok=True)
    pm = 256  # cfg % 5 == 0 -> PMTU 256
    cfg = 0 | (3 << 3)  # 3 receives
    seeds = {
        # RC requests: SEND first/middle/last, WRITE only, READ, FETCH_ADD, WRITE_IMM
        "rc_requests": [
            pkt(0x00, 100, payload=b"a" * pm),
            pkt(0x01, 101, payload=b"b" * pm),
            pkt(0x02, 102, payload=b"c" * 10, ack=True),
            pkt(0x0A, 103, reth(VA, RKEY, 64), b"w" * 64, ack=True),
            pkt(0x0C, 104, reth(VA, RKEY, 600), ack=True),
            pkt(0x14, 107, struct.pack(">QIQQ", VA + 8, RKEY, 5, 0), ack=True),
            pkt(0x0B, 108, reth(VA, RKEY, 16) + b"\0\0\0\x2a", b"i" * 16, ack=True),
            pkt(0x0C, 104, reth(VA, RKEY, 600), ack=True),  # duplicate READ
            pkt(0x02, 130, payload=b"gap", ack=True),  # a gap
        ],
        # responses to the requester's WQEs (SEND 3000 = 12 PSNs at 256, WRITE, READ ...)
        "rc_responses": [
            pkt(0x11, 111, aeth(0x1F, 1), dqp=9),
            pkt(0x11, 123, aeth(0x60, 2), dqp=9),  # NAK PSN sequence error
            pkt(0x11, 124, aeth(0x21, 2), dqp=9),  # RNR NAK
            pkt(0x0D, 124, aeth(0x1F, 3), b"r" * pm, dqp=9),
            pkt(0x0E, 125, payload=b"r" * pm, dqp=9),
            pkt(0x10, 130, aeth(0x1F, 3), b"r" * 100, dqp=9),  # READ response last, out of place
            pkt(0x12, 136, aeth(0x1F, 4) + struct.pack(">Q", 77), dqp=9),
        ],
        # UC: a message, a gap, a new message
        "uc_requests": [
            pkt(0x20, 100, payload=b"u" * pm),
            pkt(0x22, 101, payload=b"v" * 3),
            pkt(0x21, 105, payload=b"x" * pm),
            pkt(0x24, 106, payload=b"y" * 8),
            pkt(0x2A, 107, reth(VA, RKEY, 4), b"zzzz"),
        ],
        # UD: good and wrong Q_Key
        "ud_sends": [
            pkt(0x64, 1, struct.pack(">II", 0x11111111, 5), b"d" * 32),
            pkt(0x65, 2, struct.pack(">II", 0x11111111, 5) + b"\0\0\0\x01", b"e" * 8),
            pkt(0x64, 3, struct.pack(">II", 0x22222222, 5), b"f" * 8),
        ],
    }
    for name, packets in seeds.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(records(cfg, packets))
    # Everything in one stream, at another PMTU and depth.
    with open(os.path.join(OUT, "all"), "wb") as f:
        f.write(records(2 | (7 << 3) | (1 << 6), [p for ps in seeds.values() for p in ps]))


if __name__ == "__main__":
    main()
