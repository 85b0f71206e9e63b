#!/usr/bin/env bash
# The one test command: ./tests/run.sh (from any directory).
#
# 1. installs what the tests need (Debian packages if missing, the pinned npm
#    packages from tests/node/package-lock.json, a Python venv at
#    target/py-venv with tests/python/requirements.txt)
# 2. cargo test, which writes into a directory this run has just created
#    (target/test-output.XXXXXX, older ones removed): the translated golden
#    streams and the adapters' client dumps (AGUI_DUMP_DIR,
#    BABELGATE_VERCEL_CORPUS, AGKIT_CLIENT_CHECK_DIR)
# 3. proves the committed fixtures are still the real packages' bytes
# 4. runs the real clients (ai, @ag-ui/client, @cloudbase/agent-ui-web) and
#    the HAI spec rules on the fixtures and on this run's outputs, and the
#    validators' own tests (each must catch a broken stream)
# 5. end to end over sockets: real clients (ai, @ag-ui/client, headless
#    Chromium) -> babelgate serve -> real agents (Python AG-UI SDK, ai helpers)
#
# Every step runs even when one fails; the last line is `N passed, N failed`
# (one per validated file and one per other step) and the exit status is
# non-zero when anything failed.
#
# SKIP_CARGO=1 skips step 2 and so every check of its outputs (handy while
# working on tests/ only; CI must not set it): nothing older is validated in
# their place.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# A fresh build's incremental caches are gigabytes that a one-off run never
# reads again; CI machines have had little disk to spare.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

PYTHON="${PYTHON:-python3}"
VENV="$ROOT/target/py-venv"
# Debian packages the tests need beyond Node 20, Python 3.11 and Rust.
APT_PACKAGES="chromium redis-server nginx"

# Each step's wall time is printed at the end: CI has a 20-minute budget.
timings=()
step_name=""
step_started=$SECONDS
end_step() {
  [ -z "$step_name" ] || timings+=("$(printf '%5ss  %s' "$((SECONDS - step_started))" "$step_name")")
}
step() {
  end_step
  step_name="$*"
  step_started=$SECONDS
  printf '\n==> %s\n' "$*"
}

# Run a command with its output hidden, shown only if it fails.
quiet() {
  local log
  log="$(mktemp)"
  if "$@" >"$log" 2>&1; then
    rm -f "$log"
  else
    local rc=$?
    cat "$log" >&2
    rm -f "$log"
    echo "failed ($rc): $*" >&2
    return "$rc"
  fi
}

sha_of() { sha256sum "$@" | sha256sum | cut -d' ' -f1; }

step "install test dependencies"
apt_wanted="$APT_PACKAGES"
# Debian's own python3 ships without ensurepip; venv then needs python3-venv.
if ! "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1; then
  apt_wanted="$apt_wanted python3-venv"
fi
if [ -n "${apt_wanted// /}" ] && command -v apt-get >/dev/null 2>&1; then
  missing=()
  for pkg in $apt_wanted; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "apt-get install ${missing[*]}"
    quiet $sudo apt-get update
    quiet $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
  fi
fi

# npm ci wipes node_modules each time; skip it while the lockfile is unchanged.
node_stamp="tests/node/node_modules/.babelgate-lock-sha"
node_sha="$(sha_of tests/node/package-lock.json tests/node/package.json)"
if [ "$(cat "$node_stamp" 2>/dev/null)" != "$node_sha" ]; then
  echo "npm ci (tests/node)"
  quiet npm ci --prefix tests/node --no-audit --no-fund
  echo "$node_sha" >"$node_stamp"
fi

py_stamp="$VENV/.babelgate-requirements-sha"
py_sha="$(sha_of tests/python/requirements.txt)"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
  echo "python venv at target/py-venv"
  rm -rf "$VENV"
  quiet "$PYTHON" -m venv "$VENV"
fi
if [ "$(cat "$py_stamp" 2>/dev/null)" != "$py_sha" ]; then
  echo "pip install -r tests/python/requirements.txt"
  quiet "$VENV/bin/python" -m pip install --disable-pip-version-check -q -r tests/python/requirements.txt
  echo "$py_sha" >"$py_stamp"
fi

passed=0
failed=0
failures=()
ok() { passed=$((passed + 1)); }
bad() {
  failed=$((failed + 1))
  failures+=("$*")
  echo "FAILED: $*" >&2
}
# Runs one step; its failure is counted and the run goes on.
check() {
  local name="$1"
  shift
  if "$@"; then ok; else bad "$name"; fi
}

# Runs a validator and adds its per-file results. It fails as a whole when it
# exits non-zero, prints no summary, or passed nothing (it saw no files).
validate() {
  local out rc=0 summary
  echo "-- ${*#tests/node/}"
  out="$(mktemp)"
  node "$@" | tee "$out" || rc=$?
  summary="$(tail -n 1 "$out")"
  rm -f "$out"
  if [[ "$summary" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
    passed=$((passed + BASH_REMATCH[1]))
    failed=$((failed + BASH_REMATCH[2]))
    [ "${BASH_REMATCH[2]}" -eq 0 ] || failures+=("$* (${BASH_REMATCH[2]} files)")
    if [ "${BASH_REMATCH[1]}" -eq 0 ]; then
      bad "$*: passed nothing"
    elif [ "$rc" -ne 0 ] && [ "${BASH_REMATCH[2]}" -eq 0 ]; then
      bad "$*: exit status $rc"
    fi
  else
    bad "$*: no summary line (exit status $rc)"
  fi
}

step "cargo test --workspace --all-targets (writes this run's outputs)"
# A directory made now, so that only this run's outputs are validated below.
rm -rf "$ROOT"/target/test-output.* "$ROOT/target/golden"
RUN_OUT=""
if [ "${SKIP_CARGO:-}" = "1" ]; then
  echo "skipped: SKIP_CARGO=1 (so are the checks of its outputs)"
else
  mkdir -p "$ROOT/target"
  RUN_OUT="$(mktemp -d "$ROOT/target/test-output.XXXXXX")"
  echo "outputs: ${RUN_OUT#"$ROOT/"}"
  export BABELGATE_GOLDEN_OUT="$RUN_OUT/golden"
  export AGUI_DUMP_DIR="$RUN_OUT/dump-ag-ui"
  export BABELGATE_VERCEL_CORPUS="$RUN_OUT/dump-vercel"
  export AGKIT_CLIENT_CHECK_DIR="$RUN_OUT/dump-agkit"
  check "cargo test" cargo test --workspace --all-targets
  unset BABELGATE_GOLDEN_OUT AGUI_DUMP_DIR BABELGATE_VERCEL_CORPUS AGKIT_CLIENT_CHECK_DIR
fi

step "fixtures are the real packages' bytes"
check "ag-ui fixtures" "$VENV/bin/python" tests/python/make_fixtures.py --check tests/fixtures/ag-ui
check "vercel fixtures" node tests/node/make-fixtures.mjs tests/fixtures/vercel --check
check "ag-ui proto corpus (@ag-ui/proto 1.0.0)" node tests/node/proto-corpus.mjs crates/lib/proto/testdata --check

step "real clients and the HAI rules on fixtures and on this run's outputs"
for v in vercel agui hai agkit; do
  validate "tests/node/validate-$v.mjs" --fixtures
done
if [ -n "$RUN_OUT" ]; then
  # What cargo test was asked to write must be there, made by this run.
  for d in golden dump-ag-ui dump-vercel dump-agkit; do
    [ -d "$RUN_OUT/$d" ] || bad "cargo test wrote nothing into $d"
  done
  for v in vercel agui hai agkit; do
    [ -d "$RUN_OUT/golden" ] && validate "tests/node/validate-$v.mjs" "$RUN_OUT/golden"
  done
  [ -d "$RUN_OUT/dump-ag-ui" ] && validate tests/node/validate-agui.mjs --dump "$RUN_OUT/dump-ag-ui"
  [ -d "$RUN_OUT/dump-vercel" ] && validate tests/node/validate-vercel.mjs --dump "$RUN_OUT/dump-vercel"
  [ -d "$RUN_OUT/dump-agkit" ] && validate tests/node/validate-agkit.mjs --dump "$RUN_OUT/dump-agkit"
  # The public AG-UI conformance validator: no error, no warning, on every
  # AG-UI output of this run and on the captures it is compared with.
  [ -d "$RUN_OUT/golden" ] && check "ag-ui-validate" "$VENV/bin/python" tests/python/agui_conformance.py \
    "$RUN_OUT/golden" tests/fixtures/ag-ui tests/fixtures/oracle tests/fixtures/oracle-mastra
else
  echo "-- not validated (SKIP_CARGO=1): golden streams and adapter dumps"
fi
echo "-- the validators catch broken streams (node --test tests/node/validator-tests/)"
check "validator tests" node --test tests/node/validator-tests/

step "fuzz: every cargo-fuzz target in crates/tools/fuzz/ for a bounded time (tests/fuzz.sh)"
# 10 s a target in the suite (fuzz.sh's own default is 15): most of what a
# short run finds it finds early, and the suite has a 20-minute budget.
check "fuzz" env FUZZ_SECONDS="${FUZZ_SECONDS:-10}" ./tests/fuzz.sh

step "end to end: real clients -> babelgate serve -> real agents (node --test tests/node/e2e/)"
# The suite runs target/debug/babelgate. cargo test built it for the
# gateway's integration tests (had that build failed, this run is red
# already); a second build with the binary's own feature set cost 36 s warm
# and more on a clean machine.
# What goes into the binary: sources under src/, build scripts, .proto files
# and manifests (a test file changed since does not make it stale).
stale="$( [ -x target/debug/babelgate ] && find crates/lib crates/app adapters Cargo.toml Cargo.lock \( -path '*/src/*' -o -name build.rs -o -name '*.proto' -o -name Cargo.toml -o -name Cargo.lock \) -newer target/debug/babelgate -print -quit 2>/dev/null || echo missing)"
if [ -n "$RUN_OUT" ] && [ -z "$stale" ]; then
  echo "target/debug/babelgate: as this run's cargo test built it"
else
  check "cargo build -p babelgate" cargo build -p babelgate
fi
# Logs of every process it starts: target/e2e-logs/<test file>/. Two files
# at a time (node's default is one less than the cores, so one here): most
# of an e2e test is waiting on agents and browsers starting, and every test
# takes its ports from the OS (stack.mjs freePort). Measured back to back
# on a loaded machine (load 11-12): 340 s one file at a time, 268 s two.
check "end to end" node --test --test-concurrency=2 tests/node/e2e/

end_step
echo
echo "wall time per step (total $((SECONDS))s):"
printf '  %s\n' "${timings[@]}"
echo
if [ "${#failures[@]}" -gt 0 ]; then
  echo "failed:"
  printf '  %s\n' "${failures[@]}"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
