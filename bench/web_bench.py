#!/usr/bin/env python3
"""Forge web client benchmark.

Drives the page `forged` serves in headless Chromium (Debian's `chromium`
and `chromium-driver`, through the WebDriver protocol) against a real
`forged` and the in-tree mock, and reports:

- the compressed size of everything the page loads;
- the time to the first rendered message of a 1,000-message session (from
  the moment the page is asked for the session to the first frame that
  shows a message), and until its answers are rendered as markdown;
- a 2,000-token stream at about 1,000 tokens/s rendered live: every token
  present at the end, and the main thread's long tasks meanwhile (a
  `PerformanceObserver` for `longtask`: how many went over 50 ms, and the
  longest);
- the daemon's resident memory idle with no listener, with the listener
  and no browser, and with 1 and 3 browsers following the session.

Usage: python3 bench/web_bench.py [--runs N] [--no-build] [--bin-dir DIR]
"""

import argparse
import gzip
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from send_bench import settled_rss, start_mock  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(ROOT, "forged", "src", "web", "page")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Browser:
    """One headless Chromium, driven over WebDriver's HTTP protocol."""

    def __init__(self, driver_url, chromium):
        self.base = driver_url
        # Small /dev/shm in containers crashes the renderer without the second flag.
        args = ["--headless=new", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"]
        if os.geteuid() == 0:
            args.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
        caps = {"capabilities": {"alwaysMatch": {"goog:chromeOptions": {"binary": chromium, "args": args}}}}
        self.id = self.post("/session", caps)["sessionId"]
        self.post(f"/session/{self.id}/timeouts", {"script": 300000})

    def post(self, path, body):
        req = urllib.request.Request(self.base + path, data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=600) as r:
                return json.load(r)["value"]
        except urllib.error.HTTPError as e:
            sys.exit(f"chromedriver: {path}: {e.read().decode(errors='replace')[:2000]}")

    def goto(self, url):
        self.post(f"/session/{self.id}/url", {"url": url})

    def js(self, script, *args):
        return self.post(f"/session/{self.id}/execute/sync", {"script": script, "args": list(args)})

    def js_async(self, script, *args):
        return self.post(f"/session/{self.id}/execute/async", {"script": script, "args": list(args)})

    def wait(self, script, what, timeout=60):
        end = time.time() + timeout
        while time.time() < end:
            if self.js(script):
                return
            time.sleep(0.05)
        said = self.js("const l = document.getElementById('link'); "
                       "return [location.href, l && l.textContent, document.body && document.body.innerText]")
        sys.exit(f"the page never {what}: {said}")

    def close(self):
        req = urllib.request.Request(f"{self.base}/session/{self.id}", method="DELETE")
        try:
            urllib.request.urlopen(req, timeout=30).read()
        except OSError:
            pass


# From the moment the session is asked for to the first frame showing a
# message; then until every answer is rendered markdown.
FIRST_RENDER = """
const done = arguments[arguments.length - 1];
const id = arguments[0], answers = arguments[1];
const t0 = performance.now();
let first = null;
const check = () => {
  const msgs = document.querySelectorAll('#transcript .msg');
  if (first === null && msgs.length) {
    requestAnimationFrame(() => { first = performance.now() - t0; setTimeout(check, 0); });
    return;
  }
  if (first !== null && document.querySelectorAll('#transcript .msg.assistant .md').length >= answers) {
    done({first, rendered: performance.now() - t0, messages: msgs.length});
    return;
  }
  setTimeout(check, 5);
};
location.hash = '#/s/' + id;
check();
"""

LIVE = "const l = document.getElementById('link'); return !!l && l.textContent === 'live'"

LONG_TASKS = """
window.__long = [];
new PerformanceObserver((l) => { for (const e of l.getEntries()) window.__long.push(e.duration); })
  .observe({type: 'longtask', buffered: false});
return true;
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--messages", type=int, default=1000)
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--bin-dir", default=os.path.join(ROOT, "target", "release"))
    a = ap.parse_args()
    chromium = next((p for p in ["/usr/bin/chromium", "/usr/bin/chromium-browser"] if os.path.exists(p)), None)
    if not chromium or not shutil.which("chromedriver"):
        sys.exit("needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)")
    if not a.no_build:
        print("building (release)...", file=sys.stderr)
        for p, b in [("forged", "forged"), ("forge-cli", "forgectl"), ("forge-tests", "forge-mock")]:
            subprocess.run(["cargo", "build", "--release", "-p", p, "--bin", b], cwd=ROOT, check=True)
    bin_dir = a.bin_dir

    page = b"".join(open(os.path.join(PAGE, f), "rb").read() for f in sorted(os.listdir(PAGE)))
    files = len(os.listdir(PAGE))

    tmp = tempfile.mkdtemp(prefix="forge-web-bench-")
    mock, urls = start_mock(bin_dir, [])
    env = dict(os.environ, FORGE_HOME=os.path.join(tmp, "home"), FORGE_SOCKET=os.path.join(tmp, "forged.sock"),
               ANTHROPIC_API_KEY="bench-key", OPENAI_API_KEY="bench-key", **urls)
    project = os.path.join(tmp, "project")
    os.makedirs(project)
    daemon = subprocess.Popen([os.path.join(bin_dir, "forged"), "--socket", env["FORGE_SOCKET"]], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ctl = [os.path.join(bin_dir, "forgectl"), "--no-autostart"]
    driver = None
    browsers = []
    try:
        for _ in range(3000):
            if os.path.exists(env["FORGE_SOCKET"]):
                break
            time.sleep(0.01)
        idle = settled_rss(daemon.pid)

        def run(*args):
            return subprocess.run(ctl + list(args), env=env, check=True, capture_output=True, text=True).stdout

        pairing = json.loads(run("--json", "web"))
        listening = settled_rss(daemon.pid)

        # A session of `--messages` messages: user and answer per turn,
        # each answer with some markdown.
        big = json.loads(run("--json", "session", "new", "--name", "long", "--cwd", project))["id"]
        print(f"writing a {a.messages}-message session...", file=sys.stderr)
        for i in range(a.messages // 2):
            run("send", "-s", big, f"question {i} with **bold**, `code` and a [link](https://example.org)")
        small = json.loads(run("--json", "session", "new", "--name", "stream", "--cwd", project))["id"]
        pairing = json.loads(run("--json", "web"))
        written = settled_rss(daemon.pid)

        port = free_port()
        driver = subprocess.Popen(["chromedriver", f"--port={port}"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        driver_url = f"http://127.0.0.1:{port}"
        for _ in range(200):
            try:
                urllib.request.urlopen(driver_url + "/status", timeout=1).read()
                break
            except OSError:
                time.sleep(0.05)
        b = Browser(driver_url, chromium)
        browsers.append(b)
        b.goto(pairing["url"])
        b.wait(LIVE, "connected")
        base = pairing["url"].split("/pair")[0]

        css = b.js_async("fetch('/hl.css').then(r => r.text()).then(arguments[arguments.length - 1])")
        page += css.encode()
        renders = []
        for _ in range(a.runs):
            b.goto(base + "/")
            b.wait(LIVE, "connected")
            renders.append(b.js_async(FIRST_RENDER, big, a.messages // 2))

        streams = []
        for r in range(a.runs):
            b.goto(f"{base}/#/s/{small}")
            b.wait(LIVE, "connected")
            b.js(LONG_TASKS)
            t0 = time.time()
            run("send", "-s", small, f"stream {r} mock:tokens=2000 mock:delay=1")
            wall = time.time() - t0
            b.wait("const s = document.getElementById('state'); return !!s && s.textContent.startsWith('turn ')",
                   "ended the turn")
            text = b.js("const m = [...document.querySelectorAll('.msg.assistant')].pop(); return m.textContent")
            missing = [i for i in range(2000) if f"w{i} " not in text and not text.rstrip().endswith(f"w{i}")]
            tasks = b.js("return window.__long")
            if not b.js("return PerformanceObserver.supportedEntryTypes.includes('longtask')"):
                sys.exit("this Chromium does not report long tasks")
            streams.append({"wall": wall, "missing": len(missing), "over50": sum(1 for t in tasks if t > 50),
                            "longest": max(tasks, default=0)})
            b.js("document.getElementById('state').textContent = ''")

        # Compared once the daemon has trimmed what the work above left.
        time.sleep(5)
        one = settled_rss(daemon.pid)
        for _ in range(2):
            extra = Browser(driver_url, chromium)
            browsers.append(extra)
            extra.goto(json.loads(run("--json", "web"))["url"])  # each browser its own one-time link
            extra.wait(LIVE, "connected")
            extra.goto(f"{base}/#/s/{small}")
        for extra in browsers[1:]:
            extra.wait(LIVE, "connected")
        time.sleep(5)
        three = settled_rss(daemon.pid)

        print(f"page: {len(gzip.compress(page, 9)) / 1000:.1f} KB compressed ({files + 1} files with /hl.css, "
              f"{len(page) / 1000:.1f} KB as served)")
        for i, r in enumerate(renders):
            print(f"run {i + 1}: {r['messages']} messages: first rendered {r['first']:.0f} ms, "
                  f"markdown of every answer {r['rendered']:.0f} ms")
        for i, s in enumerate(streams):
            print(f"run {i + 1}: 2,000 tokens in {s['wall']:.1f} s ({2000 / s['wall']:.0f}/s, the send included): "
                  f"{2000 - s['missing']} of 2000 shown; "
                  f"{s['over50']} long task(s) over 50 ms, longest {s['longest']:.0f} ms")
        mib = lambda r: f"{r[0] / 1024:.1f} MiB ({r[1] / 1024:.1f} anonymous)"  # noqa: E731
        print(f"forged RSS: idle, before any client {mib(idle)}; listening, after `forgectl web` "
              f"{mib(listening)}; after writing the sessions {mib(written)}; 1 browser following {mib(one)}; "
              f"3 browsers {mib(three)}: {(three[0] - one[0]) / 2 / 1024:+.2f} MiB "
              f"({(three[1] - one[1]) / 2 / 1024:+.2f} anonymous) for each of the 2 more")
    finally:
        for b in browsers:
            b.close()
        if driver:
            driver.terminate()
        daemon.terminate()
        mock.terminate()
        daemon.wait()
        if not os.environ.get('KEEP'):
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(tmp)


if __name__ == "__main__":
    main()
