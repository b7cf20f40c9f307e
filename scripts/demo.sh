#!/usr/bin/env bash
# `make demo`: a local control plane with the controller running against it, and a NoExecute
# taint shown as it plays out. `make demo-down` (scripts/demo.sh down): stop both.
#
#   scripts/demo.sh [up]   start (or restart) everything and run the scenario; leaves it all up
#   scripts/demo.sh down   stop the controller and the local control plane (state kept)
#
# Environment: TEC_BIN (default build/bin/taint-eviction-controller), TEC_DEMO_WATCH (seconds
# to watch after tainting, default 20), TEC_CLUSTER_DIR (see deploy/local/cluster.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
readonly ROOT
readonly DEMO_DIR="$ROOT/.local/demo"
readonly BIN="${TEC_BIN:-$ROOT/build/bin/taint-eviction-controller}"
readonly CLUSTER="$ROOT/deploy/local/cluster.sh"
readonly DEPLOY_NS=taint-eviction-controller
readonly NS=demo
readonly NODE1=demo-node-1 NODE2=demo-node-2
readonly TAINT=dedicated=maintenance:NoExecute
readonly WATCH_SECONDS="${TEC_DEMO_WATCH:-20}"
readonly PID_FILE="$DEMO_DIR/controller.pid"
readonly LOG_FILE="$DEMO_DIR/controller.log"

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
die() { echo "demo: $*" >&2; exit 1; }
k() { timeout 60 kubectl --request-timeout=20s "$@"; }

stop_controller() {
  [ -f "$PID_FILE" ] || return 0
  local pid
  pid=$(cat "$PID_FILE")
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null \
     && grep -q taint-eviction-controller "/proc/$pid/cmdline" 2>/dev/null; then
    echo "demo: stopping the controller (pid $pid)"
    kill -TERM "$pid"
    for _ in $(seq 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "demo: the controller did not stop within 12 s; killing it" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$PID_FILE"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

case "${1:-up}" in
  down)
    stop_controller
    "$CLUSTER" down
    exit 0
    ;;
  up) ;;
  *) echo "usage: $0 [up|down]" >&2; exit 2 ;;
esac

[ -x "$BIN" ] || die "no controller binary at $BIN (run 'make build' or set TEC_BIN)"
for c in kubectl python3 curl; do
  command -v "$c" >/dev/null 2>&1 || die "$c not found on PATH"
done
mkdir -p "$DEMO_DIR"

say "Local control plane (etcd + kube-apiserver v1.20.2, no kubelet, no scheduler)"
"$CLUSTER" up
KUBECONFIG="$("$CLUSTER" env | sed -n 's/^export KUBECONFIG=//p')"
export KUBECONFIG

say "RBAC from deploy/ (ServiceAccount, ClusterRole, bindings, Lease Role)"
for f in namespace serviceaccount clusterrole clusterrolebinding role rolebinding; do
  k apply -f "deploy/$f.yaml"
done
SA_KUBECONFIG=$("$CLUSTER" sa-kubeconfig "$DEPLOY_NS" taint-eviction-controller \
  "$DEMO_DIR/controller.kubeconfig")

say "A clean slate: nodes $NODE1 and $NODE2 untainted, no pods in namespace $NS"
stop_controller
k get namespace "$NS" >/dev/null 2>&1 || k create namespace "$NS"
k -n "$NS" delete pods --all --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
deadline=$((SECONDS + 30))
until [ -z "$(k -n "$NS" get pods -o name)" ]; do
  [ "$SECONDS" -lt "$deadline" ] || die "the pods of a previous demo did not go away"
  sleep 0.2
done
for n in "$NODE1" "$NODE2"; do
  k apply -f - <<EOT
apiVersion: v1
kind: Node
metadata:
  name: $n
  labels:
    tec.demo: "true"
EOT
  k taint nodes "$n" dedicated:NoExecute- >/dev/null 2>&1 || true
done

say "Starting the controller as ServiceAccount $DEPLOY_NS/taint-eviction-controller"
METRICS_PORT=$(free_port)
HEALTH_PORT=$(free_port)
"$BIN" --kubeconfig "$SA_KUBECONFIG" --leader-elect-resource-namespace "$DEPLOY_NS" \
  --metrics-bind-address "127.0.0.1:$METRICS_PORT" \
  --health-probe-bind-address "127.0.0.1:$HEALTH_PORT" >"$LOG_FILE" 2>&1 </dev/null &
echo $! >"$PID_FILE"
deadline=$((SECONDS + 30))
until curl -fsS --max-time 1 "http://127.0.0.1:$HEALTH_PORT/readyz" >/dev/null 2>&1 \
      && grep -q "acting: replayed" "$LOG_FILE"; do
  kill -0 "$(cat "$PID_FILE")" 2>/dev/null || { tail -20 "$LOG_FILE" >&2; die "the controller exited"; }
  [ "$SECONDS" -lt "$deadline" ] || { tail -20 "$LOG_FILE" >&2; die "the controller is not acting after 30 s"; }
  sleep 0.2
done
echo "pid $(cat "$PID_FILE"), log $LOG_FILE"
echo "metrics http://127.0.0.1:$METRICS_PORT/metrics, probes http://127.0.0.1:$HEALTH_PORT/healthz and /readyz"

say "Pods on $NODE1 with different tolerations of $TAINT (and one on $NODE2)"
make_pod() {  # make_pod NAME NODE [SECONDS|forever]
  local tol=""
  if [ -n "${3:-}" ]; then
    tol=$'  tolerations:\n  - {key: dedicated, operator: Equal, value: maintenance, effect: NoExecute'
    [ "$3" = forever ] && tol+="}" || tol+=", tolerationSeconds: $3}"
  fi
  k apply -f - <<EOT
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: $NS}
spec:
  nodeName: $2
  automountServiceAccountToken: false
  containers: [{name: app, image: registry.k8s.io/pause:3.9}]
$tol
EOT
}
make_pod no-toleration "$NODE1"
make_pod tolerates-10s "$NODE1" 10
make_pod tolerates-forever "$NODE1" forever
make_pod other-node "$NODE2"

show() {
  k -n "$NS" get pods -o custom-columns='POD:.metadata.name,NODE:.spec.nodeName,TOLERATES:.spec.tolerations[?(@.key=="dedicated")].tolerationSeconds,DELETION-TIMESTAMP:.metadata.deletionTimestamp,DISRUPTION:.status.conditions[?(@.type=="DisruptionTarget")].reason'
}
show

say "kubectl taint nodes $NODE1 $TAINT   (at $(date +%T))"
k taint nodes "$NODE1" "$TAINT"
start=$SECONDS
while [ $((SECONDS - start)) -lt "$WATCH_SECONDS" ]; do
  sleep 2
  printf '\n-- %2d s after the taint\n' $((SECONDS - start))
  show
done

say "Events: kubectl get events -n $NS --field-selector reason=TaintManagerEviction"
k -n "$NS" get events --field-selector reason=TaintManagerEviction \
  -o custom-columns='LAST-SEEN:.lastTimestamp,TYPE:.type,REASON:.reason,OBJECT:.involvedObject.name,MESSAGE:.message'

say "What the controller logged"
grep -E 'acting|deleting pod|deleted|cancelled|scheduled' "$LOG_FILE" | tail -n 12 || true
echo
echo "Expected: no-toleration is deleted at once, tolerates-10s after ~10 s, tolerates-forever and"
echo "other-node stay. No kubelet runs, so deleted pods stay Terminating; their deletionTimestamp"
echo "is the time of the DELETE plus the 30 s grace period."

cat <<EOT

Everything stays up. Try it by hand:
  export KUBECONFIG=$KUBECONFIG
  kubectl taint nodes $NODE1 dedicated:NoExecute-         # remove the taint
  kubectl -n $NS run again --image=registry.k8s.io/pause:3.9 --overrides='{"spec":{"nodeName":"$NODE1"}}'
  kubectl taint nodes $NODE1 $TAINT        # and watch: kubectl -n $NS get pods -w
  kubectl describe pod -n $NS tolerates-10s               # the events show up here too
  kubectl get events -A --field-selector reason=TaintManagerEviction
  curl -s http://127.0.0.1:$METRICS_PORT/metrics | grep ^taint_eviction_controller_
  tail -f $LOG_FILE
Stop everything (controller and control plane): make demo-down
EOT
