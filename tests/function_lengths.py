#!/usr/bin/env python3
"""tests/function_lengths.py -- no function of engine/ runs over 100 lines.

Counts the lines of every function body defined at namespace or class level
(lambdas inside a function count toward it), skipping comments and string
literals, in the C++ files given (default: engine/). Prints one line per case
and the total in the form run_all.sh counts:
"[functions] test cases: N | P passed | F failed" (one case per file).

Usage: tests/function_lengths.py [--max N] [FILE...]
"""
import glob
import re
import sys


def strip(src):
    """src with comments and string/char literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(src)
    while i < n:
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif src.startswith("/*", i):
            j = src.find("*/", i) + 2
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif src[i] in "\"'":
            q = src[i]
            if q == '"' and i > 0 and src[i - 1] == "R":
                m = re.match(r'R"([^(]*)\(', src[i - 1:])
                j = src.find(")" + m.group(1) + '"', i) + len(m.group(1)) + 2
            else:
                j = i + 1
                while src[j] != q:
                    j += 2 if src[j] == "\\" else 1
                j += 1
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        else:
            out.append(src[i])
            i += 1
    return "".join(out)


HEAD = re.compile(r"(\)|\bconst|\bnoexcept|\boverride|\bfinal|\bmutable|->\s*[\w:<>]+)\s*$")
CONTROL = re.compile(r"\b(if|for|while|switch|catch)\s*\(.*\)\s*$")


def long_functions(path, limit):
    """[(lines, first line)] of the functions of `path` longer than `limit` lines."""
    s = strip(open(path, encoding="utf-8").read())
    stack, found, line = [], [], 1
    for i, c in enumerate(s):
        if c == "\n":
            line += 1
        elif c == "{":
            in_function = any(kind == "f" for kind, _ in stack)
            before = s[max(0, i - 200):i].rstrip()
            is_function = (not in_function and HEAD.search(before) is not None
                           and not CONTROL.search(before.split("\n")[-1]))
            stack.append(("f" if is_function else "o", line))
        elif c == "}" and stack:
            kind, start = stack.pop()
            if kind == "f" and line - start + 1 > limit:
                found.append((line - start + 1, start))
    return found


def main(argv):
    limit = 100
    if len(argv) > 1 and argv[1] == "--max":
        limit = int(argv[2])
        argv = argv[:1] + argv[3:]
    # Other options (run_all.sh passes doctest's --no-intro) are ignored.
    files = [a for a in argv[1:] if not a.startswith("--")] or sorted(glob.glob("engine/**/*.cc", recursive=True) +
                               glob.glob("engine/**/*.h", recursive=True))
    passed = failed = 0
    for f in files:
        found = long_functions(f, limit)
        if found:
            failed += 1
            for lines, start in found:
                print("not ok - %s:%d: a function of %d lines (at most %d)" % (f, start, lines, limit))
        else:
            passed += 1
    print("ok - %d files, no function over %d lines" % (passed, limit) if failed == 0 else
          "%d of %d files hold a function over %d lines" % (failed, passed + failed, limit))
    print("[functions] test cases: %d | %d passed | %d failed" % (passed + failed, passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
