#!/usr/bin/env bash
# The benchmark: ./crates/tools/bench/run.sh (from any directory). Not part of the tests.
#
# 1. installs what it needs: nginx-light from Debian if missing, the pinned
#    npm packages of crates/tools/bench/node, a venv at target/bench-venv with
#    crates/tools/bench/python/requirements.txt
# 2. builds babelgate, core-bench and loadgen in release mode
# 3. core: core-bench's events/s for the framer, each decoder and encoder,
#    and the 16 pairs on the mixed stream
# 4. whole process: a 200,000-event AG-UI stream made by the AG-UI Python SDK
#    (crates/tools/bench/make_stream.py), translated to Vercel by `babelgate translate`,
#    by the official Node SDKs (crates/tools/bench/node/translate.mjs) and by the Python
#    SDK (crates/tools/bench/python/translate.py); best of 3 wall times, and each one's
#    start-up (the same on a 100-event stream); crates/tools/bench/same_content.py then
#    parses the three outputs and compares them chunk by chunk (ids aside)
# 5. load: one synthetic AG-UI upstream (loadgen upstream) and, side by side,
#    (a) the upstream directly, (b) nginx as a pass-through proxy with
#    buffering off, (c) babelgate serve translating AG-UI to Vercel (and
#    c-nolog: the same route with resume = false, no run log), (d) the
#    Node bridge with HttpAgent.runAgent (crates/tools/bench/node/server.mjs), (d2) the
#    same Node bridge without runAgent, the cheapest pipeline of the same
#    packages (crates/tools/bench/node/server-lean.mjs), (e) the Python bridge
#    (crates/tools/bench/python/server.py); each gets the same workloads from loadgen run:
#    saturation, 1,000 streams at 20 events/s, and (babelgate only) the most
#    concurrent open streams the file limit allows
#    - CPU per event (issue 43): SAT_RUNS rounds, each core-bench translating
#      the upstream's own stream (captured once with curl) AG-UI→Vercel,
#      then (b), (c) and (c-nolog) at saturation; loadgen reads each
#      process's user+system ticks from /proc/<pid>/stat at the start and
#      the end of the steady window (all streams open), its own and the
#      upstream's apart
#    The binary transport and WebSocket rows run the saturation and latency
#    workloads too, each on a fresh babelgate (wire_load below): client side,
#    an AG-UI SSE upstream to an AG-UI client over SSE (c-agui: same dialect,
#    frames passed through; the baseline of the next three), AG-UI protobuf
#    (c-bin), WebSocket JSON (c-ws) and WebSocket ag-ui.proto (c-wsbin); to
#    a HAI client over SSE (c-hai: translated) and protobuf (c-haibin: the
#    encoder writes binary); upstream side, to the Vercel client of (c) from
#    an AG-UI protobuf upstream (c-binup), a WebSocket JSON one (c-wsup) and
#    a WebSocket ag-ui.proto one (c-wsbinup)
#    - latency (issues 14 and 43): (a), (b), (c) and (c-nolog) alternating,
#      LAT_RUNS (5) rounds at 1,000 streams x 20 events/s; inter-event
#      latency and time to first event (request written to the first mark
#      read); the bridges once
#    - open streams: idle, peak and recovered RSS of babelgate (loadgen
#      --recover-s: RSS sampled for OPEN_RECOVER_S s after the last close)
#    - store (issue 14): a redis-server started here (Debian's; installed
#      if missing) on a free port; store-bench (crates/tools/bench) appends run-log
#      entries to it with N runs at once, pipelined batches of 1, 16 and 64,
#      and to the memory store; then babelgate with `[store] backend =
#      "redis"` against babelgate with the memory store, saturation and
#      1,000 x 20 events/s, alternating, CPU of babelgate and of Redis
#    - shapes (issue 37): the peak heap of one request body and of one
#      upstream event of each hostile shape, from the gateway's memory test
#      (cargo test -p babelgate --test memory, debug build as docs/memory.md;
#      built when this step comes, after every load measurement)
# 6. crates/tools/bench/report.py writes the targets table and the results into
#    docs/benchmarks.md and the plot docs/benchmarks.png from this run's
#    target/bench/*.json
#
# QUICK=1 runs every step with small sizes (a smoke run of the harness; its
# numbers mean nothing). Results stay in target/bench.
#
# To run a part only (the results section of docs/benchmarks.md is then left
# alone; report.py prints the tables of what ran):
#   ONLY=load        steps 1, 2 (babelgate and loadgen only) and 5
#   WORKLOADS="saturation latency open"   which load workloads (default all)
#   SYSTEMS="upstream nginx babelgate babelgate-nolog node node-lean python"
#                    which systems (default all; the open-streams workload
#                    is babelgate's and babelgate-nolog's);
#                    the transport rows: babelgate-agui babelgate-bin
#                    babelgate-ws babelgate-wsbin babelgate-hai babelgate-haibin
#                    babelgate-binup babelgate-wsup babelgate-wsbinup
#   PORT_OFFSET=N    every port of the load step moved by N (default 0)
#   WORKLOADS also knows "store" and "shapes" (default all five)
#   LAT_SIZES="1000:20:200:2000"   latency sizes, each streams:events/s per
#                    stream:events per stream:ramp ms (issue 14 also ran
#                    5000:4:60:5000)
#   LAT_RUNS=5       rounds at each latency size
#   SAT_RUNS=5       rounds of core-bench, (b), (c), (c-nolog) at saturation
#   SAT_ROUND_EVENTS=500000   events per stream in those rounds (20 streams:
#                    10,000,000 events, 2-4 s of each system: a steady
#                    window of hundreds of clock ticks)
#   OPEN_STREAMS=N   streams of the open-streams workload (also with QUICK=1)
#   OPEN_EVENTS="15 30"   its scenarios: events per stream (1 a second)
#   OPEN_RECOVER_S=30     RSS sampled this long after the last stream closed
#                    (the route keeps ended runs' logs 10 s there: retention_s)
#   STORE_RUNS=20 STORE_EVENTS=10000   store-bench: runs at once, events each
# e.g. ONLY=load WORKLOADS=open OPEN_STREAMS=2000 OPEN_EVENTS=15 ./crates/tools/bench/run.sh
#      ONLY=load WORKLOADS=latency SYSTEMS="upstream nginx babelgate" ./crates/tools/bench/run.sh
#      ONLY=load WORKLOADS=store ./crates/tools/bench/run.sh
# e.g. ONLY=load WORKLOADS=saturation SYSTEMS="upstream babelgate node node-lean" ./crates/tools/bench/run.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cd "$ROOT"
OUT="$ROOT/target/bench"
VENV="$ROOT/target/bench-venv"
PY="$VENV/bin/python"
# PROFILE=profiling: the same build with debug info, for perf and heaptrack.
PROFILE="${PROFILE:-release}"
BIN="$ROOT/target/$PROFILE"
mkdir -p "$OUT"
rm -f "$OUT"/*.json "$OUT"/*.jsonl

QUICK="${QUICK:-0}"
ONLY="${ONLY:-}"
WORKLOADS="${WORKLOADS:-saturation latency open store shapes}"
WIRE_SYSTEMS="babelgate-agui babelgate-bin babelgate-ws babelgate-wsbin babelgate-hai babelgate-haibin babelgate-binup babelgate-wsup babelgate-wsbinup"
SYSTEMS="${SYSTEMS:-upstream nginx babelgate babelgate-nolog node node-lean python $WIRE_SYSTEMS}"
case "$ONLY" in ""|load) ;; *) echo "ONLY=$ONLY: only ONLY=load is known" >&2; exit 2 ;; esac
has() { case " $1 " in *" $2 "*) return 0 ;; *) return 1 ;; esac; }
# OPEN_EVENTS from the environment: the open-streams scenarios to run
OPEN_SCENARIOS="${OPEN_EVENTS:-}"
if [ "$QUICK" = "1" ]; then
  STREAM_EVENTS=20000; CORE_EVENTS=20000; CORE_SECS=0.2
  SAT_STREAMS=4; SAT_EVENTS=2000
  LAT_STREAMS=50; LAT_RATE=20; LAT_EVENTS=40
  OPEN_STREAMS="${OPEN_STREAMS:-500}"; OPEN_EVENTS=5
  LAT_SIZES="${LAT_SIZES:-50:20:40:1000 200:4:12:1000}"; OPEN_RECOVER_S="${OPEN_RECOVER_S:-5}"
  STORE_RUNS="${STORE_RUNS:-4}"; STORE_EVENTS="${STORE_EVENTS:-2000}"
else
  STREAM_EVENTS=200000; CORE_EVENTS=200000; CORE_SECS=2
  SAT_STREAMS=20; SAT_EVENTS=10000
  LAT_STREAMS=1000; LAT_RATE=20; LAT_EVENTS=200
  # The sandbox's hard limit is 20,000 open files per process; babelgate
  # holds two per stream (client and upstream), so 9,900 is as far as it goes.
  OPEN_STREAMS="${OPEN_STREAMS:-9900}"; OPEN_EVENTS=30
  # 5,000 streams at 4 events/s: the same 20,000 events/s as 1,000 x 20, which
  # the two cores carry beside the load generator and the upstream (at 20/s
  # each, 100,000 events/s, babelgate alone would need about 3 cores).
  LAT_SIZES="${LAT_SIZES:-1000:20:200:2000}"; OPEN_RECOVER_S="${OPEN_RECOVER_S:-30}"
  STORE_RUNS="${STORE_RUNS:-20}"; STORE_EVENTS="${STORE_EVENTS:-10000}"
fi
LAT_RUNS="${LAT_RUNS:-5}"
SAT_RUNS="${SAT_RUNS:-5}"
# The rounds run seconds of each system, as load tools in the field do, not
# a burst: one run of SAT_EVENTS lasts 40-100 ms of babelgate and nginx, a
# cold burst (the run log's first pages faulted in). /proc counts CPU in
# ticks of 10 ms, so the steady window needs seconds of a busy process to
# hold hundreds of them.
if [ "$QUICK" = "1" ]; then SAT_ROUND_EVENTS="${SAT_ROUND_EVENTS:-2000}"; else SAT_ROUND_EVENTS="${SAT_ROUND_EVENTS:-500000}"; fi
[ -n "$OPEN_SCENARIOS" ] || OPEN_SCENARIOS="15 $OPEN_EVENTS"

step() { printf '\n==> %s\n' "$*"; }
quiet() {
  local log rc
  log="$(mktemp)"
  if "$@" >"$log" 2>&1; then rm -f "$log"; else
    rc=$?; cat "$log" >&2; rm -f "$log"; echo "failed ($rc): $*" >&2; return "$rc"
  fi
}

step "install benchmark dependencies"
if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "apt-get install nginx-light"
  quiet $sudo apt-get update
  quiet $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nginx-light
fi
NGINX="$(command -v nginx || echo /usr/sbin/nginx)"
if has "$WORKLOADS" store && ! command -v redis-server >/dev/null 2>&1; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "apt-get install redis-server"
  quiet $sudo apt-get update
  quiet $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server
fi
stamp="crates/tools/bench/node/node_modules/.babelgate-lock-sha"
sha="$(sha256sum crates/tools/bench/node/package-lock.json crates/tools/bench/node/package.json | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$sha" ]; then
  echo "npm ci (crates/tools/bench/node)"
  quiet npm ci --prefix crates/tools/bench/node --no-audit --no-fund
  echo "$sha" >"$stamp"
fi
if [ ! -x "$PY" ] && ! { [ "$ONLY" = load ] && ! has "$SYSTEMS" python; }; then
  echo "python venv at target/bench-venv"
  quiet "${PYTHON:-python3}" -m venv "$VENV"
fi
pstamp="$VENV/.babelgate-requirements-sha"
psha="$(sha256sum crates/tools/bench/python/requirements.txt | cut -d' ' -f1)"
if [ -x "$PY" ] && [ "$(cat "$pstamp" 2>/dev/null)" != "$psha" ]; then
  echo "pip install -r crates/tools/bench/python/requirements.txt"
  quiet "$PY" -m pip install --disable-pip-version-check -q -r crates/tools/bench/python/requirements.txt
  echo "$psha" >"$pstamp"
fi

step "build (release)"
if [ "$ONLY" = load ]; then
  cargo build --profile "$PROFILE" -p babelgate -p babelgate-loadgen
  if has "$WORKLOADS" saturation; then cargo build --profile "$PROFILE" -p babelgate-bench --bin core-bench; fi
  if has "$WORKLOADS" store; then cargo build --profile "$PROFILE" -p babelgate-bench --bin store-bench; fi
else
  cargo build --profile "$PROFILE" -p babelgate -p babelgate-bench -p babelgate-loadgen
fi
# report.py and the machine facts want a Python; with ONLY=load and no venv
# the system one does (report.py then only prints, and needs no matplotlib).
[ -x "$PY" ] || PY="${PYTHON:-python3}"

step "machine"
{
  echo "{"
  echo "  \"cpu\": $(lscpu | sed -n 's/^Model name: *//p' | head -1 | "$PY" -c 'import json,sys; print(json.dumps(sys.stdin.read().strip()))'),"
  echo "  \"cores\": $(nproc),"
  echo "  \"mem_gib\": $(free -g | awk '/^Mem:/{print $2}'),"
  echo "  \"kernel\": \"$(uname -r)\","
  echo "  \"rustc\": \"$(rustc --version)\","
  echo "  \"node\": \"$(node --version)\","
  echo "  \"python\": \"$("$PY" --version | cut -d' ' -f2)\","
  echo "  \"nginx\": \"$("$NGINX" -v 2>&1 | sed 's/.*nginx\///')\","
  echo "  \"date\": \"$(date -u +%F)\","
  echo "  \"commit\": \"$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo +changes)\","
  echo "  \"load_before\": \"$(cut -d' ' -f1-3 /proc/loadavg)\","
  echo "  \"quick\": $([ "$QUICK" = "1" ] && echo true || echo false),"
  echo "  \"only\": \"$ONLY\""
  echo "}"
} >"$OUT/machine.json"
cat "$OUT/machine.json"

if [ "$ONLY" != load ]; then
step "core: framer, decoders, encoders, 16 pairs ($CORE_EVENTS-event mixed stream)"
"$BIN/core-bench" --events "$CORE_EVENTS" --min-secs "$CORE_SECS" --json >"$OUT/core.json"
"$PY" - "$OUT/core.json" <<'EOF'
import json, sys
for r in json.load(open(sys.argv[1])):
    print(f"{r['name']:<26} {r['events_per_sec']:>12,.0f} events/s {r['bytes_in_per_sec']/1e6:>8.1f} MB/s in {r['bytes_out_per_sec']/1e6:>8.1f} MB/s out")
EOF

step "whole process: $STREAM_EVENTS AG-UI events (Python SDK) to Vercel"
STREAM="$OUT/agui-$STREAM_EVENTS.sse"
[ -s "$STREAM" ] || "$PY" crates/tools/bench/make_stream.py --events "$STREAM_EVENTS" "$STREAM"
# best of 3 by wall time (bash's microsecond clock); /usr/bin/time gives
# user and system seconds and the max RSS (KiB) of the same run
timed() {
  local name="$1"; shift
  local log="$OUT/translate.jsonl"
  case "$name" in startup-*) log="$OUT/startup.jsonl" ;; esac
  local best="" line t0 t1
  for _ in 1 2 3; do
    t0=$EPOCHREALTIME
    /usr/bin/time -f '%U %S %M' -o "$OUT/time.txt" "$@" >"$OUT/translate-$name.out"
    t1=$EPOCHREALTIME
    line="$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.4f", b-a}') $(tail -1 "$OUT/time.txt")"
    if [ -z "$best" ] || awk -v a="${line%% *}" -v b="${best%% *}" 'BEGIN{exit !(a<b)}'; then best="$line"; fi
  done
  read -r wall user sys rss <<<"$best"
  printf '{"name":"%s","wall_s":%s,"user_s":%s,"sys_s":%s,"max_rss_kib":%s,"out_bytes":%s}\n' \
    "$name" "$wall" "$user" "$sys" "$rss" "$(wc -c <"$OUT/translate-$name.out")" >>"$log"
  echo "$name: ${wall}s wall (${user}s user), max RSS ${rss} KiB"
}
timed babelgate "$BIN/babelgate" translate --from ag-ui --to vercel "$STREAM"
timed node node crates/tools/bench/node/translate.mjs "$STREAM"
timed python "$PY" crates/tools/bench/python/translate.py "$STREAM"
# Start-up: each on a 100-event stream, so the report can say what share of
# the whole run start-up is (Node and Python load their modules first).
SMALL="$OUT/agui-100.sse"
[ -s "$SMALL" ] || "$PY" crates/tools/bench/make_stream.py --events 100 "$SMALL"
timed startup-babelgate "$BIN/babelgate" translate --from ag-ui --to vercel "$SMALL"
timed startup-node node crates/tools/bench/node/translate.mjs "$SMALL"
timed startup-python "$PY" crates/tools/bench/python/translate.py "$SMALL"
# The three outputs of the whole run, parsed and compared chunk by chunk.
"$PY" crates/tools/bench/same_content.py "$OUT/translate-babelgate.out" "$OUT/translate-node.out" "$OUT/translate-python.out" \
  | tee "$OUT/same-content.json" || echo "the three outputs differ (the report says where)" >&2
fi

step "load: (a) upstream, (b) nginx, (c) babelgate, (d) node, (d2) node lean, (e) python"
echo "systems: $SYSTEMS; workloads: $WORKLOADS"
# PORT_OFFSET=N moves every port by N (another run.sh on the same machine)
O="${PORT_OFFSET:-0}"
UP=$((19100 + O)); P_NGINX=$((18080 + O)); P_BG=$((18081 + O)); P_NODE=$((18082 + O)); P_PY=$((18083 + O)); P_LEAN=$((18084 + O))
. "$ROOT/crates/tools/bench/lib.sh"

"$BIN/loadgen" upstream --listen "127.0.0.1:$UP" 2>"$OUT/upstream.log" &
PIDS+=($!)
UPSTREAM_PID=$!

PORTS="$UP $P_BG"
if has "$SYSTEMS" nginx; then
mkdir -p "$OUT/nginx"
cat >"$OUT/nginx/nginx.conf" <<EOF
user root;
worker_processes auto;
worker_rlimit_nofile 20000;
daemon off;
pid $OUT/nginx/nginx.pid;
error_log $OUT/nginx/error.log warn;
events { worker_connections 19000; }  # 5,000 streams: two connections each, maybe all on one worker
http {
  access_log off;
  client_body_temp_path $OUT/nginx/body;
  proxy_temp_path $OUT/nginx/proxy;
  fastcgi_temp_path $OUT/nginx/fastcgi;
  uwsgi_temp_path $OUT/nginx/uwsgi;
  scgi_temp_path $OUT/nginx/scgi;
  server {
    listen 127.0.0.1:$P_NGINX backlog=4096;
    location / {
      proxy_pass http://127.0.0.1:$UP;
      proxy_http_version 1.1;
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_read_timeout 600s;
    }
  }
}
EOF
"$NGINX" -p "$OUT/nginx" -c "$OUT/nginx/nginx.conf" &
PIDS+=($!)
NGINX_MASTER=$!
PORTS+=" $P_NGINX"
fi

cat >"$OUT/gateway.toml" <<EOF
[server]
listen = "127.0.0.1:$P_BG"

[[routes]]
path = "/api/chat"
client = "vercel"
upstream = "http://127.0.0.1:$UP/agent"
upstream_protocol = "ag-ui"
forward_headers = ["x-bench"]

# (c-nolog): the same route without a run log (no resume).
[[routes]]
path = "/api/chat-nolog"
client = "vercel"
upstream = "http://127.0.0.1:$UP/agent"
upstream_protocol = "ag-ui"
forward_headers = ["x-bench"]
resume = false
EOF
BABELGATE_LOG=warn "$BIN/babelgate" serve --config "$OUT/gateway.toml" 2>"$OUT/babelgate.log" &
PIDS+=($!)
BG=$!

NODE=-; LEAN=-; PYS=-; NGINX_PIDS=-
if has "$SYSTEMS" node; then
  node crates/tools/bench/node/server.mjs --port "$P_NODE" --upstream "http://127.0.0.1:$UP/agent" >"$OUT/node.log" 2>&1 &
  PIDS+=($!); NODE=$!; PORTS+=" $P_NODE"
fi
if has "$SYSTEMS" node-lean; then
  node crates/tools/bench/node/server-lean.mjs --port "$P_LEAN" --upstream "http://127.0.0.1:$UP/agent" >"$OUT/node-lean.log" 2>&1 &
  PIDS+=($!); LEAN=$!; PORTS+=" $P_LEAN"
fi
if has "$SYSTEMS" python; then
  (cd crates/tools/bench/python && exec "$PY" server.py --port "$P_PY" --upstream "http://127.0.0.1:$UP/agent") >"$OUT/python.log" 2>&1 &
  PIDS+=($!); PYS=$!; PORTS+=" $P_PY"
fi

for p in $PORTS; do wait_port "$p"; done
if has "$SYSTEMS" nginx; then
  NGINX_PIDS="$(echo "$NGINX_MASTER" $(pgrep -P "$NGINX_MASTER") | tr ' ' ',')"
fi

# name url body pids
TARGETS=(
  "upstream http://127.0.0.1:$UP/agent agui -"
  "nginx http://127.0.0.1:$P_NGINX/agent agui $NGINX_PIDS"
  "babelgate http://127.0.0.1:$P_BG/api/chat vercel $BG"
  "babelgate-nolog http://127.0.0.1:$P_BG/api/chat-nolog vercel $BG"
  "node http://127.0.0.1:$P_NODE/api/chat vercel $NODE"
  "node-lean http://127.0.0.1:$P_LEAN/api/chat vercel $LEAN"
  "python http://127.0.0.1:$P_PY/api/chat vercel $PYS"
)
load() {
  local scenario="$1"; shift
  local t name url body pids
  for t in "${TARGETS[@]}"; do
    read -r name url body pids <<<"$t"
    has "$SYSTEMS" "$name" || continue
    local pid_arg=()
    [ "$pids" = "-" ] || pid_arg=(--pids "$pids")
    # warm-up, not recorded
    "$BIN/loadgen" run --url "$url" --body "$body" --streams 4 --events 200 --rate 0 "${pid_arg[@]}" >/dev/null
    "$BIN/loadgen" run --url "$url" --body "$body" --label "$scenario/$name" "${pid_arg[@]}" --others "$UPSTREAM_PID" "$@" | tee -a "$OUT/load.jsonl"
    sleep 1
  done
}
if has "$WORKLOADS" saturation; then
echo "-- saturation: $SAT_STREAMS streams x $SAT_EVENTS events, as fast as possible"
load saturation --streams "$SAT_STREAMS" --events "$SAT_EVENTS" --rate 0
# Issue 43: CPU per event relayed. The upstream's own stream, captured once
# through curl, is what core-bench translates (the translation alone); then
# SAT_RUNS rounds, each core-bench, (b), (c) and (c-nolog) in turn at
# SAT_ROUND_EVENTS per stream, seconds of each, whose steady windows give
# each process's CPU per event. Rounds, not one sitting per system, so that
# what else the shared machine runs falls on all of them alike.
SAME="$OUT/loadgen-stream.sse"
curl -sS -H "x-bench: events=200000;rate=0;pad=8" -H 'content-type: application/json' -d '{}' \
  "http://127.0.0.1:$UP/agent" >"$SAME"
grep -c '^data: ' "$SAME" | sed 's/^/core-bench input: upstream stream of /; s/$/ events/'
for run in $(seq 1 "$SAT_RUNS"); do
  echo "-- saturation round $run of $SAT_RUNS: core-bench on the same stream, (b), (c), (c-nolog), $SAT_STREAMS streams x $SAT_ROUND_EVENTS events"
  "$BIN/core-bench" --input "$SAME" --from ag-ui --only translate/ag-ui-vercel --min-secs "$CORE_SECS" --json \
    | "$PY" -c 'import json,sys; r=json.load(sys.stdin)[0]; r["label"]=sys.argv[1]; r["loadavg"]=" ".join(open("/proc/loadavg").read().split()[:3]); print(json.dumps(r))' "core-r$run" \
    | tee -a "$OUT/core-same.jsonl"
  SYSTEMS="$(for s in $SYSTEMS; do case "$s" in nginx|babelgate|babelgate-nolog) printf '%s ' "$s" ;; esac; done)" \
    load "saturation-r$run" --streams "$SAT_STREAMS" --events "$SAT_ROUND_EVENTS" --rate 0
done
fi
# Latency (issues 14 and 43): (a), (b), (c) and (c-nolog) one after the other
# in each round, LAT_RUNS rounds at each size of LAT_SIZES
# (streams:rate:events:ramp ms); the target takes the median of the rounds'
# p99 ratios, since nginx's own p99 moves by 3x between runs here.
latency_runs() {
  local size streams rate events ramp run t name url body pids
  for size in $LAT_SIZES; do
    IFS=: read -r streams rate events ramp <<<"$size"
    for run in $(seq 1 "$LAT_RUNS"); do
      echo "-- latency round $run of $LAT_RUNS: $streams streams x $rate events/s x $events events"
      for t in "${TARGETS[@]}"; do
        read -r name url body pids <<<"$t"
        case "$name" in upstream|nginx|babelgate|babelgate-nolog) ;; *) continue ;; esac
        has "$SYSTEMS" "$name" || continue
        local pid_arg=()
        [ "$pids" = "-" ] || pid_arg=(--pids "$pids")
        "$BIN/loadgen" run --url "$url" --body "$body" --streams 4 --events 200 --rate 0 "${pid_arg[@]}" >/dev/null
        "$BIN/loadgen" run --url "$url" --body "$body" --label "latency-$streams-r$run/$name" "${pid_arg[@]}" --others "$UPSTREAM_PID" \
          --streams "$streams" --events "$events" --rate "$rate" --ramp-ms "$ramp" --timeout-s 120 | tee -a "$OUT/load.jsonl"
        sleep 1
      done
    done
  done
}
if has "$WORKLOADS" latency; then
latency_runs
echo "-- latency: $LAT_STREAMS streams x $LAT_RATE events/s x $LAT_EVENTS events (the other systems, once)"
SYSTEMS="$(for s in $SYSTEMS; do case "$s" in upstream|nginx|babelgate|babelgate-nolog) ;; *) printf '%s ' "$s" ;; esac; done)" \
load latency --streams "$LAT_STREAMS" --events "$LAT_EVENTS" --rate "$LAT_RATE" --ramp-ms 2000 --timeout-s 120
fi
# ---- binary transport and WebSocket rows -----------------------------------
# Each row on a fresh babelgate (its RSS is that row's alone; (c)'s process
# also served the workloads before), same upstream, same workloads. The
# loadgen upstream answers a binary Accept in protobuf and a WebSocket upgrade
# in kind; `loadgen run --transport` reads each transport.
P_WIRE=$((18085 + O))
cat >"$OUT/gateway-wire.toml" <<EOF
[server]
listen = "127.0.0.1:$P_WIRE"

[[routes]]
path = "/ag-ui"
client = "ag-ui"
upstream = "http://127.0.0.1:$UP/agent"
upstream_protocol = "ag-ui"
forward_headers = ["x-bench"]

[[routes]]
path = "/hai"
client = "hai"
upstream = "http://127.0.0.1:$UP/agent"
upstream_protocol = "ag-ui"
forward_headers = ["x-bench"]

[[routes]]
path = "/proto-up"
client = "vercel"
upstream = "http://127.0.0.1:$UP/agent"
upstream_protocol = "ag-ui"
upstream_transport = "proto"
forward_headers = ["x-bench"]

[[routes]]
path = "/ws-up"
client = "vercel"
upstream = "ws://127.0.0.1:$UP/agent"
upstream_protocol = "ag-ui"
forward_headers = ["x-bench"]

[[routes]]
path = "/ws-proto-up"
client = "vercel"
upstream = "ws://127.0.0.1:$UP/agent"
upstream_protocol = "ag-ui"
upstream_transport = "proto"
forward_headers = ["x-bench"]
EOF
# name path body client-transport
WIRE=(
  "babelgate-agui /ag-ui agui sse"
  "babelgate-bin /ag-ui agui proto"
  "babelgate-ws /ag-ui agui ws"
  "babelgate-wsbin /ag-ui agui ws-proto"
  "babelgate-hai /hai agui sse"
  "babelgate-haibin /hai agui proto"
  "babelgate-binup /proto-up vercel sse"
  "babelgate-wsup /ws-up vercel sse"
  "babelgate-wsbinup /ws-proto-up vercel sse"
)
: >"$OUT/babelgate-wire.log"
wire_load() {
  local scenario="$1"; shift
  local w name path body tr pid
  for w in "${WIRE[@]}"; do
    read -r name path body tr <<<"$w"
    has "$SYSTEMS" "$name" || continue
    BABELGATE_LOG=warn "$BIN/babelgate" serve --config "$OUT/gateway-wire.toml" 2>>"$OUT/babelgate-wire.log" &
    pid=$!
    PIDS+=("$pid")
    wait_port "$P_WIRE"
    local args=(--url "http://127.0.0.1:$P_WIRE$path" --body "$body" --transport "$tr" --pids "$pid")
    # warm-up, not recorded
    "$BIN/loadgen" run "${args[@]}" --streams 4 --events 200 --rate 0 >/dev/null
    "$BIN/loadgen" run "${args[@]}" --label "$scenario/$name" "$@" | tee -a "$OUT/load.jsonl"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    sleep 1
  done
}
if has "$WORKLOADS" saturation; then
  echo "-- saturation, transports: $SAT_STREAMS streams x $SAT_EVENTS events"
  wire_load saturation --streams "$SAT_STREAMS" --events "$SAT_EVENTS" --rate 0
fi
if has "$WORKLOADS" latency; then
  echo "-- latency, transports: $LAT_STREAMS streams x $LAT_RATE events/s x $LAT_EVENTS events"
  wire_load latency --streams "$LAT_STREAMS" --events "$LAT_EVENTS" --rate "$LAT_RATE" --ramp-ms 2000 --timeout-s 120
fi

# Each time a fresh process: the run logs earlier scenarios left (kept for
# the route's retention_s, 300 s by default) are not this scenario's memory.
# The route keeps an ended run's log 10 s here (300 s by default) so that
# the recovered RSS is measured after the logs are gone: what stays then is
# what the streams left behind, not the logs kept on purpose for resume.
# (The route without resume keeps no log: only the first route gets it.)
sed '0,/^forward_headers = .*/s//&\nretention_s = 10/' "$OUT/gateway.toml" >"$OUT/gateway-open.toml"
fresh_babelgate() {
  kill "$BG"
  wait "$BG" 2>/dev/null || true
  BABELGATE_LOG=warn "$BIN/babelgate" serve --config "$OUT/gateway-open.toml" 2>>"$OUT/babelgate.log" &
  PIDS+=($!)
  BG=$!
  wait_port "$P_BG"
}
# Streams open over 10 s and last one event per second: with 15 events or more
# every stream is open at once for a while, so the peak is 9,900 open streams
# (with fewer events the first ones end before the last ones start).
for n in $OPEN_SCENARIOS; do
  has "$WORKLOADS" open || break
  for row in "babelgate /api/chat" "babelgate-nolog /api/chat-nolog"; do
    read -r name path <<<"$row"
    has "$SYSTEMS" "$name" || continue
    echo "-- open streams: $OPEN_STREAMS streams x 1 event/s x $n events ($name)"
    fresh_babelgate
    # Idle is a gateway that has served: a warm-up reads its code in, and
    # 15 s of quiet let it hand back what the warm-up freed (jemalloc's
    # decay is 10 s), so neither counts as the streams' memory.
    "$BIN/loadgen" run --url "http://127.0.0.1:$P_BG$path" --body vercel --streams 4 --events 200 --rate 0 >/dev/null
    sleep 15
    "$BIN/loadgen" run --url "http://127.0.0.1:$P_BG$path" --body vercel --streams "$OPEN_STREAMS" \
      --events "$n" --rate 1 --ramp-ms 10000 --timeout-s 120 --pids "$BG" --label "open$n/$name" \
      --recover-s "$OPEN_RECOVER_S" | tee -a "$OUT/load.jsonl"
  done
done

# Issue 14's store: one Redis for run logs (store-bench), and what the Redis
# store adds to a stream through babelgate against the memory store.
store_workload() {
  local dir="$OUT/redis" rport=$((16379 + O)) p_mem=$((18091 + O)) p_red=$((18092 + O))
  local redis bgm bgr round b
  mkdir -p "$dir"
  redis-server --bind 127.0.0.1 --port "$rport" --save "" --appendonly no --dir "$dir" \
    --logfile "$dir/redis.log" --daemonize no &
  PIDS+=($!); redis=$!
  wait_port "$rport"
  echo "-- store: run logs in one Redis (redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), port $rport): $STORE_RUNS runs x $STORE_EVENTS events"
  for b in 1 16 64; do
    "$BIN/store-bench" --backend redis --url "redis://127.0.0.1:$rport" --runs "$STORE_RUNS" --events "$STORE_EVENTS" \
      --batch "$b" --redis-pid "$redis" --label "redis/$b" | tee -a "$OUT/store.jsonl"
    redis-cli -p "$rport" flushall >/dev/null
  done
  for b in 1 16; do
    "$BIN/store-bench" --backend memory --runs "$STORE_RUNS" --events "$STORE_EVENTS" --batch "$b" \
      --label "memory/$b" | tee -a "$OUT/store.jsonl"
  done
  sed -e "s/127.0.0.1:$P_BG/127.0.0.1:$p_mem/" "$OUT/gateway.toml" >"$OUT/gateway-memory.toml"
  { sed -e "s/127.0.0.1:$P_BG/127.0.0.1:$p_red/" "$OUT/gateway.toml"
    printf '\n[store]\nbackend = "redis"\nurl = "redis://127.0.0.1:%s"\n' "$rport"; } >"$OUT/gateway-redis.toml"
  BABELGATE_LOG=warn "$BIN/babelgate" serve --config "$OUT/gateway-memory.toml" 2>"$OUT/babelgate-memory.log" &
  PIDS+=($!); bgm=$!
  BABELGATE_LOG=warn "$BIN/babelgate" serve --config "$OUT/gateway-redis.toml" 2>"$OUT/babelgate-redis.log" &
  PIDS+=($!); bgr=$!
  wait_port "$p_mem"; wait_port "$p_red"
  echo "-- store: babelgate with the memory store against the Redis store, $SAT_STREAMS x $SAT_EVENTS events as fast as possible, 3 rounds"
  for round in 1 2 3; do
    for b in memory redis; do
      local port=$p_mem pids=$bgm
      [ "$b" = memory ] || { port=$p_red; pids="$bgr,$redis"; }
      "$BIN/loadgen" run --url "http://127.0.0.1:$port/api/chat" --body vercel --streams 4 --events 200 --rate 0 --pids "$pids" >/dev/null
      "$BIN/loadgen" run --url "http://127.0.0.1:$port/api/chat" --body vercel --streams "$SAT_STREAMS" --events "$SAT_EVENTS" \
        --rate 0 --pids "$pids" --label "store-saturation-r$round/babelgate-$b" | tee -a "$OUT/load.jsonl"
      sleep 1
    done
  done
  echo "-- store: the same at $LAT_STREAMS streams x $LAT_RATE events/s x $LAT_EVENTS events"
  for b in memory redis; do
    local port=$p_mem pids=$bgm
    [ "$b" = memory ] || { port=$p_red; pids="$bgr,$redis"; }
    "$BIN/loadgen" run --url "http://127.0.0.1:$port/api/chat" --body vercel --streams "$LAT_STREAMS" --events "$LAT_EVENTS" \
      --rate "$LAT_RATE" --ramp-ms 2000 --timeout-s 120 --pids "$pids" --label "store-latency/babelgate-$b" | tee -a "$OUT/load.jsonl"
    sleep 1
  done
  redis-cli -p "$rport" info memory | sed -n 's/^used_memory_human:/redis used memory after: /p'
}
if has "$WORKLOADS" store; then store_workload; fi

# Issue 37's shapes: the gateway's memory test measures the peak heap of one
# request body and one upstream event of each hostile shape, one case at a
# time in its own process (a peak is exact there, not an RSS sample); its
# table rows go to the report. A debug build, as docs/memory.md measures it
# (heap bytes, not time: the profile changes little), built here, after
# every load measurement, so that its compile perturbs none of them.
if has "$WORKLOADS" shapes && [ "$QUICK" != 1 ]; then
  step "memory per request and per upstream event, by shape (cargo test -p babelgate --test memory)"
  cargo test -q -p babelgate --test memory a_body_or_an_event_costs_in_proportion_to_its_size \
    -- --nocapture --test-threads 1 2>/dev/null | grep '^| \(request\|event\)' | tee "$OUT/shapes.txt"
fi

cleanup
trap - EXIT

step "report: docs/benchmarks.md (results section) and docs/benchmarks.png (ONLY=load: printed only)"
echo "{\"load_after\": \"$(cut -d' ' -f1-3 /proc/loadavg)\"}" >"$OUT/machine-after.json"
if [ "$ONLY" = load ]; then
  "$PY" crates/tools/bench/report.py --print "$OUT"
else
  "$PY" crates/tools/bench/report.py "$OUT"
fi
