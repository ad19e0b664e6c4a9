#!/usr/bin/env python3
"""Writes the ENVIRONMENT sections of man/uroce.7 (every variable) and
man/uroced.8 (those uroced reads) from the README's table "Environment
variables", the one list of them: edit the table, then run this.

Usage: env_section.py [--check] [SOURCE_DIR]
  SOURCE_DIR defaults to this file's parent's parent. With --check nothing
  is written: the exit status is 1, with a diff, if a page differs from
  what would be written (style_env_table_test runs it so).
"""
import difflib
import pathlib
import re
import sys
import textwrap


def readme_rows(root):
    """(name, read_by, default, meaning) per row of the README's table."""
    text = (root / "README.md").read_text()
    m = re.search(r"^## Environment variables\n(.*?)(?=^## )", text, re.S | re.M)
    if not m:
        sys.exit("README.md has no section '## Environment variables'")
    rows = []
    for line in m.group(1).splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) != 4:
            sys.exit(f"README.md: not 4 cells (variable, read by, default, meaning): {line}")
        name = cells[0].strip("`")
        rows.append((name, cells[1], cells[2], cells[3]))
    if not rows:
        sys.exit("README.md's environment table has no rows")
    return rows


def roff(md):
    """Markdown of one table cell -> roff text (fonts, escapes)."""
    md = re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", md)  # links: their text
    out = []
    for i, part in enumerate(md.split("`")):
        part = part.replace("\\", "\\e")
        if i % 2:  # a code span: bold, its hyphens minus signs
            out.append("\\fB" + part.replace("-", "\\-") + "\\fR")
        else:
            out.append(part)
    s = "".join(out)
    return "".join(c if ord(c) < 128 else "\\[u%04X]" % ord(c) for c in s)


def lines(text):
    """Filled roff lines; none starts with a control character."""
    out = []
    for line in textwrap.wrap(text, 78, break_on_hyphens=False, break_long_words=False):
        out.append("\\&" + line if line[0] in ".'" else line)
    return out


def section(rows, intro):
    out = ['.\\" Generated from README.md\'s table by man/env_section.py: edit the table, then run it.']
    out += lines(intro)
    for name, read_by, default, meaning in rows:
        default_text = "unset" if default == "unset" else roff(default)
        text = roff(meaning)
        text = text[0].upper() + text[1:]
        if not text.endswith("."):
            text += "."
        out += [".TP", ".B " + name]
        out += lines(f"{text} Default: {default_text}. Read by: {roff(read_by)}.")
    return "\n".join(out) + "\n"


def replace_section(page_text, body):
    m = re.search(r"^\.SH ENVIRONMENT\n(.*?)(?=^\.SH )", page_text, re.S | re.M)
    if not m:
        sys.exit("no .SH ENVIRONMENT section followed by another section")
    return page_text[: m.start(1)] + body + page_text[m.end(1):]


def main(argv):
    check = "--check" in argv
    args = [a for a in argv if a != "--check"]
    root = pathlib.Path(args[0]) if args else pathlib.Path(__file__).resolve().parent.parent
    rows = readme_rows(root)
    pages = {
        "man/uroce.7": section(
            rows,
            "Every variable uroce reads (the README's table, from which this section is made). "
            "uroced inherits its environment from the process whose library starts it, so the "
            "variables it reads must be set there; a running uroced keeps its settings.",
        ),
        "man/uroced.8": section(
            [r for r in rows if "uroced" in r[1]],
            "What uroced reads, from the environment of the process whose library starts it "
            "(uroce(7) lists every variable).",
        ),
    }
    status = 0
    for rel, body in pages.items():
        path = root / rel
        old = path.read_text()
        new = replace_section(old, body)
        if old == new:
            continue
        if check:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True), rel,
                                                       rel + " (from README.md)"))
            status = 1
        else:
            path.write_text(new)
            print("wrote", rel)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
