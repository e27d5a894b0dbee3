#!/usr/bin/env python3
"""Forge rewind at repository scale.

Makes git repositories of N files (cached under target/bench-repos/, made
once), each with a gitignored build/ of N/10 files, and measures through a
real `forged` and `forgectl` against the in-tree mock provider:

- a turn whose only tool call is a command that rewrites two files, in a
  10-file directory (the plain turn) and in the repository: the median of
  --commands steady-state turns, and the overhead of the repository's;
- the session's first command on its own (the first scan);
- store growth per command (bytes of blobs added, against the bytes the
  command changed), and after --store-commands commands;
- `forgectl undo` of the last command, checking that the two files are
  back byte for byte (a command that was not recorded fails the run);
- the daemon's resident memory once the repository's session is recorded;
- `forgectl session new --git` beside `git worktree add` of the same
  repository, alternating, best of --git-runs.

Profiles: small (N files of about 200 bytes) and large (N/10 files of
64 KiB). --scan runs the daemon with FORGE_REWIND_SCAN=1: commands are
recorded by scanning the roots, as where the kernel cannot watch them.

Usage: python3 bench/repo_bench.py [--files 10000,100000,500000] [--profile small|large]
                                   [--commands 7] [--store-commands 100] [--git-runs 3]
                                   [--scan] [--no-build] [--bin-dir DIR] [--repos DIR]
"""

import argparse
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GIT_ENV = dict(GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@localhost",
               GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@localhost")


def make_repo(path, files, profile):
    """A repository of `files` files (and a gitignored build/), made once."""
    done = os.path.join(path, ".bench-complete")
    if os.path.exists(done):
        return
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    t = time.time()
    count, size = (files, 200) if profile == "small" else (files // 10, 64 * 1024)
    for i in range(count):
        d = os.path.join(path, "src", f"d{i // 10000}", f"e{(i // 100) % 100}")
        if i % 100 == 0:
            os.makedirs(d, exist_ok=True)
        line = f"// file {i}: some source text for the benchmark\n"
        with open(os.path.join(d, f"f{i}.rs"), "w") as f:
            f.write((line * (size // len(line) + 1))[:size])
    os.makedirs(os.path.join(path, "bench"))
    for name in ("a.txt", "b.txt"):
        with open(os.path.join(path, "bench", name), "w") as f:
            f.write("start\n")
    for i in range(files // 10):
        d = os.path.join(path, "build", f"o{i // 1000}")
        if i % 1000 == 0:
            os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"o{i}.o"), "w") as f:
            f.write("object\n")
    with open(os.path.join(path, ".gitignore"), "w") as f:
        f.write("build/\n")
    env = dict(os.environ, **GIT_ENV)
    subprocess.run(["git", "init", "-q", "-b", "main", path], check=True, env=env)
    subprocess.run(["git", "-C", path, "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", path, "commit", "-q", "-m", "bench"], check=True, env=env)
    open(done, "w").close()
    print(f"  made {path} in {time.time() - t:.0f} s", file=sys.stderr)


def binaries_args(ap):
    """--no-build and --bin-dir, shared by the benchmarks that run the release binaries."""
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--bin-dir", default=os.path.join(ROOT, "target", "release"))


def parse_and_build(ap):
    """The arguments; the release binaries built first unless --no-build."""
    a = ap.parse_args()
    if not a.no_build:
        print("building (release)...", file=sys.stderr)
        subprocess.run(["cargo", "build", "--release", "--workspace", "--bins"], cwd=ROOT, check=True)
    return a


class Forge:
    def __init__(self, bin_dir, scan):
        self.bin = bin_dir
        self.tmp = tempfile.mkdtemp(prefix="forge-repo-bench-")
        self.mock = subprocess.Popen([os.path.join(bin_dir, "forge-mock")], stdout=subprocess.PIPE, text=True)
        urls = {}
        while "OPENAI_BASE_URL" not in urls:
            line = self.mock.stdout.readline()
            if not line:
                sys.exit("forge-mock did not print its URLs")
            if "_BASE_URL=" in line:
                k, v = line.strip().split("=", 1)
                urls[k] = v
        self.env = dict(os.environ, FORGE_HOME=os.path.join(self.tmp, "home"),
                        FORGE_SOCKET=os.path.join(self.tmp, "forged.sock"), ANTHROPIC_API_KEY="bench", **urls)
        if scan:
            self.env["FORGE_REWIND_SCAN"] = "1"
        self.daemon = subprocess.Popen([os.path.join(bin_dir, "forged"), "--socket", self.env["FORGE_SOCKET"]],
                                       env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(3000):
            if os.path.exists(self.env["FORGE_SOCKET"]):
                return
            time.sleep(0.01)
        sys.exit("forged did not start")

    def ctl(self, *args, check=True):
        """Runs forgectl; its wall time."""
        t = time.perf_counter()
        p = subprocess.run([os.path.join(self.bin, "forgectl"), "--no-autostart", *args], env=self.env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if check and p.returncode != 0:
            sys.exit(f"forgectl {' '.join(args)} failed ({p.returncode}): {p.stderr.strip()}")
        return time.perf_counter() - t, p.stdout

    def blob_bytes(self):
        db = os.path.join(self.env["FORGE_HOME"], "forge.db")
        # Not mode=ro: a read-only connection may not see the WAL's pages.
        con = sqlite3.connect(db)
        try:
            con.execute("PRAGMA query_only = 1")
            return con.execute("SELECT COALESCE(SUM(LENGTH(data)), 0) FROM blobs").fetchone()[0]
        finally:
            con.close()

    def rss_mib(self):
        with open(f"/proc/{self.daemon.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def stop(self):
        self.daemon.terminate()
        self.daemon.wait()
        self.mock.terminate()
        shutil.rmtree(self.tmp, ignore_errors=True)


def command(session, i):
    """A turn whose one call rewrites bench/a.txt and bench/b.txt (with
    contents no other turn of the run writes)."""
    cmd = f"printf '{session}a{i}\\n' > bench/a.txt; printf '{session}b{i}\\n' > bench/b.txt"
    return "mock:tool=run_command:" + ('{"command":"%s"}' % cmd).replace(" ", "\\u0020") + " go"


def turns(forge, session, first, count):
    times = []
    for i in range(first, first + count):
        wall, _ = forge.ctl("send", "--auto-approve", "-s", session, command(session, i))
        times.append(wall)
    return times


def measure(forge, repo, files, a):
    plain = os.path.join(forge.tmp, "plain")
    os.makedirs(os.path.join(plain, "bench"))
    for i in range(8):
        open(os.path.join(plain, f"f{i}.txt"), "w").write("x\n")
    for name in ("a.txt", "b.txt"):
        open(os.path.join(plain, "bench", name), "w").write("start\n")
    forge.ctl("session", "new", "--name", "plain", "--cwd", plain)
    forge.ctl("session", "new", "--name", "big", "--cwd", repo)
    turns(forge, "plain", 0, 2)
    plain_times = turns(forge, "plain", 2, a.commands)
    s0 = forge.blob_bytes()
    first = turns(forge, "big", 0, 1)[0]
    s1 = forge.blob_bytes()
    growth = []
    big_times = []
    for i in range(a.commands):
        before = forge.blob_bytes()
        big_times += turns(forge, "big", 1 + i, 1)
        growth.append(forge.blob_bytes() - before)
    # The last command's two files: what the one before it wrote.
    n = a.commands
    expected = (f"biga{n - 1}\n", f"bigb{n - 1}\n")
    undo, _ = forge.ctl("undo", "big", check=False)
    got = tuple(open(os.path.join(repo, "bench", f)).read() for f in ("a.txt", "b.txt"))
    recorded = got == expected
    s2 = forge.blob_bytes()
    rss = forge.rss_mib()
    many = turns(forge, "big", 1000, a.store_commands) if a.store_commands else []
    s3 = forge.blob_bytes()
    forge.ctl("session", "rm", "big")
    # Each command writes two files of about 6 bytes.
    changed = 2 * len("biga0\n")
    med = statistics.median
    row = dict(files=files, plain_ms=med(plain_times) * 1000, big_ms=med(big_times) * 1000,
               first_s=first, first_store_kib=(s1 - s0) / 1024, growth_b=med(growth), changed_b=changed,
               undo_ms=undo * 1000, after_many_kib=(s3 - s2) / 1024, many=len(many), rss_mib=rss,
               recorded=recorded)
    row["overhead_ms"] = row["big_ms"] - row["plain_ms"]
    return row


def git_session(forge, repo, runs):
    forge_t, git_t = [], []
    for r in range(runs):
        wt = os.path.join(forge.tmp, f"wt{r}")
        t = time.perf_counter()
        subprocess.run(["git", "-C", repo, "worktree", "add", "-q", "--detach", wt], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        git_t.append(time.perf_counter() - t)
        subprocess.run(["git", "-C", repo, "worktree", "remove", "--force", wt], check=True)
        wall, _ = forge.ctl("session", "new", "--git", "--name", f"git{r}", "--cwd", repo)
        forge_t.append(wall)
        forge.ctl("session", "rm", f"git{r}")
    return min(forge_t), min(git_t)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", default="10000,100000,500000")
    ap.add_argument("--profile", default="small", choices=["small", "large"])
    ap.add_argument("--commands", type=int, default=7)
    ap.add_argument("--store-commands", type=int, default=100)
    ap.add_argument("--git-runs", type=int, default=3)
    ap.add_argument("--scan", action="store_true", help="record commands by scanning (FORGE_REWIND_SCAN=1)")
    binaries_args(ap)
    ap.add_argument("--repos", default=os.path.join(ROOT, "target", "bench-repos"))
    a = parse_and_build(ap)
    rows = []
    failed = False
    for files in [int(f) for f in a.files.split(",")]:
        repo = os.path.join(a.repos, f"{a.profile}-{files}")
        make_repo(repo, files, a.profile)
        # What an earlier run left (its undo puts back the files).
        subprocess.run(["git", "-C", repo, "checkout", "-q", "--", "bench"], check=True)
        forge = Forge(a.bin_dir, a.scan)
        try:
            row = measure(forge, repo, files, a)
            if a.git_runs:
                row["git_session_s"], row["worktree_add_s"] = git_session(forge, repo, a.git_runs)
        finally:
            forge.stop()
        rows.append(row)
        if not row["recorded"]:
            failed = True
            print(f"{files:>8} files: NOT RECORDED: undo did not put the two files back, so these figures "
                  "measure nothing (the command's changes were not recorded)", flush=True)
        print(
            f"{files:>8} files ({a.profile}{', scan' if a.scan else ''}): turn {row['big_ms']:.0f} ms vs "
            f"{row['plain_ms']:.0f} ms plain (+{row['overhead_ms']:.0f} ms); first command {row['first_s']:.2f} s, "
            f"store +{row['first_store_kib']:.0f} KiB; per command +{row['growth_b']:.0f} B "
            f"({row['changed_b']} B changed); undo {row['undo_ms']:.0f} ms; after {row['many']} more commands "
            f"+{row['after_many_kib']:.0f} KiB; forged {row['rss_mib']:.0f} MiB"
            + (f"; session new --git {row['git_session_s']:.2f} s vs git worktree add {row['worktree_add_s']:.2f} s"
               if "git_session_s" in row else ""),
            flush=True,
        )
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
