#!/usr/bin/env python3
"""Lists the functions Forge's binaries ran while being profiled, one symbol
per line, for lld's --symbol-ordering-file (used by scripts/pgo-build.sh).

The kernel maps a binary's code in 64 KiB windows around each page a process
touches, so a function that runs among ones that never do costs a whole
window of resident memory. Listed functions are laid out together instead.

Two sources:
  - the merged PGO profile, as printed by `llvm-profdata show --all-functions
    --counts` (stdin): every Rust function compiled in this workspace or its
    dependencies. A function ran when any of its counters is non-zero: the
    counters sit on the edges outside a spanning tree, so any run moves one.
  - callgrind output files (arguments), optional: the same turns run under
    valgrind also name the code the profile cannot see, the prebuilt
    standard library and the C libraries (SQLite above all). Only functions
    of the binaries in --bin-dir are kept.

Most-run first, then the rest; what matters is that they are together.
"""

import argparse
import os
import re
import sys


def profiled(lines):
    """(count, symbol) of each function the profile saw run."""
    ran, name = [], None
    for line in lines:
        if line.startswith("  ") and not line.startswith("   ") and line.rstrip().endswith(":"):
            # Names local to a codegen unit come as "cgu;symbol".
            name = line.strip()[:-1].split(";")[-1]
        elif line.startswith("    Block counts:") and name:
            top = max((int(n) for n in re.findall(r"\d+", line)), default=0)
            if top:
                ran.append((top, name))
            name = None
    return ran


def traced(path, bin_dir):
    """Symbols callgrind saw run (or be called) in a binary under bin_dir."""
    objects, functions, found = {}, {}, set()
    caller_object = callee_object = None
    with open(path, errors="replace") as f:
        for line in f:
            m = re.match(r"(c?ob)=\((\d+)\)(?: (.*))?", line)
            if m:
                kind, key, name = m.groups()
                if name:
                    objects[key] = name.strip()
                if kind == "ob":
                    caller_object = callee_object = objects.get(key)
                else:
                    callee_object = objects.get(key)
                continue
            m = re.match(r"(c?fn)=\((\d+)\)(?: (.*))?", line)
            if not m:
                continue
            kind, key, name = m.groups()
            if name:
                functions[key] = name.strip()
            obj = caller_object if kind == "fn" else callee_object
            # A call's object is named only when it differs from the caller's.
            callee_object = caller_object
            name = functions.get(key)
            if obj and name and os.path.dirname(obj) == bin_dir and not name.startswith("0x"):
                # Clones ("f'2") are one symbol.
                found.add(name.split("'")[0])
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin-dir", required=True, help="the directory of the profiled binaries")
    ap.add_argument("callgrind", nargs="*", help="callgrind.out files")
    a = ap.parse_args()
    bin_dir = os.path.realpath(a.bin_dir)
    seen = set()
    for _, name in sorted(profiled(sys.stdin), key=lambda t: -t[0]):
        if name not in seen:
            seen.add(name)
            print(name)
    extra = set()
    for path in a.callgrind:
        extra |= traced(path, bin_dir)
    for name in sorted(extra - seen):
        print(name)
    print(f"{len(seen)} functions from the profile, {len(extra - seen)} more from callgrind", file=sys.stderr)


if __name__ == "__main__":
    main()
