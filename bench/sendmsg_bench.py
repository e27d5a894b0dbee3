#!/usr/bin/env python3
"""What the sandbox's check of sends costs a confined program.

Confined commands' `sendmsg` calls are answered by the command's init (it
checks the socket and lets a single-threaded sender's send go on, or
performs the send itself, see forge-tools/src/confine/sends.rs). This runs
`forged __forge-probe tcp-sendmsg MIB KIB [fork]` (loopback TCP to itself
with `sendmsg`, KIB KiB per call; the reader a thread of the sender, or
with fork a process of its own) confined, as the model's `run_command`
through a real `forged` and the in-tree mock, and unconfined, alternating,
and prints the median throughputs and their ratio for each chunk size and
both kinds of sender.

Usage: python3 bench/sendmsg_bench.py [--runs 7] [--mib 512] [--chunks 64,128,1024]
                                      [--no-build] [--bin-dir DIR]
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from repo_bench import Forge, binaries_args, parse_and_build  # noqa: E402

RATE = re.compile(r"throughput ([0-9.]+) MiB/s")


def confined(forge, session, line):
    directive = "mock:tool=run_command:" + json.dumps({"command": line}, separators=(",", ":")).replace(" ", "\\u0020")
    forge.ctl("send", "-s", session, directive + " go")
    _, out = forge.ctl("--json", "history", session)
    tool = [m for m in map(json.loads, out.splitlines()) if m.get("role") == "tool"][-1]
    m = RATE.search(tool.get("text", ""))
    if not m:
        sys.exit(f"the confined probe failed: {tool.get('text', '')[:400]}")
    return float(m.group(1))


def unconfined(argv):
    out = subprocess.run(argv, stdout=subprocess.PIPE, text=True, check=True).stdout
    return float(RATE.search(out).group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--mib", type=int, default=512)
    ap.add_argument("--chunks", default="64,128,1024")
    binaries_args(ap)
    a = parse_and_build(ap)
    forge = Forge(a.bin_dir, False)
    project = tempfile.mkdtemp(prefix="forge-sendmsg-bench-")
    try:
        _, out = forge.ctl("--json", "session", "new", "--cwd", project)
        session = json.loads(out.splitlines()[0])["id"]
        _, status = forge.ctl("sandbox")
        print(status.strip().splitlines()[0] if status.strip() else "sandbox: ?", flush=True)
        for kib, fork in [(int(c), f) for f in (True, False) for c in a.chunks.split(",")]:
            argv = [os.path.join(a.bin_dir, "forged"), "__forge-probe", "tcp-sendmsg", str(a.mib), str(kib)]
            argv += ["fork"] if fork else []
            inside, outside = [], []
            for _ in range(a.runs):
                outside.append(unconfined(argv))
                inside.append(confined(forge, session, " ".join(argv)))
            i, o = statistics.median(inside), statistics.median(outside)
            sender = "single-threaded" if fork else "multi-threaded "
            print(f"{sender} {kib:>5} KiB per sendmsg: confined {i:,.0f} MiB/s, unconfined {o:,.0f} MiB/s, "
                  f"ratio {i / o:.2f} (medians of {a.runs})", flush=True)
    finally:
        forge.stop()


if __name__ == "__main__":
    main()
