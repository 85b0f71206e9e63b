#!/usr/bin/env bash
# Scale-out benchmark (issue 41): N babelgate instances (1, 2, 4) behind
# nginx (round robin, the docs/deploy.md settings), each store side by side
# in one run: the memory store (no sharing: the baseline), one Redis, and a
# Redis Cluster of three primaries and three replicas (cluster-node-timeout
# 1 s), all on this machine. Not part of the tests: ./crates/tools/bench/scale.sh
#
# For every store and N, on a fresh set of instances:
#   - saturation: SAT_STREAMS streams x SAT_EVENTS events as fast as they go
#     (events/s in all and per instance);
#   - paced: PACED_STREAMS streams x PACED_RATE events/s x PACED_EVENTS
#     events, the streams a deployment sustains (delivered share and p99
#     inter-event latency say whether it kept up);
# and for both the CPU seconds per million events of the gateways, of
# nginx's workers and of the Redis servers (loadgen samples /proc/<pid>/stat
# of each), so that each store's cost per event stands beside the others'.
# Every stream is its own conversation (loadgen --unique-ids 1): on Cluster
# the runs spread over the primaries as real traffic's do.
#
# Results: target/bench/scale/scale.jsonl (one loadgen line each) and the
# table printed at the end (the one in docs/benchmarks.md, "Scale-out").
# QUICK=1: small sizes, a smoke run of the harness. Env: NS="1 2 4",
# STORES="memory redis cluster", ROUNDS=1, PROFILE=release, PORT_OFFSET=0.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
cd "$ROOT"
PROFILE="${PROFILE:-release}"
BIN="$ROOT/target/$PROFILE"
OUT="$ROOT/target/bench/scale"
mkdir -p "$OUT"
rm -f "$OUT"/scale.jsonl
NS="${NS:-1 2 4}"
STORES="${STORES:-memory redis cluster}"
ROUNDS="${ROUNDS:-1}"
O="${PORT_OFFSET:-0}"
if [ "${QUICK:-0}" = 1 ]; then
  SAT_STREAMS=8; SAT_EVENTS=2000; PACED_STREAMS=50; PACED_RATE=20; PACED_EVENTS=40
else
  SAT_STREAMS="${SAT_STREAMS:-40}"; SAT_EVENTS="${SAT_EVENTS:-10000}"
  PACED_STREAMS="${PACED_STREAMS:-500}"; PACED_RATE="${PACED_RATE:-20}"; PACED_EVENTS="${PACED_EVENTS:-100}"
fi
for tool in nginx redis-server redis-cli; do
  command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] || {
    echo "$tool is not installed (apt-get install nginx-light redis-server)" >&2; exit 2; }
done
NGINX="$(command -v nginx || echo /usr/sbin/nginx)"

echo "==> build ($PROFILE)"
cargo build --profile "$PROFILE" -p babelgate -p babelgate-loadgen

. "$ROOT/crates/tools/bench/lib.sh"
join() { local IFS=,; echo "$*"; }

UP=$((19200 + O)); LB=$((18180 + O)); GW0=$((18190 + O)); REDIS=$((16400 + O)); CL0=$((16410 + O))
"$BIN/loadgen" upstream --listen "127.0.0.1:$UP" 2>"$OUT/upstream.log" &
PIDS+=($!)
wait_port "$UP"

# The stores: one Redis, and a cluster (three primaries with a replica each).
STORE_PIDS_redis=""; STORE_PIDS_cluster=""
if [[ " $STORES " == *" redis "* ]]; then
  mkdir -p "$OUT/redis"
  redis-server --bind 127.0.0.1 --port "$REDIS" --save "" --appendonly no --dir "$OUT/redis" \
    --logfile "$OUT/redis/redis.log" --daemonize no &
  PIDS+=($!); STORE_PIDS_redis=$!
  wait_port "$REDIS"
fi
CLUSTER_PORTS=()
if [[ " $STORES " == *" cluster "* ]]; then
  cpids=()
  for i in 0 1 2 3 4 5; do
    p=$((CL0 + i)); CLUSTER_PORTS+=("$p")
    rm -rf "$OUT/node-$p"; mkdir -p "$OUT/node-$p"
    redis-server --bind 127.0.0.1 --port "$p" --cluster-enabled yes --cluster-config-file nodes.conf \
      --cluster-node-timeout 1000 --save "" --appendonly no --dir "$OUT/node-$p" \
      --logfile "$OUT/node-$p/redis.log" --daemonize no &
    PIDS+=($!); cpids+=($!)
  done
  for p in "${CLUSTER_PORTS[@]}"; do wait_port "$p"; done
  redis-cli --cluster create $(printf '127.0.0.1:%s ' "${CLUSTER_PORTS[@]}") --cluster-replicas 1 --cluster-yes >/dev/null
  for _ in $(seq 1 200); do
    ok=1
    for p in "${CLUSTER_PORTS[@]}"; do
      redis-cli -p "$p" cluster info | grep -q 'cluster_state:ok' || ok=0
    done
    [ "$ok" = 1 ] && break
    sleep 0.1
  done
  [ "$ok" = 1 ] || { echo "the cluster did not reach cluster_state:ok" >&2; exit 1; }
  STORE_PIDS_cluster="$(join "${cpids[@]}")"
fi

store_toml() {
  case "$1" in
    memory) ;;
    redis) printf '[store]\nbackend = "redis"\nurl = "redis://127.0.0.1:%s"\n' "$REDIS" ;;
    cluster) printf '[store]\nbackend = "redis-cluster"\nurls = ["redis://127.0.0.1:%s", "redis://127.0.0.1:%s"]\n' \
      "${CLUSTER_PORTS[0]}" "${CLUSTER_PORTS[1]}" ;;
  esac
}

# One configuration: N instances and nginx in front, started fresh, both
# workloads, then stopped.
run_one() {
  local store="$1" n="$2" round="$3" gws=() ports=() i port conf
  for i in $(seq 0 $((n - 1))); do
    port=$((GW0 + i)); ports+=("$port")
    conf="$OUT/gateway-$store-$i.toml"
    { store_toml "$store"
      printf '\n[server]\nlisten = "127.0.0.1:%s"\n\n' "$port"
      printf '[[routes]]\npath = "/api/chat"\nclient = "vercel"\nupstream = "http://127.0.0.1:%s/agent"\nupstream_protocol = "ag-ui"\nforward_headers = ["x-bench"]\n' "$UP"
    } >"$conf"
    BABELGATE_LOG=warn "$BIN/babelgate" serve --config "$conf" 2>"$OUT/babelgate-$store-$i.log" &
    gws+=($!)
  done
  for port in "${ports[@]}"; do wait_port "$port"; done
  # docs/deploy.md's location block; worker_processes 1: nginx is not what
  # is measured, and a worker per core would take the gateways' cores.
  mkdir -p "$OUT/nginx"
  {
    [ "$(id -u)" -ne 0 ] || echo "user root;"
    echo "worker_processes 1; worker_rlimit_nofile 20000; daemon off; pid $OUT/nginx/nginx.pid;"
    echo "error_log $OUT/nginx/error.log warn; events { worker_connections 19000; }"
    echo "http { access_log off; client_body_temp_path $OUT/nginx/body; proxy_temp_path $OUT/nginx/proxy;"
    echo "  fastcgi_temp_path $OUT/nginx/fastcgi; uwsgi_temp_path $OUT/nginx/uwsgi; scgi_temp_path $OUT/nginx/scgi;"
    echo "  upstream babelgate {"
    for port in "${ports[@]}"; do echo "    server 127.0.0.1:$port;"; done
    echo "    keepalive 64; }"
    echo "  server { listen 127.0.0.1:$LB backlog=4096; location / { proxy_pass http://babelgate;"
    echo "    proxy_http_version 1.1; proxy_set_header Host \$host; proxy_set_header Connection \"\";"
    echo "    proxy_buffering off; proxy_request_buffering off; proxy_read_timeout 300s; proxy_send_timeout 300s;"
    echo "    client_max_body_size 16m; } } }"
  } >"$OUT/nginx/nginx.conf"
  "$NGINX" -p "$OUT/nginx" -c "$OUT/nginx/nginx.conf" -e "$OUT/nginx/error.log" 2>"$OUT/nginx/stderr.log" &
  local master=$!
  wait_port "$LB"
  local worker
  worker="$(pgrep -P "$master" | head -1)"
  local store_pids_var="STORE_PIDS_$store" store_pids
  store_pids="${!store_pids_var:-}"
  local pids
  pids="$(join "${gws[@]}")"
  local all="$pids,$worker${store_pids:+,$store_pids}"
  local url="http://127.0.0.1:$LB/api/chat"
  # Warm-up: connections, the scripts loaded into Redis.
  "$BIN/loadgen" run --url "$url" --body vercel --unique-ids 1 --streams 8 --events 200 --rate 0 >/dev/null
  "$BIN/loadgen" run --url "$url" --body vercel --unique-ids 1 --streams "$SAT_STREAMS" --events "$SAT_EVENTS" \
    --rate 0 --timeout-s 300 --pids "$all" --label "scale-r$round/saturation/$store/$n/gw=$pids/nginx=$worker/store=$store_pids" \
    | tee -a "$OUT/scale.jsonl"
  "$BIN/loadgen" run --url "$url" --body vercel --unique-ids 1 --streams "$PACED_STREAMS" --events "$PACED_EVENTS" \
    --rate "$PACED_RATE" --ramp-ms 2000 --timeout-s 300 --pids "$all" \
    --label "scale-r$round/paced/$store/$n/gw=$pids/nginx=$worker/store=$store_pids" | tee -a "$OUT/scale.jsonl"
  kill "$master" "${gws[@]}" 2>/dev/null || true
  wait "$master" "${gws[@]}" 2>/dev/null || true
  # Each configuration starts from an empty store.
  case "$store" in
    redis) redis-cli -p "$REDIS" flushall >/dev/null ;;
    cluster) for p in "${CLUSTER_PORTS[@]}"; do redis-cli -p "$p" flushall >/dev/null 2>&1 || true; done ;;
  esac
}

echo "==> $(nproc) cores; stores: $STORES; instances: $NS; saturation $SAT_STREAMS x $SAT_EVENTS;" \
  "paced $PACED_STREAMS x $PACED_RATE/s x $PACED_EVENTS"
for round in $(seq 1 "$ROUNDS"); do
  for n in $NS; do
    for store in $STORES; do
      echo "-- round $round: $store, $n instance(s)"
      run_one "$store" "$n" "$round"
    done
  done
done

python3 - "$OUT/scale.jsonl" <<'EOF'
import json, sys
rows = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    _, workload, store, n, gw, ngx, st = r["label"].split("/")
    gw = {int(p) for p in gw[3:].split(",")}
    ngx = {int(p) for p in ngx[6:].split(",") if p}
    st = {int(p) for p in st[6:].split(",") if p}
    cpu = {"gw": 0.0, "nginx": 0.0, "store": 0.0}
    for c in r["sut_cpu_by_pid"]:
        k = "gw" if c["pid"] in gw else "nginx" if c["pid"] in ngx else "store"
        cpu[k] += c["cpu_s"]
    rows.setdefault((workload, store, int(n)), []).append((r, cpu))
order = {"memory": 0, "redis": 1, "cluster": 2}
for workload in ("saturation", "paced"):
    print(f"\n{workload}")
    print("| store | instances | events/s | per instance | delivered | p99 latency ms | gateway CPU µs/event | nginx µs/event | store CPU µs/event | failed streams |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for (w, store, n), runs in sorted(rows.items(), key=lambda kv: (kv[0][2], order[kv[0][1]])):
        if w != workload:
            continue
        # The best round by events/s (the machine is shared).
        r, cpu = max(runs, key=lambda rc: rc[0]["events_per_s"])
        ev = max(r["delivered_events"], 1)
        us = lambda s: f"{1e6 * s / ev:.1f}"
        p99 = r["latency_us"]["p99"]
        print(f"| {store} | {n} | {r['events_per_s']:,.0f} | {r['events_per_s'] / n:,.0f} | "
              f"{100 * r['delivered_events'] / max(r['expected_events'], 1):.1f}% | "
              f"{(p99 or 0) / 1000:.1f} | {us(cpu['gw'])} | {us(cpu['nginx'])} | "
              f"{us(cpu['store']) if store != 'memory' else '-'} | {r['failed_streams']} |")
EOF
