#!/usr/bin/env python3
"""Writes the seed corpus of the `control` fuzz target (control_fuzz.cc):
conversations a real client has with uroced (hello, a context, QPs, keys,
resolution, XRC domains, a linger, goodbye) and a few a broken one has, so
the fuzzer starts from requests that get past the first checks. Run from anywhere:
    python3 tests/fuzz/gen_control_corpus.py
"""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "control")

# contract/control_protocol.h
HELLO, REGISTER, UNREGISTER, ALLOC_QPN, FREE_QPN, ALLOC_KEY, FREE_KEY = 1, 2, 3, 4, 5, 6, 7
RESOLVE, PING, OPEN_XRCD, LINGER, ID_WATCH = 8, 9, 10, 11, 12
# control_fuzz.cc's descriptor kinds
NONE, SEG, SEG_UNSEALED, SEG_TINY, SEG_BAD_MAGIC, SEG_WSEALED = 0, 1, 2, 3, 4, 5
PIPE, DEVNULL, UDP, UDP_CONNECTED, UNIX = 6, 7, 8, 9, 10


def request(type_, ctx_id=0, qpn=0, slot=0, off=0, arg=(0, 0, 0, 0)):
    # struct Request: type, version, pid, ctx_id, qpn, slot, off, arg[4]
    return struct.pack("<IIiIIIQ4I", type_, 2, 0, ctx_id, qpn, slot, off, *arg)


def msg(conn, fd_kind, req, last_qpn=False):
    return bytes([0x80 if last_qpn else 0, conn, fd_kind]) + req


def raw(conn, fd_kind, body):
    return bytes([1, conn, fd_kind, len(body)]) + body


def open_(conn, trusted=True, pid=0):
    return bytes([3, conn, (0 if trusted else 2) | pid])


def close_(conn):
    return bytes([2, conn, 0])


def main():
    os.makedirs(OUT, exist_ok=True)
    life = (open_(0) + msg(0, NONE, request(HELLO)) + msg(0, SEG, request(REGISTER)) +
            msg(0, NONE, request(ALLOC_QPN, ctx_id=1, off=4096)) +
            msg(0, NONE, request(ALLOC_QPN, ctx_id=1, off=8192, slot=1)) +
            msg(0, NONE, request(ALLOC_KEY, ctx_id=1, slot=5)) +
            msg(0, NONE, request(RESOLVE), last_qpn=True) +
            msg(0, NONE, request(RESOLVE, slot=1), last_qpn=True) +
            msg(0, NONE, request(OPEN_XRCD, qpn=3, off=77)) +
            msg(0, NONE, request(ID_WATCH)) + msg(0, NONE, request(PING)) +
            msg(0, NONE, request(FREE_QPN), last_qpn=True) +
            msg(0, UDP_CONNECTED, request(LINGER, qpn=17, arg=(18, 100, 5, 0))) +
            msg(0, NONE, request(UNREGISTER, ctx_id=1)) + close_(0))
    two = (open_(0) + open_(1) + msg(0, SEG, request(REGISTER)) + msg(1, SEG, request(REGISTER)) +
           msg(1, NONE, request(ALLOC_QPN, ctx_id=2, off=4096)) +
           msg(0, NONE, request(RESOLVE), last_qpn=True) +
           msg(0, NONE, request(FREE_QPN), last_qpn=True) +
           msg(0, NONE, request(UNREGISTER, ctx_id=2)) + msg(0, NONE, request(OPEN_XRCD, qpn=1, off=1)) +
           msg(1, NONE, request(OPEN_XRCD, qpn=1, off=1)) + close_(1) +
           msg(0, NONE, request(ALLOC_QPN, ctx_id=1, off=1 << 20)))
    broken = (open_(0) + raw(0, NONE, b"\x01\x00\x00\x00") + open_(1) +
              raw(1, SEG, request(REGISTER) + b"extra") + open_(2) +
              msg(2, SEG_UNSEALED, request(REGISTER)) + msg(2, SEG_TINY, request(REGISTER)) +
              msg(2, SEG_BAD_MAGIC, request(REGISTER)) + msg(2, SEG_WSEALED, request(REGISTER)) +
              msg(2, PIPE, request(REGISTER)) + msg(2, DEVNULL, request(LINGER)) +
              msg(2, UDP, request(LINGER)) + msg(2, UNIX, request(HELLO)) +
              msg(2, NONE, request(13)) + msg(2, NONE, request(ALLOC_QPN, ctx_id=9, off=64)))
    refused = open_(0, trusted=False) + msg(0, SEG, request(HELLO)) + msg(0, NONE, request(PING))
    crowd = b"".join(open_(c, pid=1) for c in range(4)) + msg(3, SEG, request(REGISTER))
    for name, body in [("life", life), ("two_clients", two), ("broken", broken), ("refused", refused),
                       ("crowd", crowd)]:
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(body)


if __name__ == "__main__":
    main()
