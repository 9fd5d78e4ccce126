#!/usr/bin/env python3
"""tests/layering_test.py -- the include layering, checked on the real build.

For each layer, one of its source files is compiled again with the exact
command meson gives it (BUILD/compile_commands.json), with -fsyntax-only, on a
file that includes a header of a layer above it: the compiler must report
that header missing. A control includes a header the layer may use: it must
compile. Prints one line per case and the total in the form run_all.sh
counts: "[layering] test cases: N | P passed | F failed".

Usage: tests/layering_test.py BUILD_DIR
"""
import json
import os
import shlex
import subprocess
import sys
import tempfile

# (layer, a source file of it, headers it must not reach, a header it may use)
CASES = [
    ("format", "format/page.cc", ["index/text/bm25.h", "engine/storage/log.h"], "format/page.h"),
    ("index", "index/text/bm25.cc", ["engine/storage/log.h", "engine/memory/database.h"],
     "format/status.h"),
    ("engine/storage", "engine/storage/log.cc",
     ["engine/memory/database.h", "engine/sql/session.h", "engine/capi/capi_internal.h",
      "engine/json/json_writer.h", "sql/session.h", "memory/database.h"], "engine/env/env.h"),
    ("engine/json", "engine/json/json_writer.cc",
     ["engine/memory/database.h", "engine/storage/log.h"], "engine/json/json_reader.h"),
    ("engine/memory", "engine/memory/database.cc",
     ["engine/sql/session.h", "engine/capi/capi_internal.h", "sql/session.h"],
     "engine/storage/log.h"),
    ("engine/sql", "engine/sql/session.cc", ["engine/capi/capi_internal.h"],
     "engine/memory/database.h"),
    ("engine/capi", "engine/capi/capi.cc", [], "engine/sql/session.h"),
]


def command_for(entries, build, source):
    for e in entries:
        path = os.path.normpath(os.path.join(e["directory"], e["file"]))
        if path.endswith(os.sep + source) or path == os.path.abspath(source):
            return e
    return None


def compiles(entry, header):
    """(ok, stderr) of compiling a file that includes `header` as entry's file would be."""
    args = shlex.split(entry["command"])
    src = os.path.normpath(os.path.join(entry["directory"], entry["file"]))
    with tempfile.NamedTemporaryFile("w", suffix=".cc", delete=False) as f:
        f.write('#include "%s"\n' % header)
        probe = f.name
    try:
        out = []
        skip = False
        for a in args:
            if skip:
                skip = False
                continue
            if a in ("-o", "-MF", "-MQ"):
                skip = True
                continue
            if a in ("-MD", "-c"):
                continue
            if os.path.normpath(os.path.join(entry["directory"], a)) == src:
                continue
            out.append(a)
        out += ["-fsyntax-only", probe]
        r = subprocess.run(out, cwd=entry["directory"], capture_output=True, text=True)
        return r.returncode == 0, r.stderr
    finally:
        os.unlink(probe)


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    with open(os.path.join(build, "compile_commands.json")) as f:
        entries = json.load(f)
    passed = failed = 0

    def report(ok, text):
        nonlocal passed, failed
        print(("ok - " if ok else "not ok - ") + text)
        if ok:
            passed += 1
        else:
            failed += 1

    for layer, source, forbidden, allowed in CASES:
        entry = command_for(entries, build, source)
        if entry is None:
            report(False, "%s: no compile command for %s in %s" % (layer, source, build))
            continue
        ok, err = compiles(entry, allowed)
        report(ok, "%s may include %s%s" % (layer, allowed, "" if ok else ":\n" + err))
        for header in forbidden:
            ok, err = compiles(entry, header)
            missing = not ok and (header + ": No such file") in err
            report(missing, "%s cannot include %s%s" %
                   (layer, header, "" if missing else " (it compiled, or failed otherwise:\n%s)" % err))
    print("[layering] test cases: %d | %d passed | %d failed" % (passed + failed, passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
