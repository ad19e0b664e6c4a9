#!/usr/bin/env python3
"""The environment variables uroce reads are listed once: the README's table
"Environment variables" (name, read by, default, meaning). This checks it
against the code and the places made from it:

  1. every getenv("NAME") in src/ and tools/ has a row, and every row names a
     variable the code reads (a getenv whose name is not a string literal
     fails: the check could not see it);
  2. each row's default is the code's: DEFAULTS below finds it in the code
     (a rule per variable, searched in every file of src/ and tools/, so files
     may move); a variable without a default value must say "unset";
  3. <uroce/uroce.h>'s UROCE_ENV_* macros name exactly the UROCE_* and
     UROCED_* variables the code reads;
  4. the ENVIRONMENT sections of man/uroce.7 and man/uroced.8 are what
     man/env_section.py makes from the table.

Usage: env_table_test.py <source dir>
"""
import pathlib
import re
import sys

# How the code states each variable's default: a regular expression (searched
# in each file of src/ and tools/ on its own, DOTALL) and what its match means,
# in the README's terms. None: the variable has no default value (the README
# says "unset" and its meaning says what happens then). A rule that no longer
# matches fails the test: look at the code, then fix the rule or the table.
DEFAULTS = {
    "UROCE_LOG": (r'getenv\("UROCE_LOG"\);\s*if \(!s \|\| !\*s\) return LogLevel::k(\w+);',
                  lambda m: m.group(1).lower()),
    "UROCE_NETDEVS": None,
    "UROCE_DAEMON_NAME": (r'getenv\("UROCE_DAEMON_NAME"\).{0,120}?return "uroce/([\w-]+)" \+ '
                          r'std::to_string\(getuid\(\)\);', lambda m: m.group(1) + "<uid>"),
    "UROCE_UROCED": None,
    "UROCED_IDLE_MS": (r'idle_ms = (\d+);\s*if \(const char\* s = getenv\("UROCED_IDLE_MS"\)\)',
                       lambda m: int(m.group(1))),
    "UROCED_TRUST_GID": None,
    "UROCE_MR_SHARE": (r'getenv\("UROCE_MR_SHARE"\);\s*n->enabled = !\(e && strcmp\(e, "0"\) == 0\);',
                       lambda m: 1),
    "UROCE_MR_SHARE_MAX": (r'constexpr uint64_t kDefaultMaxShare = (\d+)ull << (\d+);.*'
                           r'uint64_t max_bytes = kDefaultMaxShare;.*getenv\("UROCE_MR_SHARE_MAX"\)',
                           lambda m: int(m.group(1)) << int(m.group(2))),
    "UROCE_CQ_FENCE": (r'getenv\("UROCE_CQ_FENCE"\);.{0,200}?\(force && strcmp\(force, "1"\) == 0\)',
                       lambda m: 0),
    "UROCE_EAGER": (r'getenv\("UROCE_EAGER"\);\s*return !\(v && strcmp\(v, "0"\) == 0\);', lambda m: 1),
    "UROCE_LINK": (r'getenv\("UROCE_LINK"\);\s*if \(!e \|\| !\*e \|\| !strcmp\(e, "(\w+)"\)\) '
                   r'return LinkChoice::kAuto;', lambda m: m.group(1)),
    "UROCE_LINK_XDP": (r'XdpUse xdp = XdpUse::k(\w+);\s*// UROCE_LINK_XDP',
                       lambda m: {"Never": 0, "WhenLent": 1, "Required": "require"}.get(m.group(1))),
    "UROCE_CM_RESPONSE_TIMEOUT": (r'struct CmTiming \{\s*uint8_t response_timeout = (\d+);',
                                  lambda m: int(m.group(1))),
    "UROCE_CM_RETRIES": (r'struct CmTiming \{\s*uint8_t response_timeout = \d+;\s*uint8_t max_retries = (\d+);',
                         lambda m: int(m.group(1))),
    "UROCE_CC": (r'bool enabled = (true|false);', lambda m: 1 if m.group(1) == "true" else 0),
    "UROCE_CC_TARGET_US": (r'uint64_t target_queue_ns = ([\d\']+);', lambda m: int(m.group(1).replace("'", "")) // 1000),
    "UROCE_SR": (r'bool selective = (true|false);\s*// UROCE_SR', lambda m: 1 if m.group(1) == "true" else 0),
    "UROCE_REORDER_US": (r'uint64_t reorder_ns = ([\d\']+);\s*// UROCE_REORDER_US',
                         lambda m: int(m.group(1).replace("'", "")) // 1000),
    "UROCE_FAULTS": None,
    "UROCE_TRACE": None,
    "UROCE_CAPTURE": None,
    "VERBS_LOG_LEVEL": (r'constexpr uint32_t kVerbsLogNone = (\d+);.*getenv\("VERBS_LOG_LEVEL"\);\s*'
                        r'if \(env == nullptr \|\| \*env == \'\\0\'\) return kVerbsLogNone;',
                        lambda m: int(m.group(1))),
    "SYSFS_PATH": (r'getenv\("SYSFS_PATH"\);\s*if \(env == nullptr\) env = "([^"]+)";', lambda m: m.group(1)),
    "TMPDIR": (r'getenv\("TMPDIR"\);\s*std::string dir = std::string\(tmp && \*tmp \? tmp : "([^"]+)"\)',
               lambda m: m.group(1)),
}

UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def readme_default(cell):
    """A default cell of the table as a value: "unset" -> None, `3000` -> 3000, `1 GiB` -> 2**30."""
    if cell == "unset":
        return None
    m = re.fullmatch(r"`([^`]+)`", cell)
    if not m:
        return ("malformed", cell)
    v = m.group(1)
    if re.fullmatch(r"\d+", v):
        return int(v)
    m = re.fullmatch(r"(\d+) (KiB|MiB|GiB)", v)
    if m:
        return int(m.group(1)) * UNITS[m.group(2)]
    return v


def main(root):
    root = pathlib.Path(root)
    sys.path.insert(0, str(root / "man"))
    import env_section  # the table's parser, shared with the man pages' generator

    fail = []
    sources = sorted(p for d in ("src", "tools") for p in (root / d).rglob("*")
                     if p.suffix in (".c", ".cc", ".h") and p.is_file())
    texts = {p: p.read_text(errors="replace") for p in sources}
    code = {}
    for p, t in texts.items():
        for m in re.finditer(r"\bgetenv\s*\(\s*([^)]*)\)", t):
            arg = m.group(1).strip()
            lit = re.fullmatch(r'"([A-Za-z_][A-Za-z0-9_]*)"', arg)
            line = t.count("\n", 0, m.start()) + 1
            if lit:
                code.setdefault(lit.group(1), []).append(f"{p.relative_to(root)}:{line}")
            else:
                fail.append(f"{p.relative_to(root)}:{line}: getenv({arg}): not a string literal, so this "
                            "check cannot see which variable it reads")
    if not code:
        fail.append("no getenv found in src/ and tools/: the check itself is broken")

    rows = {name: (read_by, default) for name, read_by, default, _ in env_section.readme_rows(root)}
    for name in sorted(code.keys() - rows.keys()):
        fail.append(f"{name}: read by the code ({', '.join(code[name])}) but not in README.md's table")
    for name in sorted(rows.keys() - code.keys()):
        fail.append(f"{name}: in README.md's table but the code never reads it")

    checked = 0
    for name in sorted(rows.keys() & code.keys()):
        want = readme_default(rows[name][1])
        if isinstance(want, tuple):
            fail.append(f"{name}: README.md's default cell {want[1]!r} is neither `value` nor unset")
            continue
        if name not in DEFAULTS:
            fail.append(f"{name}: no rule in DEFAULTS (tests/unit/style/env_table_test.py) says where the "
                        "code states its default; add one")
            continue
        rule = DEFAULTS[name]
        if rule is None:
            if want is not None:
                fail.append(f"{name}: README.md's default is {rows[name][1]}, but the code has no default "
                            "value for it (DEFAULTS says unset)")
            continue
        regex, meaning = rule
        found = {}
        for p, t in texts.items():
            for m in re.finditer(regex, t, re.S):
                found.setdefault(meaning(m), []).append(str(p.relative_to(root)))
        if not found:
            fail.append(f"{name}: the code no longer states its default as DEFAULTS expects "
                        f"(/{regex}/ matches nowhere): read the code, then fix the rule or the table")
        elif len(found) > 1:
            fail.append(f"{name}: the code states several defaults: {found}")
        else:
            (have, where), = found.items()
            if have != want:
                fail.append(f"{name}: default {have!r} in the code ({', '.join(where)}), "
                            f"README.md says {rows[name][1]}")
            else:
                checked += 1

    header = (root / "include/uroce/uroce.h").read_text()
    macros = set(re.findall(r'^#define UROCE_ENV_\w+ "(\w+)"$', header, re.M))
    ours = {n for n in code if n.startswith(("UROCE_", "UROCED_"))}
    for name in sorted(ours - macros):
        fail.append(f"{name}: read by the code, no UROCE_ENV_* macro in include/uroce/uroce.h")
    for name in sorted(macros - ours):
        fail.append(f"{name}: a UROCE_ENV_* macro in include/uroce/uroce.h, but the code never reads it")

    if env_section.main(["--check", str(root)]) != 0:
        fail.append("man pages: the ENVIRONMENT sections differ from README.md's table "
                    "(diff above; run man/env_section.py)")

    for f in fail:
        print("FAIL:", f)
    if not fail:
        print(f"{len(code)} variables: the code, README.md's table, include/uroce/uroce.h and the man pages "
              f"agree; {checked} defaults checked against the code, {len(code) - checked} unset")
    return 1 if fail else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
