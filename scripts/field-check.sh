#!/usr/bin/env bash
# The field matrix: Forge walked through as a person would on stock Debian
# machines, each booted under QEMU. See --help.
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: scripts/field-check.sh [--config NAME ...] [--all] [--bin-dir DIR] [--keep]

Boots stock Debian images under QEMU (TCG, no KVM needed) and, inside each,
walks through Forge as a user would, then prints one table and compares it
with tests/field/expected.tsv.

Configurations (names are a contract: CI and issues refer to them):
  deb12-user       Debian 12 (kernel 6.1, Landlock ABI 2), user `dev`,
                   forged autostarted by forgectl
  deb13-user       Debian 13 (kernel 6.12, Landlock ABI 6), the same
  deb13-installed  Debian 13, the user runs `forgectl daemon install` first
                   (systemd user units, socket activation)
  deb13-nouserns   Debian 13 with user.max_user_namespaces=0 set before the
                   walk (stands for Ubuntu 24.04's AppArmor userns restriction)
  deb13-root       Debian 13, the walk as root
Without --config or --all: deb12-user deb13-user.

Options:
  --config NAME   run this configuration (repeatable, or NAME,NAME)
  --all           run every configuration
  --bin-dir DIR   where forged, forgectl, forge-mock (and forge) are
                  [default: target/debug; target/release works too]
  --keep          keep the per-run work directories (walk disks, consoles)
                  under target/field/tmp/
  -h, --help      this text

The walk (tests/field/guest/walk.sh, as the configured user, HOME a real
home, in a PAM login session with its systemd user manager):
  1. forgectl sandbox: what confines commands, whether the totals
     (processes, memory) are bounded per command, what asks for approval
  2. forgectl sandbox test: the probes counted by verdict, its exit code
  3. a turn against forge-mock (on loopback in the guest) whose tool call
     runs `echo hi > out.txt` in ~/proj: ran without asking, or asked
     (then approved), and whether the file appeared
  4. a Claude-style PreToolUse hook (~/.claude/hooks/log.sh, matcher
     "Bash", in ~/.forge/config.toml: where Forge reads it) that logs each
     command to ~/.claude/bash-command-log.txt, then a turn: logged or not
  5. a restart: forgectl shutdown, then forgectl ps starts it again
  6. one daemon per home: a client without XDG_RUNTIME_DIR reaches the
     running daemon, and a second forged on the same home is refused,
     naming the first one's socket
  and records uname -r, the Landlock ABI and the cgroup version.

Images: one base image per Debian suite (mmdebstrap, minbase with systemd,
a lingering user `dev`, curl, git, jq), cached in target/field/images/ by
suite and a hash of the package list and tests/field/image-setup.sh, and
booted with snapshot=on so it stays pristine. The package mirror is the one
this machine's apt uses (else mmdebstrap's default). Building needs root,
network to Debian's package registry, mmdebstrap, qemu-system-x86 and
e2fsprogs (installed with apt-get when missing and possible). Each run gets
a small second disk (/dev/vdb) with the binaries, the guest scripts and the
configuration's name; the image's one-shot unit runs tests/field/guest/
boot.sh from it and powers off. A boot that panics or never starts the walk
is tried again (twice at most).

Results: the table on stdout (also target/field/results/table.txt), and
per configuration target/field/results/CONFIG/ with every raw output
(sandbox.txt, sandbox-test.txt, turn-*.{out,err,events.jsonl}, the daemon's
logs, the guest's journal, the serial console) and details.txt.

Expectations: tests/field/expected.tsv, one line per configuration, a
column per cell of the table; each cell is a shell glob (`*` for anything).
They record what Forge does today, faults included: a change in behaviour,
better or worse, shows as a mismatch until the file is updated.

Exit status: 0 every row ran and matched; 1 a row did not match (each
difference is printed); 2 an image could not be built or a VM could not be
booted (or bad usage). When a configuration cannot run here at all (no
route to the package registry, tools missing and not installable, not
root for a build), it prints `SKIP field CONFIG: reason` and, when
FORGE_SKIP_LOG is set, appends that line to the file; skipped rows do not
change the exit status, but are never counted as passes.

Time (2 cores, TCG): a base image takes 1-3 minutes to build; each
configuration about 2-3 minutes to boot and walk.
EOF
}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SRC=$ROOT/tests/field
FIELD=$ROOT/target/field
ALL_CONFIGS=(deb12-user deb13-user deb13-installed deb13-nouserns deb13-root)
DEFAULT_CONFIGS=(deb12-user deb13-user)
COLUMNS_=(config distro kernel cgroup confine totals asks selftest turn hook restart second)
HEADERS_=(CONFIG DISTRIBUTION KERNEL CGROUP CONFINES TOTALS ASKS SELF-TEST TURN HOOK RESTART SECOND-DAEMON)
PACKAGES=(systemd systemd-sysv udev dbus dbus-user-session libpam-systemd linux-image-amd64
    ca-certificates curl git jq procps)
IMAGE_SIZE=4G
IMAGE_FORMAT=1   # bump when the way images are made changes
BOOT_LIMIT=420   # seconds for the walk to start (a healthy boot: 70-120)
RUN_LIMIT=2400   # seconds for a whole boot and walk
ATTEMPTS=3

# What each configuration is: suite, user, how forged runs, userns off.
config_info() {
    case $1 in
        deb12-user) echo "bookworm dev autostart 0" ;;
        deb13-user) echo "trixie dev autostart 0" ;;
        deb13-installed) echo "trixie dev installed 0" ;;
        deb13-nouserns) echo "trixie dev autostart 1" ;;
        deb13-root) echo "trixie root autostart 0" ;;
        *) return 1 ;;
    esac
}

say() { echo "field-check: $*" >&2; }
die() {
    say "$*"
    exit 2
}

configs=()
bin_dir=$ROOT/target/debug
keep=0
while [ $# -gt 0 ]; do
    case $1 in
        --config)
            [ $# -ge 2 ] || die "--config needs a NAME"
            IFS=, read -r -a names <<<"$2"
            configs+=("${names[@]}")
            shift 2
            ;;
        --config=*)
            IFS=, read -r -a names <<<"${1#--config=}"
            configs+=("${names[@]}")
            shift
            ;;
        --all)
            configs+=("${ALL_CONFIGS[@]}")
            shift
            ;;
        --bin-dir)
            [ $# -ge 2 ] || die "--bin-dir needs a DIR"
            bin_dir=$2
            shift 2
            ;;
        --bin-dir=*)
            bin_dir=${1#--bin-dir=}
            shift
            ;;
        --keep)
            keep=1
            shift
            ;;
        -h | --help)
            usage
            exit 0
            ;;
        *)
            usage >&2
            die "unknown argument: $1"
            ;;
    esac
done
[ ${#configs[@]} -gt 0 ] || configs=("${DEFAULT_CONFIGS[@]}")
# Each once, in the order given.
declare -A seen=()
wanted=()
for c in "${configs[@]}"; do
    config_info "$c" >/dev/null || die "unknown configuration: $c (known: ${ALL_CONFIGS[*]})"
    [ -n "${seen[$c]:-}" ] || wanted+=("$c")
    seen[$c]=1
done

if [ ! -d "$bin_dir" ] && [ -d "$ROOT/$bin_dir" ]; then bin_dir=$ROOT/$bin_dir; fi
given_bin_dir=$bin_dir
bin_dir=$(cd "$bin_dir" 2>/dev/null && pwd) || die "no such --bin-dir: $given_bin_dir"
for b in forged forgectl forge-mock; do
    [ -x "$bin_dir/$b" ] || die "$bin_dir/$b is missing: build the binaries first (cargo build --workspace --bins)"
done

mkdir -p "$FIELD/images" "$FIELD/results" "$FIELD/tmp"
exec 9>"$FIELD/.lock"
flock -n 9 || die "another field-check is running (one VM at a time: $FIELD/.lock)"

# --- clean-up --------------------------------------------------------------
qemu_pid=
work_dirs=()
cleanup() {
    if [ -n "$qemu_pid" ] && kill -0 "$qemu_pid" 2>/dev/null; then
        kill "$qemu_pid" 2>/dev/null || true
        wait "$qemu_pid" 2>/dev/null || true
    fi
    if [ "$keep" = 0 ]; then
        for d in "${work_dirs[@]}"; do rm -rf "$d"; done
    elif [ ${#work_dirs[@]} -gt 0 ]; then
        for d in "${work_dirs[@]}"; do [ ! -e "$d" ] || say "kept: $d"; done
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

skip() { # CONFIG REASON
    echo "SKIP field $1: $2"
    if [ -n "${FORGE_SKIP_LOG:-}" ]; then echo "SKIP field $1: $2" >>"$FORGE_SKIP_LOG"; fi
}

# --- tools -----------------------------------------------------------------
# have_tools TOOL...: all on PATH (sbin included), installing what is
# missing with apt-get when that is possible.
export PATH=$PATH:/usr/sbin:/sbin
tool_package() {
    case $1 in
        qemu-system-x86_64) echo qemu-system-x86 ;;
        mmdebstrap) echo mmdebstrap ;;
        mkfs.ext4 | debugfs) echo e2fsprogs ;;
    esac
}
tools_problem=
have_tools() {
    local missing=() pkgs=() t
    for t in "$@"; do command -v "$t" >/dev/null || missing+=("$t"); done
    [ ${#missing[@]} -eq 0 ] && return 0
    for t in "${missing[@]}"; do pkgs+=("$(tool_package "$t")"); done
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        say "installing ${pkgs[*]} (for ${missing[*]})"
        if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${pkgs[@]}" >"$FIELD/apt.log" 2>&1; then
            apt-get update -q >>"$FIELD/apt.log" 2>&1 || true
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${pkgs[@]}" >>"$FIELD/apt.log" 2>&1 || true
        fi
    fi
    missing=()
    for t in "$@"; do command -v "$t" >/dev/null || missing+=("$t"); done
    [ ${#missing[@]} -eq 0 ] && return 0
    tools_problem="${missing[*]} missing and not installable (apt-get install ${pkgs[*]}; see $FIELD/apt.log)"
    return 1
}

# --- the package mirror: this machine's own apt configuration -------------
# The URI of the Debian archive among the apt sources (deb822 .sources
# files, then sources.list), empty when there is none (mmdebstrap then uses
# its default).
DEBIAN_SUITES='^(buster|bullseye|bookworm|trixie|forky|duke|sid|oldstable|stable|testing|unstable)$'
host_mirror() {
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk -v suites="$DEBIAN_SUITES" '
            function flush() {
                if (types ~ /(^| )deb( |$)/ && ok && uri != "") { print uri; found = 1; exit }
                types = ""; uri = ""; ok = 0
            }
            /^[ \t]*$/ { flush(); next }
            /^[ \t]*#/ { next }
            tolower($1) == "types:" { types = substr($0, index($0, ":") + 1) }
            tolower($1) == "uris:" { uri = $2 }
            tolower($1) == "suites:" { for (i = 2; i <= NF; i++) if ($i ~ suites) ok = 1 }
            tolower($1) == "enabled:" && tolower($2) == "no" { types = "" }
            END { if (!found) flush() }' "$f"
    done | head -n1 | grep . && return 0
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        awk -v suites="$DEBIAN_SUITES" '
            $1 == "deb" {
                i = 2
                if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
                if ($(i + 1) ~ suites) { print $i; exit }
            }' "$f"
    done | head -n1
}

# --- base images -------------------------------------------------------------
image_key() { # SUITE
    {
        echo "format $IMAGE_FORMAT suite $1 size $IMAGE_SIZE"
        echo "packages ${PACKAGES[*]}"
        cat "$SRC/image-setup.sh"
    } | sha256sum | cut -c1-12
}

declare -A image_failed=() image_skip=()
timings=()
# ensure_image SUITE: the image's directory in IMG; status 1 when it
# could not be built (image_failed), 3 when it cannot be here (image_skip).
IMG=
ensure_image() {
    local suite=$1 key dir
    key=$(image_key "$suite")
    dir=$FIELD/images/$suite-$key
    IMG=$dir
    if [ -f "$dir/ready" ]; then
        return 0
    fi
    [ -z "${image_failed[$suite]:-}" ] || return 1
    [ -z "${image_skip[$suite]:-}" ] || return 3
    if [ "$(id -u)" != 0 ]; then
        image_skip[$suite]="building the $suite image needs root (mmdebstrap, ownership kept by mkfs.ext4 -d)"
        return 3
    fi
    if ! have_tools mmdebstrap mkfs.ext4; then
        image_skip[$suite]=$tools_problem
        return 3
    fi
    local mirror t0 tmp log
    mirror=$(host_mirror || true)
    t0=$(date +%s)
    tmp=$(mktemp -d "$FIELD/tmp/image-$suite.XXXXXX")
    work_dirs+=("$tmp")
    log=$FIELD/images/$suite-$key.build.log
    local from="mmdebstrap's default mirror"
    [ -z "$mirror" ] || from="the mirror this machine's apt uses"
    say "building the $suite image (mmdebstrap from $from; log $log)"
    local include
    include=$(IFS=,; echo "${PACKAGES[*]}")
    if ! mmdebstrap --variant=minbase --include="$include" \
        --aptopt='Acquire::Check-Valid-Until "false"' --aptopt='Acquire::Check-Date "false"' \
        --customize-hook="sh '$SRC/image-setup.sh' \"\$1\"" \
        "$suite" "$tmp/rootfs" ${mirror:+"$mirror"} >"$log" 2>&1; then
        rm -rf "$tmp"
        if grep -qiE 'Could not resolve|Temporary failure resolving|Failed to fetch|Unable to connect|Connection (refused|timed out)|Network is unreachable|No route to host|Could not connect' "$log"; then
            image_skip[$suite]="no route to the package registry (mmdebstrap could not fetch the $suite index; see $log)"
            return 3
        fi
        image_failed[$suite]="mmdebstrap failed (see $log): $(tail -n 3 "$log" | tr '\n' ' ' | cut -c1-300)"
        return 1
    fi
    local kernel initrd
    kernel=$(ls "$tmp"/rootfs/boot/vmlinuz-* 2>/dev/null | sort -V | tail -n1)
    initrd=$(ls "$tmp"/rootfs/boot/initrd.img-* 2>/dev/null | sort -V | tail -n1)
    if [ -z "$kernel" ] || [ -z "$initrd" ]; then
        rm -rf "$tmp"
        image_failed[$suite]="no kernel or initrd in the $suite root file system"
        return 1
    fi
    mkdir -p "$tmp/image"
    if ! cp "$kernel" "$tmp/image/vmlinuz" || ! cp "$initrd" "$tmp/image/initrd.img" ||
        ! mkfs.ext4 -q -F -L fieldroot -d "$tmp/rootfs" "$tmp/image/root.ext4" "$IMAGE_SIZE" >>"$log" 2>&1; then
        rm -rf "$tmp"
        image_failed[$suite]="copying the kernel or mkfs.ext4 -d failed (see $log)"
        return 1
    fi
    chmod 0444 "$tmp/image/root.ext4"
    {
        echo "suite=$suite key=$key kernel=${kernel##*/vmlinuz-} built=$(date -u +%FT%TZ) seconds=$(($(date +%s) - t0))"
        echo "packages=${PACKAGES[*]}"
    } >"$tmp/image/ready"
    rm -rf "$dir"
    mv "$tmp/image" "$dir" || {
        image_failed[$suite]="cannot move the image to $dir"
        return 1
    }
    rm -rf "$tmp"
    # Older images of this suite are of no use any more.
    find "$FIELD/images" -maxdepth 1 -name "$suite-*" ! -name "$suite-$key*" -exec rm -rf {} + 2>/dev/null || true
    timings+=("image $suite: built in $(($(date +%s) - t0)) s")
    say "the $suite image is ready ($(($(date +%s) - t0)) s)"
}

# --- one boot ----------------------------------------------------------------
# boot IMAGE_DIR WALK_DISK CONSOLE: 0 when the walk reported its results,
# 1 otherwise (no walk started, a panic, a timeout).
boot() {
    local img=$1 disk=$2 console=$3 t0 started=0
    t0=$(date +%s)
    timeout --kill-after=20 "$RUN_LIMIT" qemu-system-x86_64 \
        -accel tcg,thread=multi -cpu max -m 2048 -smp 2 \
        -kernel "$img/vmlinuz" -initrd "$img/initrd.img" \
        -append "root=/dev/vda rw console=ttyS0 quiet panic=-1" \
        -drive "file=$img/root.ext4,format=raw,if=virtio,snapshot=on" \
        -drive "file=$disk,format=raw,if=virtio" \
        -nodefaults -nic none -display none -monitor none -serial stdio -no-reboot \
        </dev/null >"$console" 2>"$console.qemu" &
    qemu_pid=$!
    while kill -0 "$qemu_pid" 2>/dev/null; do
        sleep 2
        if [ "$started" = 0 ]; then
            if grep -q 'FIELD-BEGIN' "$console"; then
                started=1
                say "  walk started after $(($(date +%s) - t0)) s"
            elif [ $(($(date +%s) - t0)) -gt "$BOOT_LIMIT" ]; then
                say "  no walk after $BOOT_LIMIT s: stopping this boot"
                kill "$qemu_pid" 2>/dev/null || true
            fi
        fi
        if grep -q 'Kernel panic' "$console"; then
            say "  kernel panic (TCG): $(grep -m1 'Kernel panic' "$console" | tr -d '\r' | cut -c1-120)"
            kill "$qemu_pid" 2>/dev/null || true
        fi
    done
    wait "$qemu_pid" || true
    qemu_pid=
    grep -q 'FIELD-RESULT-END' "$console"
}

# --- one configuration ---------------------------------------------------------
declare -A status=() cells=()
run_config() {
    local name=$1 suite user daemon nouserns img rc=0
    read -r suite user daemon nouserns <<<"$(config_info "$name")"
    local res=$FIELD/results/$name
    rm -rf "$res"
    mkdir -p "$res"
    ensure_image "$suite" || rc=$?
    img=$IMG
    if [ "$rc" = 3 ]; then
        skip "$name" "${image_skip[$suite]}"
        status[$name]=skip
        return 0
    elif [ "$rc" != 0 ]; then
        say "$name: ${image_failed[$suite]}"
        echo "image: ${image_failed[$suite]}" >"$res/details.txt"
        status[$name]=error
        return 0
    fi

    local work stage
    work=$(mktemp -d "$FIELD/tmp/run-$name.XXXXXX")
    work_dirs+=("$work")
    stage=$work/stage
    mkdir -p "$stage/bin" "$stage/guest"
    for b in forged forgectl forge-mock forge; do
        [ -x "$bin_dir/$b" ] || continue
        cp -l "$bin_dir/$b" "$stage/bin/" 2>/dev/null || cp "$bin_dir/$b" "$stage/bin/"
    done
    cp "$SRC/guest/boot.sh" "$SRC/guest/walk.sh" "$stage/guest/"
    printf 'CONFIG=%s\nWALK_USER=%s\nDAEMON=%s\nNOUSERNS=%s\n' "$name" "$user" "$daemon" "$nouserns" >"$stage/config"
    local mb
    mb=$(($(du -sm "$stage" | cut -f1) + 256))

    local attempt t0 ok=0 console
    for attempt in $(seq 1 "$ATTEMPTS"); do
        rm -f "$work/walk.ext4"
        mkfs.ext4 -q -F -L fieldwalk -d "$stage" "$work/walk.ext4" "${mb}M" >"$work/mkfs.log" 2>&1 ||
            die "$name: mkfs.ext4 -d of the walk disk failed: $(cat "$work/mkfs.log")"
        console=$res/console.$attempt.log
        say "$name: booting $suite (attempt $attempt of $ATTEMPTS)"
        t0=$(date +%s)
        if boot "$img" "$work/walk.ext4" "$console"; then
            ok=1
            break
        fi
        say "$name: attempt $attempt gave no results after $(($(date +%s) - t0)) s"
    done
    local secs=$(($(date +%s) - t0))
    timings+=("$name: boot+walk $secs s (attempt $attempt)")
    cp "$console" "$res/console.log"

    # Everything the guest wrote, read from the walk disk without mounting.
    debugfs -R "rdump /out $res" "$work/walk.ext4" >"$res/debugfs.log" 2>&1 || true
    if [ -d "$res/out" ]; then
        (cd "$res/out" && find . -mindepth 1 -maxdepth 1 -exec mv -f {} .. \;)
        rmdir "$res/out" 2>/dev/null || true
    fi
    local result=$res/result
    if [ ! -s "$result" ]; then
        # From the serial line instead.
        tr -d '\r' <"$console" | sed -n '/FIELD-RESULT-BEGIN/,/FIELD-RESULT-END/p' | grep '=' >"$result" || true
    fi
    if [ "$ok" = 0 ] || [ ! -s "$result" ]; then
        say "$name: no results after $ATTEMPTS boots (consoles in $res)"
        status[$name]=error
        return 0
    fi
    local col val
    for col in "${COLUMNS_[@]}"; do
        val=$(sed -n "s/^$col=//p" "$result" | tail -n1 | tr '\t' ' ')
        cells[$name,$col]=${val:-?}
    done
    status[$name]=ran
    say "$name: done in $secs s"
    {
        echo "configuration: $name (suite $suite, user $user, daemon $daemon, user namespaces off: $nouserns)"
        echo "binaries: $bin_dir"
        echo "image: $(head -n1 "$img/ready")"
        echo "boot+walk: $secs s, attempt $attempt of $ATTEMPTS"
        echo
        cat "$result"
        echo
        echo "walk log:"
        cat "$res/walk.log" 2>/dev/null
    } >"$res/details.txt"
}

# --- run -------------------------------------------------------------------------
if ! have_tools qemu-system-x86_64 mkfs.ext4 debugfs; then
    for c in "${wanted[@]}"; do skip "$c" "$tools_problem"; done
    exit 0
fi
t_all=$(date +%s)
for c in "${wanted[@]}"; do run_config "$c"; done

# --- the table, and the expectations ----------------------------------------------
declare -A expected=()
if [ -f "$SRC/expected.tsv" ]; then
    while IFS=$'\t' read -r -a row; do
        [ ${#row[@]} -gt 0 ] || continue
        case ${row[0]} in '#'* | '') continue ;; esac
        for i in "${!COLUMNS_[@]}"; do expected[${row[0]},${COLUMNS_[$i]}]=${row[$i]:-*}; done
        expected[${row[0]}]=1
    done <"$SRC/expected.tsv"
fi

table=$FIELD/results/table.txt
{
    (IFS=$'\t'; echo "${HEADERS_[*]}")
    for c in "${wanted[@]}"; do
        line=()
        if [ "${status[$c]}" = ran ]; then
            for col in "${COLUMNS_[@]}"; do line+=("${cells[$c,$col]}"); done
        else
            line=("$c" "${status[$c]^^}")
        fi
        (IFS=$'\t'; echo "${line[*]}")
    done
} | awk -F'\t' '
    { for (i = 1; i <= NF; i++) { cell[NR, i] = $i; if (length($i) > w[i]) w[i] = length($i) } n[NR] = NF; rows = NR }
    END {
        for (r = 1; r <= rows; r++) {
            s = ""
            for (i = 1; i <= n[r]; i++) s = s sprintf(i < n[r] ? "%-" w[i] "s | " : "%s", cell[r, i])
            print s
        }
    }' >"$table"
echo
cat "$table"
echo

code=0
for c in "${wanted[@]}"; do
    case ${status[$c]} in
        error) code=2 ;;
        skip) ;;
        ran)
            if [ -z "${expected[$c]:-}" ]; then
                echo "MISMATCH $c: no line in tests/field/expected.tsv"
                [ "$code" = 2 ] || code=1
                continue
            fi
            for col in "${COLUMNS_[@]}"; do
                pattern=${expected[$c,$col]}
                # shellcheck disable=SC2053 # the expectation is a glob
                if [[ ${cells[$c,$col]} != $pattern ]]; then
                    echo "MISMATCH $c $col: expected '$pattern', got '${cells[$c,$col]}'"
                    [ "$code" = 2 ] || code=1
                fi
            done
            ;;
    esac
done
for t in "${timings[@]}"; do echo "time: $t"; done
echo "time: all $(($(date +%s) - t_all)) s; details in $FIELD/results/CONFIG/"
skipped=0
for c in "${wanted[@]}"; do [ "${status[$c]}" != skip ] || skipped=$((skipped + 1)); done
case $code in
    0) if [ "$skipped" -gt 0 ]; then
        echo "field-check: $skipped of ${#wanted[@]} configuration(s) SKIPPED (above); the rows that ran matched"
    else
        echo "field-check: every row matched its expectations"
    fi ;;
    1) echo "field-check: rows differ from tests/field/expected.tsv (above)" ;;
    2) echo "field-check: an image could not be built or a VM could not be booted" ;;
esac
exit "$code"
