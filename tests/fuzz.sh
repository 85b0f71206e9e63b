#!/usr/bin/env bash
# Runs every cargo-fuzz target in crates/tools/fuzz/ for a bounded time on its seed corpus
# (crates/tools/fuzz/corpus/<target>/), on the stable toolchain. Exits non-zero if any
# target crashes (a panic, a failed check, a hang), naming the input that did.
#
#   FUZZ_SECONDS  seconds per target (default 15)
#   FUZZ_JOBS     targets run side by side (default: the number of cores)
#   FUZZ_TARGETS  the targets to run, space-separated (default: all)
#
# New inputs the fuzzer finds go to a scratch corpus, crates/tools/fuzz/target/corpus/, made
# anew each run, so the checked-in corpus never changes; crash inputs go to
# crates/tools/fuzz/artifacts/<target>/. See crates/tools/fuzz/README.md for longer runs.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FUZZ="$ROOT/crates/tools/fuzz"
cd "$FUZZ"

CARGO_FUZZ_VERSION="0.13.2"
secs="${FUZZ_SECONDS:-15}"
jobs="${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}"
started=$SECONDS

# Into the cargo bin directory, once. A debug build: cargo-fuzz only drives
# cargo and the fuzzer, and builds in less time that way.
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "cargo install cargo-fuzz $CARGO_FUZZ_VERSION"
  cargo install cargo-fuzz --locked --debug --version "$CARGO_FUZZ_VERSION"
fi
installed=$SECONDS

# Short runs gain more from a quicker build than from faster code.
if [ "$secs" -le 60 ]; then
  export CARGO_PROFILE_RELEASE_OPT_LEVEL="${CARGO_PROFILE_RELEASE_OPT_LEVEL:-1}"
fi
# No sanitizer: that is what works on stable (a Rust panic is the crash that
# matters here, and safe code has no memory errors for ASan to find).
# --fuzz-dir: cargo-fuzz looks for fuzz/ at the workspace root otherwise.
echo "cargo fuzz build --fuzz-dir crates/tools/fuzz --sanitizer none"
cargo fuzz build --fuzz-dir "$FUZZ" --sanitizer none
built=$SECONDS

host="$(rustc -vV | sed -n 's/^host: //p')"
bin_dir="$FUZZ/target/$host/release"
targets="${FUZZ_TARGETS:-$(cargo fuzz list --fuzz-dir "$FUZZ")}"
scratch="$FUZZ/target/corpus"
logs="$FUZZ/target/logs"
rm -rf "$scratch" "$logs"
mkdir -p "$logs"

# One target: fuzz for $secs seconds from its seeds. -timeout makes a hang a
# crash; -max_len leaves room to grow past the largest seed.
fuzz_one() {
  local t="$1" rc=0
  mkdir -p "$scratch/$t" "$FUZZ/artifacts/$t"
  "$bin_dir/$t" "$scratch/$t" "$FUZZ/corpus/$t" \
    -artifact_prefix="$FUZZ/artifacts/$t/" \
    -max_total_time="$secs" -timeout=10 -max_len=8192 \
    -rss_limit_mb=2048 -print_final_stats=1 >"$logs/$t.log" 2>&1 || rc=$?
  echo "$rc" >"$logs/$t.rc"
}

echo "fuzzing $(echo $targets | wc -w) targets for ${secs}s each, $jobs at a time"
for t in $targets; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
    wait -n || true
  done
  fuzz_one "$t" &
done
wait

status=0
for t in $targets; do
  rc="$(cat "$logs/$t.rc" 2>/dev/null || echo missing)"
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$logs/$t.log")"
  cov="$(grep -o 'cov: [0-9]*' "$logs/$t.log" | tail -n 1 || true)"
  if [ "$rc" -eq 0 ]; then
    printf '  %-16s ok    %9s runs  %s\n' "$t" "${runs:-?}" "$cov"
  else
    status=1
    printf '  %-16s CRASH (exit %s)\n' "$t" "$rc"
    # The panic message (or libFuzzer's report of a hang or out-of-memory),
    # without the backtrace's frames.
    {
      if grep -q 'panicked at' "$logs/$t.log"; then
        sed -n '/panicked at/,$p' "$logs/$t.log"
      else
        tail -n 30 "$logs/$t.log"
      fi
    } | grep -v -E '^#[0-9]+|^(INFO|WARNING):|^stat::|NEW_FUNC|^ +(at )?[0-9]*:? ' |
      head -n 60 | sed 's/^/    /' || true
    crash="$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$logs/$t.log" | tail -n 1)"
    echo "    crash input: ${crash:-(none written; see $logs/$t.log)}"
    [ -z "$crash" ] || echo "    reproduce:   cargo fuzz run --fuzz-dir crates/tools/fuzz --sanitizer none $t $crash"
  fi
done

echo "fuzz: install $((installed - started))s, build $((built - installed))s, fuzzing $((SECONDS - built))s, total $((SECONDS - started))s"
if [ "$status" -ne 0 ]; then
  echo "fuzz: a target crashed (inputs above)" >&2
fi
exit "$status"
