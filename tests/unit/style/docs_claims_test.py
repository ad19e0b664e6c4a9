#!/usr/bin/env python3
"""Docs are a reference (issue 30): each describes what is, for a user or a
maintainer. History and measurement logs belong in bench/RESULTS.md's "Why"
section or the commit log, plans nowhere. This fails on the phrases that
mark a plan or a history, and on false claims that were corrected once and
must not come back (each with the reason it is false, from the code).

Every rule carries a sample of the text it exists to catch, and the test
first checks that the rule still matches its sample, so a broken regular
expression fails instead of passing silently.

Scanned: docs/*.md, README.md, bench/README.md, the man pages, the public
header, and the one code comment that made a false claim (src/daemon/
cm_service.h). Not bench/RESULTS.md: its "Why" section is where measurement
history goes.

Usage: docs_claims_test.py <source dir>
"""
import pathlib
import re
import sys

DOCS = ["docs/*.md", "README.md", "bench/README.md"]
ALL = DOCS + ["man/*.1", "man/*.7", "man/*.8", "include/uroce/uroce.h", "src/daemon/cm_service.h"]

# (name, regex (case-insensitive, may span lines), files, why, sample it must match)
RULES = [
    # Plans and histories.
    ("state and plan", r"state and plan", ALL,
     "a doc is a reference, not a plan or a status report",
     "# The network link (RoCE v2 over UDP) — state and plan"),
    ("numbered work period", r"\b(?:work )?(?:session|period)s? \d+\b", ALL,
     "narrates history by numbered work periods: say what is, or move it to bench/RESULTS.md's Why",
     "## Where one direction of `ib_send_lat` goes (session 6, measured)"),
    ("next steps", r"^#+ *next\b|\bnext steps\b", ALL,
     "a plan: state what is missing as a limit, or leave it to the issue tracker",
     "## Next steps"),
    ("plan words", r"\b(?:not (?:built|done|implemented) yet|not yet (?:built|done|implemented)|"
                   r"nothing(?: \w+){0,2} yet|planned|to come|for now)\b", ALL,
     "a plan written into a reference: say what is (\"not offered\", \"keeps no counters\")",
     "| `libfmt-dev` | formatting for tools to come; nothing uses it yet |"),
    ("narrated history", r"\b(?:used to|at first|until this change|before this (?:change|work)|"
                         r"what was wrong|as built since|(?:since|until|before) issue \d+|"
                         r"found on the way|so far)\b|^\s*- before:", ALL,
     "history belongs in the commit log",
     "- Before: an IPv6 GID silently fell back to the shared-memory link"),
    ("issue in a heading", r"^#+ .*\bissue \d+", DOCS,
     "a heading names the topic, not the issue that built it",
     "## Who shares memory: one user's processes (issue 15, first step)"),
    ("date", r"\b20\d\d-\d\d-\d\d\b", DOCS,
     "a dated log entry: measurements with dates go to bench/RESULTS.md",
     "Measured on 2026-11-21 at commit `f5badfa`"),
    ("commit id", r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b", DOCS,
     "compares with a past commit: history (the commit log has it)",
     "| uroce_lo at d6939fc (before this work) | 80 | 2 | 4 | 187 |"),
    # False claims, corrected once; the code says otherwise.
    ("UROCE_NETDEVS: IPv4 only", r"IPv4 interfaces only|interfaces? that is up and has an IPv4 address(?! or)",
     ALL, "src/daemon/netdev.cc also takes an interface with an IPv6 address other than the link-local",
     " * \"lo,eth0\". Unset: every interface that is up and has an IPv4 address."),
    ("no librdmacm", r"\bno librdmacm\b", ALL, "uroce ships librdmacm.so.1 (src/rdmacm)",
     "RDMA CM. uroce has no librdmacm yet"),
    ("never sees Ethernet frames", r"never sees Ethernet frames", ALL,
     "the AF_XDP link moves whole Ethernet frames (src/link/xdp_link.cc)",
     "uroce is an RDMA NIC over UDP sockets and never sees Ethernet frames"),
    ("allocator clears every block", r"memset`?s the (?:\*\*)?whole(?: class)?", ALL,
     "Segment::alloc (src/memory/segment.cc) clears only recycled blocks; fresh ones stay untouched",
     "It then `memset`s the **whole class**, so every page of the block is touched"),
    ("RC QP costs 12 KiB", r"\| RC QP \| \*\*12 KiB|QP costs \*\*ring class \+ 4 KiB|own page = 12 KiB", ALL,
     "QpShm places come in chunks of 8 (Context::take_qp_slot): 512 B of a page, not a page",
     "| RC QP | **12 KiB** (8 KiB receive ring + the 4 KiB page holding its 128-byte `QpShm`) |"),
    ("wire CM not built", r"wire\s*(?://\s*)?CM is not built", ALL,
     "the wire CM is src/daemon/cm_wire.cc",
     "an address of no device here is UNREACHABLE (the wire\n// CM is not built yet)"),
    ("memory windows missing", r"memory windows are not implemented", ALL,
     "src/verbs/mw.cc implements them (docs/conformance.md)",
     "- Memory windows are not implemented; their verbs fail with `EOPNOTSUPP`."),
    ("RC window of 512", r"window of 512 unacknowledged", ALL,
     "RequesterConfig::window is 1,024 (src/transport/rc_requester.h)",
     "with a window of 512 unacknowledged packets"),
    ("forwarders in src/transport", r"src/transport/(?:net|ud)_forward", ALL,
     "net_forward and ud_forward are in src/core",
     "(`src/transport/net_forward.{h,cc}`)"),
]


def files(root, globs):
    out = []
    for g in globs:
        out += sorted(p for p in root.glob(g) if p.is_file())
    return out


def main(root):
    root = pathlib.Path(root)
    fail = []
    for name, regex, globs, why, sample in RULES:
        rx = re.compile(regex, re.I | re.M)
        if not rx.search(sample):
            fail.append(f"rule '{name}' no longer matches its own sample: the check is broken")
        for p in files(root, globs):
            text = p.read_text(errors="replace")
            for m in rx.finditer(text):
                line_no = text.count("\n", 0, m.start()) + 1
                line = text.splitlines()[line_no - 1]
                if p.suffix in (".1", ".7", ".8") and line.startswith(".TH "):
                    continue  # a man page's header carries its date
                fail.append(f"{p.relative_to(root)}:{line_no}: {name}: {why}\n    {line.strip()[:160]}")
    scanned = len({p for _, _, g, _, _ in RULES for p in files(root, g)})
    for f in fail:
        print("FAIL:", f)
    if not fail:
        print(f"{scanned} files, {len(RULES)} rules: no plan, history or known false claim")
    return 1 if fail else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
