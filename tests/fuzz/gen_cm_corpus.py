#!/usr/bin/env python3
"""Writes the seed corpus of the `cm` fuzz target (cm_fuzz.cc): the
conversations clients have with uroced's connection manager (a listener
and a client that connect, are accepted or rejected, establish, disconnect;
a request that comes before its listener; SIDR; a process that goes in the
middle), so the fuzzer starts from requests that get past the first checks.
Run from anywhere:
    python3 tests/fuzz/gen_cm_corpus.py
Inputs the fuzzer found a fault with are kept beside these (found_*).
"""
import os

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "cm")

# cm_fuzz.cc's actions and tables
REQ, RAW, CLOSE, OPEN, DRAIN, TIME = 0, 1, 2, 3, 4, 5
CREATE, DESTROY, BIND, LISTEN, CONNECT, ACCEPT, REJECT, ESTABLISH, DISCONNECT = range(9)
PS_TCP, PS_UDP = 0, 1
LO_7000, LO_ANY_PORT, ANY_7000, V6LO_7000, V6ANY_7000, FOREIGN_7000, LO_7001, BAD = range(8)


def req(conn, op, handle=0, ps=PS_TCP, src=LO_7000, dst=LO_7000, arg=0, pd=0):
    return bytes([REQ, conn, op, handle, ps, src, dst, arg, pd])


def act(a, conn, *extra):
    return bytes([a, conn, *extra])


def opened():
    return act(OPEN, 0) + act(OPEN, 1)


def listener(ps=PS_TCP, addr=LO_7000):
    # conn 0: id 1 bound to addr, listening
    return req(0, CREATE, ps=ps) + req(0, BIND, 1, ps, src=addr) + req(0, LISTEN, 1, ps, arg=4)


def client(ps=PS_TCP, dst=LO_7000):
    # conn 1: id 2 on an ephemeral port, connecting to dst (the server's id is 3)
    return req(1, CREATE, ps=ps) + req(1, BIND, 2, ps, src=LO_ANY_PORT) + req(1, CONNECT, 2, ps, dst=dst, pd=56)


SEEDS = {
    "accept_establish_disconnect": opened() + listener() + client() + req(0, ACCEPT, 3, pd=196)
    + req(1, ESTABLISH, 2) + act(DRAIN, 0) + act(DRAIN, 1) + req(1, DISCONNECT, 2) + req(0, DISCONNECT, 3)
    + req(1, DESTROY, 2) + req(0, DESTROY, 3) + act(CLOSE, 1) + act(CLOSE, 0),
    "reject": opened() + listener() + client() + req(0, REJECT, 3, pd=148) + act(DRAIN, 1),
    "no_listener_expires": opened() + client() + act(TIME, 0, 30) + act(TIME, 0, 30) + act(DRAIN, 1),
    "listener_after_request": opened() + client() + listener() + req(0, ACCEPT, 3)
    + req(1, ESTABLISH, 2),
    "wildcard_v6_listener": opened() + listener(addr=V6ANY_7000) + client() + req(0, ACCEPT, 3),
    "port_taken_twice": opened() + listener() + req(1, CREATE) + req(1, BIND, 2, src=ANY_7000)
    + req(1, BIND, 2, src=LO_7000),
    "sidr": opened() + listener(PS_UDP) + client(PS_UDP) + req(0, ACCEPT, 3, PS_UDP)
    + req(1, CONNECT, 2, PS_UDP) + act(DRAIN, 1),
    "client_dies_mid_handshake": opened() + listener() + client() + act(CLOSE, 1) + req(0, ACCEPT, 3),
    "server_dies_connected": opened() + listener() + client() + req(0, ACCEPT, 3)
    + req(1, ESTABLISH, 2) + act(CLOSE, 0) + act(DRAIN, 1),
    "foreign_destination": opened() + client(dst=FOREIGN_7000) + act(DRAIN, 1),
    "bad_addresses": opened() + req(0, CREATE) + req(0, BIND, 1, src=BAD) + req(0, CONNECT, 1, dst=BAD)
    + req(0, LISTEN, 9) + req(0, 10, 1),
    "raw_messages": opened() + act(RAW, 0, 3, 0) + b"\x01\x02\x03" + act(RAW, 1, 0xff, 1) + bytes(511),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print(f"wrote {len(SEEDS)} seeds to {OUT}")


if __name__ == "__main__":
    main()
