#!/bin/bash
# Field matrix, guest side, as the configured user (boot.sh runs it with
# `runuser -l`): what a person does with Forge on a fresh machine, each
# step's raw output kept in OUT and its outcome as one key=value line in
# OUT/summary (the table's cells).
#
#   walk.sh OUT DAEMON        DAEMON: autostart (forgectl starts forged)
#                                     installed (`forgectl daemon install`
#                                     first: systemd socket activation)
set -u
OUT=$1
DAEMON=$2
S=$OUT/summary
: >"$S"
XDG_RUNTIME_DIR=/run/user/$(id -u)
export XDG_RUNTIME_DIR
export DBUS_SESSION_BUS_ADDRESS=unix:path=$XDG_RUNTIME_DIR/bus
export PATH=/usr/local/bin:/usr/bin:/bin
cd "$HOME" || exit 1
exec 2>>"$OUT/walk.trace"

rec() { printf '%s=%s\n' "$1" "$2" >>"$S"; }
log() { printf '%s %s\n' "$(date +%T)" "$*" >>"$OUT/walk.log"; }
# run NAME SECONDS CMD...: stdout+stderr to OUT/NAME.txt, exit code to
# OUT/NAME.exit and echoed.
run() {
    local name=$1 secs=$2
    shift 2
    local t0
    t0=$(date +%s)
    timeout "$secs" "$@" >"$OUT/$name.txt" 2>&1
    local rc=$?
    echo "$rc" >"$OUT/$name.exit"
    log "$name: exit $rc in $(($(date +%s) - t0)) s: $*"
    echo "$rc"
}
env | sort >"$OUT/env.txt"
log "walk as $(id -un) ($(id -u)), home $HOME, daemon $DAEMON"

# --- the mock provider, on loopback ---------------------------------------
forge-mock --request-log "$OUT/mock-requests.log" >"$OUT/mock.out" 2>&1 &
mock_pid=$!
url=
for _ in $(seq 1 100); do
    url=$(sed -n 's/^ANTHROPIC_BASE_URL=//p' "$OUT/mock.out" 2>/dev/null | head -n1)
    [ -n "$url" ] && break
    sleep 0.3
done
log "mock $mock_pid at ${url:-NONE}"
rec mock "${url:+up}"

# A secret for the self-test's "read ~/.ssh" probe to try.
mkdir -p "$HOME/.ssh"
chmod 700 "$HOME/.ssh"
[ -e "$HOME/.ssh/id_field" ] || echo "not a real key" >"$HOME/.ssh/id_field"
mkdir -p "$HOME/.forge"
chmod 700 "$HOME/.forge"
cat >"$HOME/.forge/config.toml" <<EOF
[app]
provider = "claude"

[api_keys]
anthropic = "mock"

[anthropic]
base_url = "$url"
EOF

# --- the daemon: autostarted, or installed as systemd user units ----------
if [ "$DAEMON" = installed ]; then
    rc=$(run daemon-install 120 forgectl daemon install)
    systemctl --user is-active forged.socket >"$OUT/socket-active.txt" 2>&1
    rec install "exit $rc, socket $(cat "$OUT/socket-active.txt")"
fi

# --- 1. forgectl sandbox ---------------------------------------------------
rc=$(run sandbox 300 forgectl sandbox)
run sandbox-json 60 forgectl --json sandbox >/dev/null
run status-1 60 forgectl status >/dev/null
# jq's `//` takes false for missing: read each field as text, null dropped.
field() { grep "^{" "$OUT/sandbox-json.txt" 2>/dev/null | jq -r ".$1 | if . == null then empty else tostring end" 2>/dev/null | head -n1; }
mode=$(field mode)
abi=$(field landlock_abi)
userns=$(field user_namespaces)
pb=$(field processes_bounded)
mb=$(field memory_bounded)
rec confined_by "$(field confined_by)"
rec totals_detail "$(field totals)"
if [ -z "$mode" ]; then
    # The text form: "sandbox:   MODE (Landlock ABI N, user namespaces yes)"
    mode=$(sed -n 's/^sandbox: *\([^ ]*\).*/\1/p' "$OUT/sandbox.txt" | head -n1)
    abi=$(sed -n 's/.*Landlock ABI \([0-9]*\).*/\1/p' "$OUT/sandbox.txt" | head -n1)
    grep -q 'user namespaces yes' "$OUT/sandbox.txt" && userns=true
fi
if [ -z "$abi" ]; then
    # Forge said no ABI (not confined): the reason may name it.
    abi=$(sed -n "s/.*Landlock ABI is \([0-9]*\).*/\1/p" "$OUT/sandbox.txt" | head -n1)
fi
rec landlock "${abi:-?}"
if [ -n "$mode" ]; then
    confine="$mode LL${abi:-?}"
    case $userns in true) confine="$confine userns" ;; false) confine="$confine no-userns" ;; esac
else
    confine="error(exit $rc)"
fi
rec confine "$confine"
if [ "$pb" = true ] && [ "$mb" = true ]; then
    totals=bounded
elif [ -n "$pb$mb" ]; then
    nb=
    [ "$pb" = true ] || nb=processes
    [ "$mb" = true ] || nb=${nb:+$nb+}memory
    totals="NOT($nb)"
elif grep -q 'NOT bounded' "$OUT/sandbox.txt"; then
    totals=NOT
elif grep -q 'totals per command' "$OUT/sandbox.txt"; then
    totals=bounded
else
    totals="?"
fi
rec totals "$totals"
if grep -qi 'every command asks' "$OUT/sandbox.txt" "$OUT/status-1.txt"; then
    asks="every command"
elif [ "$mode" = kernel ]; then
    asks="outside sandbox"
elif [ -n "$mode" ]; then
    asks="every command"
else
    asks="?"
fi
rec asks "$asks"

# --- 2. forgectl sandbox test ----------------------------------------------
rc=$(run sandbox-test 900 forgectl sandbox test)
# Count the RESULT column of the probe table up to the blank line that ends
# it. The probe names are padded to one width, so the text from the
# header's EXPECTED on is "EXPECTED  RESULT  DETAIL", columns apart by two
# spaces or more (a verdict may hold one space: "asks first").
awk '
    /^PROBE +EXPECTED +RESULT/ { col = index($0, "EXPECTED"); on = 1; next }
    on && NF == 0 { on = 0 }
    on {
        rest = substr($0, col); sub(/^ +/, "", rest); split(rest, f, /  +/)
        n[f[2]]++; if ($0 ~ /<< FAILED/) failed++
    }
    END { for (k in n) printf "%d %s\n", n[k], k; printf "FAILED %d\n", failed }' \
    "$OUT/sandbox-test.txt" >"$OUT/sandbox-test.counts"
failed=$(sed -n 's/^FAILED //p' "$OUT/sandbox-test.counts")
words=$(grep -v '^FAILED ' "$OUT/sandbox-test.counts" | sort -k2 | paste -sd, - | sed 's/,/, /g')
if [ -z "$words" ]; then
    selftest="error(exit $rc)"
elif [ "$rc" = 0 ]; then
    selftest="pass: $words"
else
    selftest="FAIL($failed, exit $rc): $words"
fi
rec selftest "$selftest"

# --- 3. a turn whose tool call runs a command ------------------------------
# `forgectl send` waits for an approval when one is asked: follow it in the
# background, answer it if asked (recorded), and see what ran.
# turn NAME FILE WORD [--auto-approve]: the model runs `echo WORD > FILE`.
turn() {
    local name=$1 file=$2 word=$3
    shift 3
    local msg="mock:tool=run_command:{\"command\":\"echo\\u0020$word\\u0020>\\u0020$file\"} run it"
    local t0 rc asked=no
    t0=$(date +%s)
    forgectl send --name "$name" "$@" "$msg" >"$OUT/$name.out" 2>"$OUT/$name.err" &
    local pid=$!
    for _ in $(seq 1 600); do
        kill -0 "$pid" 2>/dev/null || break
        if grep -q 'waits for approval' "$OUT/$name.err"; then
            asked=yes
            forgectl approve "$name" --all >"$OUT/$name.approve.txt" 2>&1
            echo "approve exit $?" >>"$OUT/$name.approve.txt"
            break
        fi
        sleep 0.5
    done
    for _ in $(seq 1 360); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.5
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill "$pid"
        echo "forgectl send still running after the wait: killed" >>"$OUT/$name.err"
    fi
    wait "$pid"
    rc=$?
    echo "$rc" >"$OUT/$name.exit"
    log "$name: send exit $rc, asked $asked, in $(($(date +%s) - t0)) s"
    timeout 60 forgectl --json attach "$name" --until-idle >"$OUT/$name.events.jsonl" 2>&1
    local made=no
    [ -f "$file" ] && grep -q "$word" "$file" && made=yes
    if [ "$rc" != 0 ]; then
        if [ "$asked" = yes ]; then echo "exit $rc after asking"; else echo "exit $rc"; fi
    elif [ "$asked" = yes ]; then
        if [ "$made" = yes ]; then echo "asked (approved: ran)"; else echo "asked (approved: no file)"; fi
    elif [ "$made" = yes ]; then
        echo ran
    else
        echo "ran, no file"
    fi
}
mkdir -p "$HOME/proj"
cd "$HOME/proj" || exit 1
t=$(turn turn-1 out.txt hi)
rec turn_detail "$t"
case $t in
    asked*) t=asked ;;
esac
rec turn "$t"
ls -la "$HOME/proj" >"$OUT/proj-after-turn-1.txt" 2>&1

# --- 4 and 5. a Claude-style hook, and a restart ---------------------------
mkdir -p "$HOME/.claude/hooks"
cat >"$HOME/.claude/hooks/log.sh" <<'EOF'
#!/bin/sh
# Claude Code's example: log every Bash command the agent runs.
jq -r '"\(.tool_input.command) - \(.tool_input.description // "No description")"' >>"$HOME/.claude/bash-command-log.txt"
EOF
chmod 755 "$HOME/.claude/hooks/log.sh"
cat >>"$HOME/.forge/config.toml" <<'EOF'

[[hooks]]
event = "PreToolUse"
matcher = "Bash"
command = "~/.claude/hooks/log.sh"
EOF
pid1=$(forgectl --no-autostart --json status 2>/dev/null | jq -r '.pid // empty' 2>/dev/null)
rc_down=$(run shutdown 120 forgectl shutdown)
sleep 1
rc_ps=$(run ps 300 forgectl ps)
run status-2 60 forgectl status >/dev/null
pid2=$(forgectl --no-autostart --json status 2>/dev/null | jq -r '.pid // empty' 2>/dev/null)
log "restart: pid $pid1 -> $pid2, shutdown exit $rc_down, ps exit $rc_ps"
if [ "$rc_ps" = 0 ] && [ -n "$pid2" ] && [ "$pid2" != "$pid1" ]; then
    restart=back
elif [ "$rc_ps" = 0 ] && [ -n "$pid2" ]; then
    restart="same pid (shutdown exit $rc_down)"
else
    restart="down (ps exit $rc_ps)"
fi
rec restart "$restart"
if [ "$DAEMON" = installed ]; then
    systemctl --user status forged.socket forged.service --no-pager >"$OUT/units.txt" 2>&1
fi

t=$(turn turn-hook hook.txt hooked --auto-approve)
log "hook turn: $t"
if grep -q 'echo hooked > hook.txt' "$HOME/.claude/bash-command-log.txt" 2>/dev/null; then
    hook=logged
else
    # The hook_ran event: its decision (allow, block, error).
    decision=$(jq -r '.. | objects | select(has("decision") and has("command")) | .decision' \
        "$OUT/turn-hook.events.jsonl" 2>/dev/null | head -n1)
    ran=no
    [ -f "$HOME/proj/hook.txt" ] && ran=yes
    hook="no log (hook ${decision:-not run}, command ran: $ran)"
fi
rec hook "$hook"
rec hook_turn "$t"
cp "$HOME/.claude/bash-command-log.txt" "$OUT/" 2>/dev/null

# --- 6. one daemon per home ----------------------------------------------------
# A terminal without XDG_RUNTIME_DIR (su, ssh, cron) computes another socket
# path: its client must find the running daemon through the home, and a
# second forged on the same home must be refused, naming the first socket.
pid_now=$(forgectl --no-autostart --json status 2>/dev/null | jq -r '.pid // empty' 2>/dev/null)
sock_now=$(forgectl --no-autostart --json status 2>/dev/null | jq -r '.socket // empty' 2>/dev/null)
pid_other=$(env -u XDG_RUNTIME_DIR -u DBUS_SESSION_BUS_ADDRESS forgectl --json status 2>"$OUT/second-client.err" | jq -r '.pid // empty' 2>/dev/null)
rc_second=$(run second-daemon 60 env -u XDG_RUNTIME_DIR forged --socket "$HOME/.forge/second.sock")
log "one daemon per home: pid $pid_now on $sock_now; client without XDG_RUNTIME_DIR reached pid $pid_other; second forged exit $rc_second"
if [ -n "$pid_now" ] && [ "$pid_other" = "$pid_now" ] && [ "$rc_second" != 0 ] && [ -n "$sock_now" ] &&
    grep -q "already running" "$OUT/second-daemon.txt" && grep -qF "$sock_now" "$OUT/second-daemon.txt"; then
    second="refused, named"
elif [ "$rc_second" = 0 ] || [ "$rc_second" = 124 ]; then
    second="a second daemon ran"
else
    second="other (client reached pid ${pid_other:-none}, second exit $rc_second)"
fi
rec second "$second"

# --- the end: leave nothing running ----------------------------------------
run shutdown-final 120 forgectl shutdown >/dev/null
kill "$mock_pid" 2>/dev/null
mkdir -p "$OUT/forge-logs"
cp -r "$HOME/.forge/logs/." "$OUT/forge-logs/" 2>/dev/null
cp "$HOME/.forge/config.toml" "$OUT/config.toml"
if [ "$DAEMON" = installed ]; then
    journalctl --user --no-pager -u forged.service -u forged.socket >"$OUT/forged-journal.txt" 2>&1
fi
log "walk done"
exit 0
