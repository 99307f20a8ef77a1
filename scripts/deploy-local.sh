#!/usr/bin/env bash
# docs/deploy.md, in miniature, on this machine: 2 replicas of `superinfer serve` on two
# loopback ports behind nginx (least_conn upstream, passive health checks, no buffering for
# SSE), all on 127.0.0.1. Waits for every replica's /health, sends requests through nginx
# (plain and streamed, chat and completions), checks that they succeed and that both
# replicas served some (each replica's /metrics), then stops everything, also on failure.
#
#   scripts/deploy-local.sh
#
# Environment:
#   MODEL           fetch-models.sh name or GGUF path (default qwen2.5-0.5b)
#   SERVER_CMD      the replica command, to which "--host 127.0.0.1 --port PORT" is appended
#                   (default: target/release/superinfer serve -m MODEL -np 4 -c 2048 -t 1)
#   REPLICA_METRIC  the /metrics counter that shows a replica served requests
#                   (default superinfer_generation_tokens_total); for llama-server replicas:
#                   SERVER_CMD="llama-server -m M.gguf -np 4 -c 8192 -t 1 --metrics" \
#                   REPLICA_METRIC=llamacpp:tokens_predicted_total scripts/deploy-local.sh
#   REQUESTS        requests sent through nginx (default 8, plus one streamed per endpoint)
#   KEEP_DIR=1      keep the temp directory (nginx config and logs) for a look afterwards
#
# Installs the Debian package nginx if missing. nginx runs in the foreground of a background
# job with its own prefix, config and logs in a temp directory: no system nginx is touched.
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL="${MODEL:-qwen2.5-0.5b}"
REQUESTS="${REQUESTS:-8}"
REPLICA_METRIC="${REPLICA_METRIC:-superinfer_generation_tokens_total}"

log() { printf '[deploy-local] %s\n' "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }

if ! command -v nginx >/dev/null; then
  log "installing nginx"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nginx >&2
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

if [ -z "${SERVER_CMD:-}" ]; then
  bin=target/release/superinfer
  [ -x "$bin" ] || die "$bin missing: cargo build --release -p superinfer-cli (or set SERVER_CMD)"
  if [ -f "$MODEL" ]; then model_path=$MODEL; else model_path=$(scripts/fetch-models.sh --path "$MODEL"); fi
  SERVER_CMD="$bin serve -m $model_path -np 4 -c 2048 -t 1"
fi

DIR=$(mktemp -d /tmp/superinfer-deploy.XXXXXX)
PIDS=()
cleanup() {
  local rc=$?
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  if [ "$rc" != 0 ]; then
    for f in "$DIR"/*.log; do [ -f "$f" ] && { log "--- $(basename "$f") (tail)"; tail -n 20 "$f" >&2; }; done
  fi
  if [ "${KEEP_DIR:-0}" = 1 ]; then log "kept $DIR"; else rm -rf "$DIR"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_health() {  # URL NAME PID
  local url=$1 name=$2 pid=$3 code
  for _ in $(seq 600); do  # 120 s
    kill -0 "$pid" 2>/dev/null || die "$name exited before $url was healthy"
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$url" || true)
    [ "$code" = 200 ] && return 0
    sleep 0.2
  done
  die "$name: $url not 200 within 120 s (last: $code)"
}

# -- replicas ---------------------------------------------------------------------------------
R_PORTS=()
for i in 1 2; do
  port=$(free_port)
  # shellcheck disable=SC2086  # SERVER_CMD is a command line
  $SERVER_CMD --host 127.0.0.1 --port "$port" >"$DIR/replica$i.log" 2>&1 &
  PIDS+=($!)
  R_PORTS+=("$port")
  log "replica $i: pid $! on 127.0.0.1:$port"
done
for i in 0 1; do wait_health "http://127.0.0.1:${R_PORTS[$i]}/health" "replica $((i + 1))" "${PIDS[$i]}"; done
log "both replicas healthy"

# -- nginx ------------------------------------------------------------------------------------
N_PORT=$(free_port)
mkdir -p "$DIR/tmp"
cat >"$DIR/nginx.conf" <<EOF
daemon off;
worker_processes 1;
pid $DIR/nginx.pid;
error_log $DIR/nginx-error.log warn;
events { worker_connections 1024; }
http {
    log_format upstream '\$remote_addr "\$request" \$status upstream=\$upstream_addr '
                        'upstream_status=\$upstream_status rt=\$request_time';
    access_log $DIR/nginx-access.log upstream;
    client_body_temp_path $DIR/tmp/body;
    proxy_temp_path       $DIR/tmp/proxy;
    fastcgi_temp_path     $DIR/tmp/fastcgi;
    uwsgi_temp_path       $DIR/tmp/uwsgi;
    scgi_temp_path        $DIR/tmp/scgi;

    upstream superinfer {
        least_conn;
        server 127.0.0.1:${R_PORTS[0]} max_fails=3 fail_timeout=10s;
        server 127.0.0.1:${R_PORTS[1]} max_fails=3 fail_timeout=10s;
        keepalive 16;
    }

    server {
        listen 127.0.0.1:$N_PORT;
        client_max_body_size 4m;

        location / {
            proxy_pass http://superinfer;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host \$host;
            proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
            proxy_buffering off;
            proxy_cache off;
            proxy_read_timeout 600s;
            proxy_send_timeout 600s;
            proxy_next_upstream error timeout http_502 http_503 http_429 non_idempotent;
            proxy_next_upstream_tries 2;
        }
    }
}
EOF
"$NGINX" -t -q -p "$DIR" -c "$DIR/nginx.conf" -e "$DIR/nginx-error.log" 2>"$DIR/nginx-test.log" \
  || { cat "$DIR/nginx-test.log" >&2; die "nginx -t rejected the config"; }
"$NGINX" -p "$DIR" -c "$DIR/nginx.conf" -e "$DIR/nginx-error.log" >"$DIR/nginx.log" 2>&1 &
PIDS+=($!)
NGINX_URL="http://127.0.0.1:$N_PORT"
wait_health "$NGINX_URL/health" nginx "${PIDS[2]}"
log "nginx: pid ${PIDS[2]} on 127.0.0.1:$N_PORT"

# -- requests through nginx -----------------------------------------------------------------------
MODEL_ID=$(curl -sf --max-time 30 "$NGINX_URL/v1/models" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])') \
  || die "GET /v1/models through nginx"

post() {  # PATH JSON -> body on stdout; fails unless 200
  local out code
  out=$(curl -s --max-time 120 -w '\n%{http_code}' -H 'Content-Type: application/json' -d "$2" "$NGINX_URL$1") \
    || die "POST $1: curl failed"
  code=${out##*$'\n'}
  [ "$code" = 200 ] || die "POST $1: HTTP $code: ${out%$'\n'*}"
  printf '%s' "${out%$'\n'*}"
}

for i in $(seq "$REQUESTS"); do
  if [ $((i % 2)) = 0 ]; then
    body=$(post /v1/completions "{\"model\":\"$MODEL_ID\",\"prompt\":\"Request $i: the sky is\",\"max_tokens\":8}")
    python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["choices"][0]["text"] is not None' "$body" \
      || die "completion $i: $body"
  else
    body=$(post /v1/chat/completions "{\"model\":\"$MODEL_ID\",\"messages\":[{\"role\":\"user\",\"content\":\"Say hello ($i).\"}],\"max_tokens\":8}")
    python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["choices"][0]["message"]["role"] == "assistant"' "$body" \
      || die "chat $i: $body"
  fi
done
log "$REQUESTS plain requests through nginx: ok"

for path in /v1/chat/completions /v1/completions; do
  if [ $path = /v1/completions ]; then
    req="{\"model\":\"$MODEL_ID\",\"prompt\":\"Once upon a time\",\"max_tokens\":16,\"stream\":true}"
  else
    req="{\"model\":\"$MODEL_ID\",\"messages\":[{\"role\":\"user\",\"content\":\"Count to five.\"}],\"max_tokens\":16,\"stream\":true}"
  fi
  # -N: no curl buffering; the chunks must come through nginx as the replica sends them
  curl -sN --max-time 120 -H 'Content-Type: application/json' -d "$req" "$NGINX_URL$path" >"$DIR/stream.txt" \
    || die "streamed POST $path: curl failed"
  n=$(grep -c '^data: {' "$DIR/stream.txt" || true)
  grep -q '^data: \[DONE\]' "$DIR/stream.txt" || die "streamed POST $path: no [DONE]: $(head -c 300 "$DIR/stream.txt")"
  [ "$n" -ge 2 ] || die "streamed POST $path: only $n chunks"
  log "streamed $path through nginx: $n chunks, [DONE]"
done

# -- both replicas served some --------------------------------------------------------------------
for i in 0 1; do
  m=$(curl -sf --max-time 10 "http://127.0.0.1:${R_PORTS[$i]}/metrics" | awk -v name="$REPLICA_METRIC" '
        $1 == name || index($1, name "{") == 1 { s += $NF } END { printf "%d", s }') \
    || die "replica $((i + 1)): GET /metrics failed"
  via_log=$(grep -c "upstream=127.0.0.1:${R_PORTS[$i]} " "$DIR/nginx-access.log" || true)
  log "replica $((i + 1)) (port ${R_PORTS[$i]}): $REPLICA_METRIC = $m; nginx sent it $via_log requests"
  [ "$m" -gt 0 ] || die "replica $((i + 1)) served nothing ($REPLICA_METRIC = $m)"
done
log "ok: 2 replicas behind nginx served plain and streamed requests"
