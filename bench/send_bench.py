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

The daemon's CPU is the time its threads spent on a CPU during the measured
turns, read in nanoseconds from /proc/PID/task/*/schedstat (the 10 ms
utime+stime ticks are printed beside it as a cross-check).

When a Codex CLI is found (`--codex PATH`, $FORGE_BENCH_CODEX, or `codex` on
PATH), the same turn is also run with `codex exec` against the same mock
(OpenAI Responses wire), and the two ratios are printed: Forge's whole-turn
CPU (client + daemon) over Codex's, and Forge's memory (client peak + daemon
peak) over Codex's peak. Without one, that part is skipped, saying so.

Usage: python3 bench/send_bench.py [--runs N] [--tokens N] [--wire W] [--no-build]
                                   [--bin-dir DIR] [--codex PATH | --no-codex]

--wire picks the provider wire format: anthropic (default), openai-chat,
openai-responses or gemini. --bin-dir takes the binaries from DIR instead of
target/release (for a release build in another target directory).
--wrap CMD runs forged and each `forgectl send` under CMD (for instance
valgrind's callgrind, to learn which functions a turn runs); the figures
are then those of the tool, not of Forge.
"""

import argparse
import resource
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_BIN = os.path.join(ROOT, "target", "release")
BIN = DEFAULT_BIN
TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 (1-based) of the whole line.
    return (int(fields[11]) + int(fields[12])) / TICK


def threads_cpu_ns(pid):
    """CPU time of each live thread of `pid`, in ns (tid -> ns)."""
    out = {}
    task_dir = f"/proc/{pid}/task"
    for tid in os.listdir(task_dir):
        try:
            with open(f"{task_dir}/{tid}/schedstat") as f:
                out[tid] = int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # the thread ended while we read
    return out


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


def start_mock(bin_dir, args):
    """forge-mock from `bin_dir`, and the base URLs it prints (up to OpenAI's)."""
    mock = subprocess.Popen([os.path.join(bin_dir, "forge-mock")] + args, stdout=subprocess.PIPE, text=True)
    urls = {}
    while "OPENAI_BASE_URL" not in urls:
        line = mock.stdout.readline()
        if not line:
            sys.exit("forge-mock did not print its URLs")
        if "_BASE_URL=" in line:
            k, v = line.strip().split("=", 1)
            urls[k] = v
    return mock, urls


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
    global BIN
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--tokens", type=int, default=2000)
    ap.add_argument("--delay-ms", type=int, default=0, help="mock delay between chunks")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--wire", default="anthropic",
                    choices=["anthropic", "openai-chat", "openai-responses", "gemini"])
    ap.add_argument("--bin-dir", default=os.environ.get("FORGE_BENCH_BIN", DEFAULT_BIN))
    ap.add_argument("--codex", default=os.environ.get("FORGE_BENCH_CODEX") or shutil.which("codex"),
                    help="a Codex CLI to run the same turn with (default: $FORGE_BENCH_CODEX or codex on PATH)")
    ap.add_argument("--no-codex", action="store_true")
    ap.add_argument("--perf", metavar="FILE",
                    help="record the daemon with `perf record -g` during the measured turns into FILE")
    ap.add_argument("--wrap", metavar="CMD", default="",
                    help="run forged and each `forgectl send` under CMD (a tracer such as valgrind)")
    a = ap.parse_args()
    BIN = a.bin_dir
    wrap = shlex.split(a.wrap)

    if not a.no_build:
        print("building (release)...", file=sys.stderr)
        subprocess.run(["cargo", "build", "--release", "--workspace", "--bins"], cwd=ROOT, check=True)

    tmp = tempfile.mkdtemp(prefix="forge-bench-")
    fb_log = os.path.join(tmp, "first-bytes.log")
    mock, urls = start_mock(BIN, ["--first-byte-log", fb_log])
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
        wrap + [os.path.join(BIN, "forged"), "--socket", env["FORGE_SOCKET"]],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        ctl = os.path.join(BIN, "forgectl")
        for _ in range(3000):
            if os.path.exists(env["FORGE_SOCKET"]):
                break
            time.sleep(0.01)
        idle = settled_rss(daemon.pid)
        subprocess.run([ctl, "--no-autostart", "session", "new", "--name", "bench", "--provider", provider], env=env,
                       check=True, stdout=subprocess.DEVNULL)
        msg = f"mock:tokens={a.tokens} mock:delay={a.delay_ms} bench"
        send = wrap + [ctl, "--no-autostart", "send", "-s", "bench", msg]
        run_client(send, env)  # warm-up: connections, page cache
        expected = "".join(f"w{i} " for i in range(a.tokens))

        walls, client_cpu, client_rss, latencies = [], [], [], []
        # Ticks of 10 ms (a cross-check) and each thread's CPU in ns.
        daemon_before = proc_cpu(daemon.pid)
        threads_before = threads_cpu_ns(daemon.pid)
        perf = None
        if a.perf:
            perf = subprocess.Popen(["perf", "record", "-q", "-F", "20000", "-g", "--call-graph", "dwarf,16384",
                                     "-p", str(daemon.pid), "-o", a.perf], stderr=subprocess.DEVNULL)
            time.sleep(0.5)  # perf attaches to each thread
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

        threads_after = threads_cpu_ns(daemon.pid)
        if perf:
            perf.send_signal(2)
            perf.wait()
        daemon_ticks = (proc_cpu(daemon.pid) - daemon_before) / a.runs
        ended = set(threads_before) - set(threads_after)
        daemon_cpu = sum(ns - threads_before.get(tid, 0) for tid, ns in threads_after.items()) / 1e9 / a.runs
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
        print(f"  CPU client           {med(client_cpu) * 1000:8.2f} ms")
        print(f"  CPU daemon share     {daemon_cpu * 1000:8.2f} ms  (forged's threads over all runs / runs; "
              f"ticks say {daemon_ticks * 1000:.0f} ms)")
        if ended:
            print(f"  ({len(ended)} daemon thread(s) ended during the runs: their last CPU is not counted)")
        print(f"  CPU total            {total_cpu * 1000:8.2f} ms")
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
        if a.no_codex or not a.codex:
            print("codex: skipped (no Codex CLI found; pass --codex PATH or put codex on PATH)")
        else:
            codex = run_codex(a, urls, tmp, expected)
            if codex:
                c_wall, c_cpu, c_rss = codex
                print(f"codex exec ({a.codex}), the same turn on the OpenAI Responses wire; median of {a.runs} runs")
                print(f"  wall time            {c_wall * 1000:8.1f} ms")
                print(f"  CPU                  {c_cpu * 1000:8.2f} ms")
                print(f"  peak RSS             {c_rss / 1024:8.1f} MiB")
                print(f"  Forge/codex CPU      1/{c_cpu / total_cpu:.1f}")
                print(f"  Forge/codex memory   1/{c_rss / (max(client_rss) + daemon_peak):.1f}   "
                      "(client peak + daemon peak over codex's peak)")
    finally:
        daemon.terminate()
        daemon.wait()
        mock.kill()


def run_codex(a, urls, tmp, expected):
    """Runs `codex exec` on the same turn against the mock; returns medians
    (wall s, CPU s, peak RSS kB), or None after saying why."""
    home = os.path.join(tmp, "codex-home")
    work = os.path.join(tmp, "codex-work")
    os.makedirs(home, mode=0o700, exist_ok=True)
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write(f"""model = "gpt-5"
model_provider = "mock"
[model_providers.mock]
name = "mock"
base_url = "{urls['OPENAI_BASE_URL']}"
wire_api = "responses"
env_key = "OPENAI_API_KEY"
""")
    env = dict(os.environ, CODEX_HOME=home, OPENAI_API_KEY="bench-key")
    msg = f"mock:tokens={a.tokens} mock:delay={a.delay_ms} bench"
    args = [a.codex, "exec", "--skip-git-repo-check", "-C", work, msg]
    rss_file = os.path.join(tmp, "codex-rss")
    walls, cpus, rsss = [], [], []
    for i in range(a.runs + 1):
        timed = [GNU_TIME, "-f", "%M", "-o", rss_file] + args if os.path.exists(GNU_TIME) else args
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.time()
        p = subprocess.run(timed, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        wall = time.time() - start
        if p.returncode != 0 or p.stdout.strip() != expected.strip():
            print(f"codex: skipped (codex exec exited {p.returncode} or printed another answer: "
                  f"{p.stderr.strip()[-300:]!r})")
            return None
        if i == 0:
            continue  # warm-up
        # RUSAGE_CHILDREN sums every child reaped so far: take the difference.
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(ru.ru_utime + ru.ru_stime - before.ru_utime - before.ru_stime)
        walls.append(wall)
        if os.path.exists(GNU_TIME):
            with open(rss_file) as f:
                rsss.append(int(f.read().split()[-1]))
    return statistics.median(walls), statistics.median(cpus), max(rsss) if rsss else 0


if __name__ == "__main__":
    main()
