#!/usr/bin/env python3
"""Forge send benchmark.

Runs `forgectl send` against the in-tree mock provider streaming 2,000 short
tokens with no delay, through a real `forged`, and reports per turn:
wall time, CPU seconds of the client and the daemon's share (from /proc),
peak memory of each, the time from the mock's first text byte to the first
byte on forgectl's stdout, and the time of `forgectl --version`. It also
reports the idle daemon's memory (and how much of it is anonymous rather
than the binary's mapped pages) and its memory after one turn in each of
10 sessions.

Usage: python3 bench/send_bench.py [--runs N] [--tokens N] [--wire W] [--no-build]

--wire picks the provider wire format: anthropic (default), openai-chat,
openai-responses or gemini.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release")
TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 (1-based) of the whole line.
    return (int(fields[11]) + int(fields[12])) / TICK


def proc_status(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])  # kB
    return 0


GNU_TIME = os.environ.get("FORGE_BENCH_TIME", "/usr/bin/time")


def run_client(args, env):
    """Runs a client; returns (wall s, cpu s, maxrss kB, first stdout byte time ns, rc).

    The peak RSS comes from GNU time (`apt-get install time`): the kernel
    carries a forking parent's peak over exec, so a child forked from this
    Python process would report Python's size instead of its own.
    """
    rss_file = os.path.join(tempfile.gettempdir(), f"forge-bench-rss-{os.getpid()}")
    if os.path.exists(GNU_TIME):
        args = [GNU_TIME, "-f", "%M", "-o", rss_file] + args
    start = time.time()
    p = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    first = None
    while True:
        chunk = p.stdout.read1(65536)
        if not chunk:
            break
        if first is None:
            first = time.time_ns()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.time() - start
    rss = 0
    if os.path.exists(GNU_TIME):
        with open(rss_file) as f:
            rss = int(f.read().split()[-1])
    # ru covers the client and GNU time (which uses about a millisecond).
    return wall, ru.ru_utime + ru.ru_stime, rss, first, p.returncode


def settled_rss(pid):
    """The daemon's RSS once it stops changing (kB): (total, anonymous, file)."""
    last = None
    for _ in range(40):
        now = (proc_status(pid, "VmRSS"), proc_status(pid, "RssAnon"), proc_status(pid, "RssFile"))
        if now == last:
            return now
        last = now
        time.sleep(0.05)
    return last


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--tokens", type=int, default=2000)
    ap.add_argument("--delay-ms", type=int, default=0, help="mock delay between chunks")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--wire", default="anthropic",
                    choices=["anthropic", "openai-chat", "openai-responses", "gemini"])
    a = ap.parse_args()

    if not a.no_build:
        print("building (release)...", file=sys.stderr)
        subprocess.run(["cargo", "build", "--release", "--workspace", "--bins"], cwd=ROOT, check=True)

    tmp = tempfile.mkdtemp(prefix="forge-bench-")
    fb_log = os.path.join(tmp, "first-bytes.log")
    mock = subprocess.Popen(
        [os.path.join(BIN, "forge-mock"), "--first-byte-log", fb_log], stdout=subprocess.PIPE, text=True
    )
    urls = {}
    while "OPENAI_BASE_URL" not in urls:
        line = mock.stdout.readline()
        if not line:
            sys.exit("forge-mock did not print its URLs")
        if "_BASE_URL=" in line:
            k, v = line.strip().split("=", 1)
            urls[k] = v
    # The Gemini URL follows (a mock from before Gemini prints none).
    if a.wire == "gemini":
        line = mock.stdout.readline()
        k, v = line.strip().split("=", 1)
        urls[k] = v
    env = dict(os.environ)
    env.update(
        FORGE_HOME=os.path.join(tmp, "home"),
        FORGE_SOCKET=os.path.join(tmp, "forged.sock"),
        ANTHROPIC_API_KEY="bench-key",
        OPENAI_API_KEY="bench-key",
        GEMINI_API_KEY="bench-key",
        **urls,
    )
    provider = {"anthropic": "claude", "openai-chat": "openai", "openai-responses": "openai", "gemini": "gemini"}[a.wire]
    if a.wire == "openai-responses":
        # A custom OPENAI_BASE_URL means Chat Completions unless told.
        os.makedirs(env["FORGE_HOME"], mode=0o700, exist_ok=True)
        with open(os.path.join(env["FORGE_HOME"], "config.toml"), "w") as f:
            f.write('[openai]\nwire_api = "responses"\n')
    daemon = subprocess.Popen(
        [os.path.join(BIN, "forged"), "--socket", env["FORGE_SOCKET"]],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        ctl = os.path.join(BIN, "forgectl")
        for _ in range(500):
            if os.path.exists(env["FORGE_SOCKET"]):
                break
            time.sleep(0.01)
        idle = settled_rss(daemon.pid)
        subprocess.run([ctl, "--no-autostart", "session", "new", "--name", "bench", "--provider", provider], env=env,
                       check=True, stdout=subprocess.DEVNULL)
        msg = f"mock:tokens={a.tokens} mock:delay={a.delay_ms} bench"
        send = [ctl, "--no-autostart", "send", "-s", "bench", msg]
        run_client(send, env)  # warm-up: connections, page cache
        expected = "".join(f"w{i} " for i in range(a.tokens))

        walls, client_cpu, client_rss, latencies = [], [], [], []
        # The daemon's CPU is read in 10 ms ticks: measure it over all runs.
        daemon_before = proc_cpu(daemon.pid)
        for _ in range(a.runs):
            open(fb_log, "w").close()
            wall, cpu, rss, first_out, rc = run_client(send, env)
            if rc != 0:
                sys.exit(f"forgectl send failed with exit {rc}")
            with open(fb_log) as f:
                first_mock = int(f.read().split()[0])
            walls.append(wall)
            client_cpu.append(cpu)
            client_rss.append(rss)
            latencies.append((first_out - first_mock) / 1e6)
            if os.environ.get("FORGE_BENCH_VERBOSE"):
                print(f"run: wall {wall * 1000:.1f} ms, first byte {latencies[-1]:.2f} ms", file=sys.stderr)

        daemon_cpu = (proc_cpu(daemon.pid) - daemon_before) / a.runs
        # Check the answer is exact once more.
        out = subprocess.run([ctl, "--no-autostart", "send", "-s", "bench", msg], env=env,
                             capture_output=True, text=True).stdout
        assert out.rstrip() == expected.rstrip(), "the streamed text differs from the provider's"

        versions = []
        for _ in range(20):
            t = time.perf_counter()
            subprocess.run([ctl, "--version"], stdout=subprocess.DEVNULL, check=True)
            versions.append(time.perf_counter() - t)

        daemon_peak = proc_status(daemon.pid, "VmHWM")
        daemon_rss = proc_status(daemon.pid, "VmRSS")
        # One turn in each of 10 sessions (the bench session is the first).
        for i in range(9):
            subprocess.run([ctl, "--no-autostart", "send", "--name", f"more{i}", "--provider", provider,
                            "mock:tokens=200 more"], env=env, check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        ten = settled_rss(daemon.pid)
        med = statistics.median
        total_cpu = med(client_cpu) + daemon_cpu
        print(f"forgectl send, {a.tokens} tokens from the mock ({a.wire}), delay {a.delay_ms} ms; median of {a.runs} runs")
        print(f"  wall time            {med(walls) * 1000:8.1f} ms")
        print(f"  CPU client           {med(client_cpu):8.3f} s")
        print(f"  CPU daemon share     {daemon_cpu:8.3f} s   (forged's utime+stime over all runs / runs)")
        print(f"  CPU total            {total_cpu:8.3f} s")
        if not os.path.exists(GNU_TIME):
            print("  (install GNU time, `apt-get install time`, to measure the client's peak memory)")
        print(f"  peak RSS client      {max(client_rss) / 1024:8.1f} MiB")
        print(f"  peak RSS daemon      {daemon_peak / 1024:8.1f} MiB   (VmHWM; current {daemon_rss / 1024:.1f} MiB)")
        print(f"  together             {(max(client_rss) + daemon_peak) / 1024:8.1f} MiB")
        print(f"  idle RSS daemon      {idle[0] / 1024:8.1f} MiB   (anonymous {idle[1] / 1024:.1f} MiB, "
              f"file-backed {idle[2] / 1024:.1f} MiB)")
        print(f"  RSS after 10 sessions{ten[0] / 1024:8.1f} MiB   (one turn each; anonymous {ten[1] / 1024:.1f} MiB)")
        print(f"  first byte latency   {med(latencies):8.2f} ms   (mock's first text chunk -> forgectl stdout)")
        print(f"  forgectl --version   {med(versions) * 1000:8.2f} ms")
    finally:
        daemon.terminate()
        daemon.wait()
        mock.kill()


if __name__ == "__main__":
    main()
