#!/usr/bin/env bash
# Forge demo: builds everything, then shows a real streamed turn, a second
# client attached to the same session, a daemon restart, and the history,
# against Forge's in-tree MOCK provider on loopback. Needs no API key and
# no network. Everything lives in a temporary directory removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "Building Forge (release)"
if [ ! -x target/release/forged ]; then
  echo "   The first build compiles every dependency: about 10-15 minutes on 2 cores"
  echo "   (a few minutes on a fast laptop). Later builds take seconds. The demo follows."
fi
cargo build --release --workspace --bins
BIN="$PWD/target/release"
FORGECTL="$BIN/forgectl"

DEMO="$(mktemp -d -t forge-demo.XXXXXX)"
# The demo's own daemon, set before the trap can run: a Ctrl-C never
# reaches the user's daemon.
export FORGE_HOME="$DEMO/home"
export FORGE_SOCKET="$DEMO/forged.sock"
cleanup() {
  "$FORGECTL" shutdown >/dev/null 2>&1 || true
  [ -n "${MOCK_PID:-}" ] && kill "$MOCK_PID" 2>/dev/null || true
  rm -rf "$DEMO"
}
trap cleanup EXIT

# The mock streams word by word with a small delay so the stream is visible.
"$BIN/forge-mock" --delay-ms 40 >"$DEMO/mock.out" &
MOCK_PID=$!
for _ in $(seq 100); do grep -q ANTHROPIC_BASE_URL "$DEMO/mock.out" 2>/dev/null && break; sleep 0.05; done
ANTHROPIC_BASE_URL="$(sed -n 's/^ANTHROPIC_BASE_URL=//p' "$DEMO/mock.out")"

export ANTHROPIC_BASE_URL
export ANTHROPIC_API_KEY="mock-demo-key"

say "Provider: Forge's built-in MOCK at $ANTHROPIC_BASE_URL (not a real model; no network, no key)"

# The session works in a scratch project directory.
mkdir -p "$DEMO/project"

say "1. forgectl send: starts forged in the background and streams the answer"
"$FORGECTL" send --name demo --cwd "$DEMO/project" "Hello Forge, what are you?"

say "2. A second client joins the same session while the next turn streams"
# Slower words for this turn (the mock's mock:delay=MS), so that joining
# mid-stream is visible on any machine.
"$FORGECTL" send -s demo "mock:delay=150 Tell me about daemons: why do they outlive the terminal that started them, and who may attach to them later on?" >"$DEMO/first-client.txt" &
SEND_PID=$!
# Join once the first client has shown a few words.
for _ in $(seq 200); do [ "$(wc -w <"$DEMO/first-client.txt")" -ge 6 ] && break; sleep 0.05; done
# --from live: no replay; it learns a turn is running and follows it to the end.
"$FORGECTL" attach demo --from live --until-idle >"$DEMO/second-client.txt"
wait "$SEND_PID"
echo "   The first client (forgectl send) showed the whole answer:"
fold -s -w 70 "$DEMO/first-client.txt" | sed 's/^/   | /'
echo "   The second client (forgectl attach --from live) joined mid-stream and showed the rest:"
fold -s -w 70 "$DEMO/second-client.txt" | sed 's/^/   | /'

say "3. A tool call waits for approval; another client answers it"
echo "   (the mock calls a tool when asked with the directive mock:tool=NAME)"
"$FORGECTL" send -s demo "mock:tool=write_file Please create a file." &
SEND_PID=$!
for _ in $(seq 100); do "$FORGECTL" approvals 2>/dev/null | grep -q write_file && break; sleep 0.1; done
"$FORGECTL" ps
"$FORGECTL" approve demo --all
wait "$SEND_PID"
echo "   The file the tool created: $(cat "$DEMO/project/out0.txt")"

say "4. forgectl ps: state, what each session waits on, attached clients"
"$FORGECTL" ps

say "5. Stop the daemon; the next command starts a fresh one"
"$FORGECTL" shutdown

say "6. forgectl history after the restart: everything is still there"
"$FORGECTL" history demo

say "Done. With a real key: export ANTHROPIC_API_KEY=... (or OPENAI_API_KEY=...) and run"
echo "   $FORGECTL send \"your question\""
echo "   or open the terminal UI: $(dirname "$FORGECTL")/forge --new"
