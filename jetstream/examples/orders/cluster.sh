#!/usr/bin/env bash
# cluster.sh NATS_SERVER_BIN: starts a 3-node NATS JetStream cluster on 127.0.0.1
# (client ports PORT_BASE..+2, routes +2000, monitoring +4000; PORT_BASE defaults to
# 14222), waits until every node reports JetStream healthy, runs the orders example
# on it with 3 replicas, and stops the cluster and removes its files however the run
# ends. `make demo-cluster` calls it with the cached nats-server binary.
set -euo pipefail
bin=${1:?usage: cluster.sh NATS_SERVER_BIN}
base=${PORT_BASE:-14222}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/rockline-cluster-XXXXXX")
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

for i in 0 1 2; do
  for port in $((base + i)) $((base + 2000 + i)) $((base + 4000 + i)); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "cluster.sh: port $port on 127.0.0.1 is in use; set PORT_BASE to another base" >&2
      exit 1
    fi
  done
done

routes=""
for i in 0 1 2; do routes="$routes nats-route://127.0.0.1:$((base + 2000 + i))"; done
urls=""
for i in 0 1 2; do
  cat >"$work/n$i.conf" <<CONF
server_name: n$i
listen: 127.0.0.1:$((base + i))
http: 127.0.0.1:$((base + 4000 + i))
# sync_interval: always: an acknowledged commit survives an OS crash or power loss
jetstream { store_dir: "$work/n$i", sync_interval: always }
cluster {
  name: rockline-demo
  listen: 127.0.0.1:$((base + 2000 + i))
  routes: [$(echo $routes | sed 's/ /, /g')]
}
CONF
  "$bin" -c "$work/n$i.conf" >"$work/n$i.log" 2>&1 &
  pids+=($!)
  urls="$urls${urls:+,}nats://127.0.0.1:$((base + i))"
done

deadline=$((SECONDS + 60))
for i in 0 1 2; do
  until curl -sf "http://127.0.0.1:$((base + 4000 + i))/healthz" >/dev/null; do
    if ((SECONDS > deadline)); then
      echo "cluster.sh: node n$i not healthy after 60 s; its log:" >&2
      cat "$work/n$i.log" >&2
      exit 1
    fi
    sleep 0.2 # polling a server we do not control, with a deadline
  done
done
echo "cluster: 3 nodes healthy on $urls"
cd "$here/../.." && go run ./examples/orders -servers "$urls" -replicas 3
