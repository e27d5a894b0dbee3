#!/usr/bin/env bash
# Builds Forge's leanest release binaries, optimised with a profile of real
# turns (profile-guided optimisation), into target/pgo/release/:
#   1. an instrumented release build (target/pgo-gen/);
#   2. the send benchmark run with it on every wire format, against the
#      in-tree mock (no network, no key), each process writing its profile;
#      then, if valgrind is installed, a few turns under callgrind, which
#      also names the standard library and C functions a turn runs;
#   3. the profiles merged (llvm-profdata, from `rustup component add
#      llvm-tools`), and the list of every function that ran
#      (scripts/pgo_order.py);
#   4. the release build again, optimised with that profile, with the code
#      the profile never ran kept apart from the code it ran (lld's
#      -z keep-text-section-prefix) and the functions that ran laid out
#      together (lld's --symbol-ordering-file): the kernel maps code in
#      64 KiB windows around each page touched, so a turn then maps a few
#      MiB of code instead of most of the binary. forgectl is linked with
#      the C library built in (scripts/static-forgectl-rustc.sh).
# Two full release builds: about 40 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

host="$(rustc -vV | sed -n 's/^host: //p')"
profdata="$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata"
if [ ! -x "$profdata" ]; then
  echo "pgo-build: llvm-profdata is missing; install it with: rustup component add llvm-tools" >&2
  exit 1
fi
if ! command -v python3 >/dev/null; then
  echo "pgo-build: python3 runs the benchmark that makes the profile; install it first" >&2
  exit 1
fi

work="$ROOT/target/pgo-data"
rm -rf "$work"
mkdir -p "$work/raw"

say "1/4 Instrumented release build (target/pgo-gen)"
RUSTFLAGS="-Cprofile-generate=$work/raw" CARGO_TARGET_DIR="$ROOT/target/pgo-gen" \
  cargo build --release --workspace --bins
# Build scripts and proc macros ran instrumented too: not part of the profile.
rm -f "$work/raw/"*

wires=(anthropic openai-chat openai-responses gemini)
say "2/4 Profiling: turns on every wire format, delivery to 10 clients, search, patch"
export LLVM_PROFILE_FILE="$work/raw/%m_%p.profraw"
gen="$ROOT/target/pgo-gen/release"
for wire in "${wires[@]}"; do
  python3 bench/send_bench.py --no-build --no-codex --runs 10 --wire "$wire" --bin-dir "$gen" >/dev/null
done
# Code the profile never runs is optimised for size: give the tools' hot
# loops and the journal under load their share too.
"$gen/forge-bench" --quick >/dev/null
"$gen/forge-bench" search "fn main" "$ROOT" >/dev/null || true
"$gen/forge-bench" patch >/dev/null

shopt -s nullglob  # no callgrind files without valgrind
mkdir -p "$work/callgrind"
if command -v valgrind >/dev/null; then
  # These runs add to the profile too: slower under valgrind, the same paths.
  for wire in "${wires[@]}"; do
    python3 bench/send_bench.py --no-build --no-codex --runs 2 --wire "$wire" --bin-dir "$gen" \
      --wrap "valgrind --tool=callgrind --demangle=no -q --callgrind-out-file=$work/callgrind/%p.out" >/dev/null
  done
else
  echo "pgo-build: valgrind is not installed, so the standard library's and SQLite's code is not laid out" >&2
  echo "  with the rest (about 1 MiB more resident); install it with: apt-get install valgrind" >&2
fi
unset LLVM_PROFILE_FILE

say "3/4 Merging the profiles; listing the functions that ran"
"$profdata" merge -o "$work/forge.profdata" "$work/raw/"
"$profdata" show --all-functions --counts "$work/forge.profdata" |
  python3 scripts/pgo_order.py --bin-dir "$gen" "$work/callgrind/"*.out > "$work/ran.txt"

say "4/4 Release build with the profile (target/pgo)"
RUSTFLAGS="-Cprofile-use=$work/forge.profdata -Clink-arg=-Wl,-z,keep-text-section-prefix \
-Clink-arg=-Wl,--symbol-ordering-file=$work/ran.txt -Clink-arg=-Wl,--no-warn-symbol-ordering" \
  RUSTC_WRAPPER="$ROOT/scripts/static-forgectl-rustc.sh" \
  CARGO_TARGET_DIR="$ROOT/target/pgo" cargo build --release --workspace --bins

say "Done: the binaries are in target/pgo/release/"
