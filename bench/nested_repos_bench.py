#!/usr/bin/env python3
"""What the guard of nested repositories costs a command.

After each command the session's tracker looks again at every repository
it knows under the roots (their config files and hooks, see
forge-tools/src/git_guard/guard.rs). This makes projects holding 0 and
each of --repos nested repositories (`git init`, a config with a few
settings, git's sample hooks), and measures through a real `forged` and
the in-tree mock the median wall time of a turn whose only call is a
command that rewrites two files, against the same turn in the project
with none, alternating. Run it with and without --scan (commands then
recorded by scanning, FORGE_REWIND_SCAN=1).

Usage: python3 bench/nested_repos_bench.py [--repos 50,200,1000] [--commands 9]
                                           [--scan] [--no-build] [--bin-dir DIR]
"""

import argparse
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from repo_bench import Forge, binaries_args, command, parse_and_build  # noqa: E402


def project(base, repos):
    path = os.path.join(base, f"p{repos}")
    os.makedirs(os.path.join(path, "bench"))
    for name in ("a.txt", "b.txt"):
        with open(os.path.join(path, "bench", name), "w") as f:
            f.write("start\n")
    for i in range(repos):
        sub = os.path.join(path, "vendor", f"r{i}")
        os.makedirs(sub)
        subprocess.run(["git", "init", "-q", sub], check=True)
        subprocess.run(["git", "-C", sub, "config", "user.name", "bench"], check=True)
        subprocess.run(["git", "-C", sub, "config", "core.hooksPath", ".husky"], check=True)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repos", default="50,200,1000")
    ap.add_argument("--commands", type=int, default=9)
    ap.add_argument("--scan", action="store_true")
    binaries_args(ap)
    a = parse_and_build(ap)
    forge = Forge(a.bin_dir, a.scan)
    try:
        none = project(forge.tmp, 0)
        forge.ctl("session", "new", "--name", "none", "--cwd", none)
        forge.ctl("send", "--auto-approve", "-s", "none", command("none", 0))
        print(f"{'nested repositories':>20} {'turn, none (ms)':>16} {'turn, with (ms)':>16} {'added (ms)':>11}")
        for n in [int(x) for x in a.repos.split(",")]:
            name = f"r{n}"
            forge.ctl("session", "new", "--name", name, "--cwd", project(forge.tmp, n))
            # The first command scans and learns every repository.
            forge.ctl("send", "--auto-approve", "-s", name, command(name, 0))
            base, with_ = [], []
            for i in range(1, a.commands + 1):
                base.append(forge.ctl("send", "--auto-approve", "-s", "none", command("none", n * 1000 + i))[0])
                with_.append(forge.ctl("send", "--auto-approve", "-s", name, command(name, i))[0])
            b, w = statistics.median(base) * 1000, statistics.median(with_) * 1000
            print(f"{n:>20} {b:>16.1f} {w:>16.1f} {w - b:>11.1f}")
    finally:
        forge.stop()


if __name__ == "__main__":
    main()
