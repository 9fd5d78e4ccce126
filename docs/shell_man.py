#!/usr/bin/env python3
"""Writes the agentmem(1) man page from docs/shell.md.

Usage: shell_man.py SHELL_MD VERSION OUT_1 [GO_MD2MAN]

The man page is docs/shell.md itself, reshaped and then turned into roff by
go-md2man (Debian's go-md2man package):
- a title block and a NAME section replace the document's title, and the text
  before the first section becomes DESCRIPTION;
- each "## Section" becomes a man section (.SH, upper case), each
  "### Subsection" a subsection (.SS);
- each table row becomes a tagged paragraph (its first cell the tag, the
  others the text), since the tables' long cells do not fit a terminal;
- links become their text (a man page has nowhere to follow them);
- in the roff, a line of a preformatted block that starts with "." or "'" is
  escaped, so that troff prints it instead of reading it as a request.
"""

import re
import subprocess
import sys

NAME = "agentmem - the shell of agentmem, a single-file database for AI-agent memory"
LINK = re.compile(r"\[([^\]]+)\]\([^)\s]+\)")
CELL_SPLIT = re.compile(r"(?<!\\)\|")
SEPARATOR = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")


def cells(row):
    """The cells of a Markdown table row, with escaped pipes unescaped."""
    parts = CELL_SPLIT.split(row.strip())[1:-1]
    return [p.strip().replace("\\|", "|") for p in parts]


def table_as_tags(rows):
    """Markdown table rows (header, separator, body) as a definition list."""
    out = []
    for row in rows[2:]:
        first, *rest = cells(row)
        out += [first, ": " + "; ".join(c for c in rest if c), ""]
    return out


def man_markdown(text, version):
    lines = text.splitlines()
    if not lines or not lines[0].startswith("# "):
        raise SystemExit("shell_man.py: docs/shell.md must start with its '# ' title")
    out = [f'% AGENTMEM 1 "" "agentmem {version}" "User Commands"', "",
           "# NAME", NAME, "", "# DESCRIPTION"]
    fenced = False
    table = []
    for line in lines[1:] + [""]:
        if not fenced and line.startswith("|"):
            table.append(line)
            continue
        if table:
            if len(table) < 2 or not SEPARATOR.match(table[1]):
                raise SystemExit(f"shell_man.py: not a table: {table[0]}")
            out += table_as_tags(table)
            table = []
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("## "):
            line = "# " + line[3:].upper()
        if not fenced:
            line = LINK.sub(r"\1", line)
        out.append(line)
    return "\n".join(out) + "\n"


def escape_preformatted(roff):
    """Escapes the control characters that start lines inside .nf/.fi blocks."""
    out = []
    nofill = False
    for line in roff.splitlines():
        if line == ".nf":
            nofill = True
        elif line == ".fi":
            nofill = False
        elif nofill and line[:1] in (".", "'"):
            line = "\\&" + line
        out.append(line)
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) not in (4, 5):
        raise SystemExit("usage: shell_man.py SHELL_MD VERSION OUT_1 [GO_MD2MAN]")
    with open(argv[1], encoding="utf-8") as f:
        markdown = man_markdown(f.read(), argv[2])
    md2man = argv[4] if len(argv) == 5 else "go-md2man"
    roff = subprocess.run([md2man], input=markdown, capture_output=True, text=True,
                          check=True).stdout
    with open(argv[3], "w", encoding="utf-8") as f:
        f.write(escape_preformatted(roff))


if __name__ == "__main__":
    main(sys.argv)
