#!/usr/bin/env bash
# The one test command: ./tests/run.sh (from any directory).
#
# 1. installs what the tests need (Debian packages if missing, the pinned npm
#    packages from tests/node/package-lock.json, a Python venv at
#    target/py-venv with tests/python/requirements.txt)
# 2. cargo test, which writes translated streams into target/golden
# 3. proves the committed fixtures are still the real packages' bytes
# 4. runs the real clients (ai, @ag-ui/client) on the fixtures and on
#    target/golden
# 5. end to end over sockets: real clients (ai, @ag-ui/client, headless
#    Chromium) -> babelgate serve -> real agents (Python AG-UI SDK, ai helpers)
#
# SKIP_CARGO=1 skips step 2 (handy while working on tests/ only; CI must not set it).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

PYTHON="${PYTHON:-python3}"
VENV="$ROOT/target/py-venv"
GOLDEN="$ROOT/target/golden"
# Debian packages the tests need beyond Node 20, Python 3.11 and Rust.
APT_PACKAGES="chromium redis-server"

step() { printf '\n==> %s\n' "$*"; }

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

step "cargo test --workspace --all-targets (writes target/golden)"
export BABELGATE_GOLDEN_OUT="$GOLDEN"
if [ "${SKIP_CARGO:-}" = "1" ]; then
  echo "skipped: SKIP_CARGO=1"
else
  # Only this run's outputs should be validated below.
  rm -rf "$GOLDEN"
  cargo test --workspace --all-targets
fi

step "fixtures are the real packages' bytes"
"$VENV/bin/python" tests/python/make_fixtures.py --check tests/fixtures/ag-ui
node tests/node/make-fixtures.mjs tests/fixtures/vercel --check
echo "tests/fixtures/ag-ui and tests/fixtures/vercel are up to date"

step "real clients on fixtures and translated output"
total_passed=0
total_failed=0
status=0
# Runs every validator even if one fails, and adds up their summary lines.
validate() {
  local out rc=0 summary
  out="$(mktemp)"
  node "$@" | tee "$out" || rc=$?
  summary="$(tail -n 1 "$out")"
  rm -f "$out"
  if [[ "$summary" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
    total_passed=$((total_passed + BASH_REMATCH[1]))
    total_failed=$((total_failed + BASH_REMATCH[2]))
  else
    total_failed=$((total_failed + 1))
  fi
  [ "$rc" -eq 0 ] || status=1
}
echo "-- validate-vercel --fixtures"
validate tests/node/validate-vercel.mjs --fixtures
echo "-- validate-agui --fixtures"
validate tests/node/validate-agui.mjs --fixtures
if [ -d "$GOLDEN" ]; then
  echo "-- validate-vercel target/golden"
  validate tests/node/validate-vercel.mjs "$GOLDEN"
  echo "-- validate-agui target/golden"
  validate tests/node/validate-agui.mjs "$GOLDEN"
else
  echo "-- target/golden does not exist (cargo test wrote no translated output): golden validation skipped"
fi

echo
echo "validators: $total_passed passed, $total_failed failed"

step "fuzz: every cargo-fuzz target in fuzz/ for a bounded time (tests/fuzz.sh)"
./tests/fuzz.sh || status=1

step "end to end: real clients -> babelgate serve -> real agents (node --test tests/node/e2e/)"
# The suite runs target/debug/babelgate; make sure it is this tree's.
cargo build -p babelgate
# Logs of every process it starts: target/e2e-logs/<test file>/.
node --test tests/node/e2e/ || status=1
exit "$status"
