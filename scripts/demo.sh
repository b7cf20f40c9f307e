#!/usr/bin/env bash
# `make demo`: a local cluster with the controller running in it, and a NoExecute taint shown
# as it plays out. With a real node (deploy/local/cluster.sh up --node) the controller runs as
# the Deployment from deploy/ and the kubelet stops the evicted containers; where a node cannot
# run, it says why and falls back to a control plane without a kubelet and the controller as a
# local process. `make demo-down` (scripts/demo.sh down): stop everything.
#
#   scripts/demo.sh [up]   start (or restart) everything and run the scenario; leaves it all up
#   scripts/demo.sh cold [JOBS]  `make demo`: install the dependencies, configure, build what the
#                          demo runs (prepare), then up; a table of the stages' times at the end
#                          (also in .local/demo/stages.txt)
#   scripts/demo.sh breaker  `make demo-breaker`: the storm breaker and the rate limit holding a
#                          mistyped `kubectl taint` of every node (a control plane of its own,
#                          no kubelet, the controller as a local process with a policy file)
#   scripts/demo.sh down   stop the controllers and the local control planes (state kept)
#
# Environment: TEC_BIN (default build/bin/taint-eviction-controller), TEC_DEMO_WATCH (seconds
# to watch after tainting, default 20), TEC_DEMO_NODE=0 (no real node), TEC_CLUSTER_DIR (see
# deploy/local/cluster.sh).
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
# Stage times of `demo.sh cold` (see stage_table), when it set TEC_DEMO_STAGES and TEC_DEMO_T0.
# stage_mark NAME START END RESULT (START and END: seconds since the epoch).
stage_mark() {
  [ -n "${TEC_DEMO_STAGES:-}" ] || return 0
  printf '%s|%s|%s|%s\n' "$1" $(($2 - TEC_DEMO_T0)) $(($3 - $2)) "$4" >>"$TEC_DEMO_STAGES"
}
# timed NAME CMD...: runs CMD, marks its stage, returns its status.
timed() {
  local name=$1 t rc=0
  shift
  t=$(date +%s)
  "$@" || rc=$?
  stage_mark "$name" "$t" "$(date +%s)" "$([ "$rc" -eq 0 ] && echo ok || echo "failed ($rc)")"
  return "$rc"
}
stage_table() {
  [ -s "${TEC_DEMO_STAGES:-}" ] || return 0
  echo
  echo "make demo: stages ($(date -u +%FT%TZ); $(nproc) cores; commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
  printf '%-16s %8s %9s  %s\n' stage "start s" seconds result
  while IFS='|' read -r name start secs result; do
    printf '%-16s %8s %9s  %s\n' "$name" "$start" "$secs" "$result"
  done <"$TEC_DEMO_STAGES"
  printf '%-16s %8s %9s\n' total 0 $(($(date +%s) - TEC_DEMO_T0))
}
die() { echo "demo: $*" >&2; exit 1; }
k() { timeout 60 kubectl --request-timeout=20s "$@"; }
# The kubectl plugin built beside the controller, as `kubectl taint-eviction` would run it.
plugin() { timeout 60 "$(dirname "$BIN")/kubectl-taint_eviction" "$@"; }

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

# ---------------------------------------------------------------------------------------------
# The demo on a real node: the controller runs in the cluster as the Deployment from deploy/,
# and a kubelet on containerd really stops the containers it evicts.
# ---------------------------------------------------------------------------------------------
readonly NODE_TAINT_KEY=tec.test/evict  # the key deploy/local/node-overlay lets the controller tolerate
readonly NODE_TAINT=$NODE_TAINT_KEY=demo:NoExecute

node_demo() {
  say "A local cluster with a real node: etcd, kube-apiserver, kube-controller-manager (its taint manager off), kube-scheduler, kubelet + containerd, kube-proxy (v1.20.2)"
  echo "The controller image: the runtime stage of deploy/Dockerfile with $BIN"
  echo "(first run: builds the kube binaries, a debootstrap base image and the pause image; cached after)"
  local t0=$SECONDS
  timed up "$CLUSTER" up --node --controller-binary "$BIN"
  echo "up in $((SECONDS - t0)) s"
  KUBECONFIG="$("$CLUSTER" env | sed -n 's/^export KUBECONFIG=//p')"
  export KUBECONFIG
  # shellcheck disable=SC1091
  source "${TEC_CLUSTER_DIR:-$ROOT/.local/cluster}/env"
  local node=$TEC_CLUSTER_NODE_NAME image=$TEC_CLUSTER_WORKLOAD_IMAGE scenario_t0
  scenario_t0=$(date +%s)
  stop_controller  # a controller process left by a demo without a kubelet

  say "The node and the controller (kubectl apply -k: deploy/ + deploy/local/node-overlay)"
  k get nodes -o wide
  k -n "$DEPLOY_NS" get deployment,pods -o wide
  echo "Lease holder (the active replica): $(k -n "$DEPLOY_NS" get lease taint-eviction-controller -o jsonpath='{.spec.holderIdentity}')"

  say "A clean slate: node $node untainted, namespace $NS new"
  k taint nodes "$node" "$NODE_TAINT_KEY-" >/dev/null 2>&1 || true
  # A previous demo's namespace goes with its pods and events (the kubelet stops the pods).
  # Pods of the demo without a kubelet (TEC_DEMO_NODE=0, same state directory) sit on nodes
  # no kubelet runs, Terminating forever: those are removed without waiting for one.
  if k get namespace "$NS" >/dev/null 2>&1; then
    local p
    for p in $(k -n "$NS" get pods -o jsonpath='{range .items[?(@.spec.nodeName!="'"$node"'")]}{.metadata.name}{" "}{end}' 2>/dev/null); do
      k -n "$NS" delete pod "$p" --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
    done
    k delete namespace "$NS" --wait=false >/dev/null
    local deadline=$((SECONDS + 120))
    while k get namespace "$NS" >/dev/null 2>&1; do
      [ "$SECONDS" -lt "$deadline" ] || die "the namespace $NS of a previous demo did not go away within 120 s"
      sleep 1
    done
  fi
  k create namespace "$NS" >/dev/null
  until k -n "$NS" get serviceaccount default >/dev/null 2>&1; do sleep 0.5; done

  say "A Deployment 'web' (3 replicas of $image) and two pods tolerating $NODE_TAINT"
  node_workload web 3
  node_pod tolerates-10s 10
  node_pod tolerates-forever forever
  k -n "$NS" rollout status deployment/web --timeout=120s >/dev/null
  k -n "$NS" wait --for=condition=Ready pod/tolerates-10s pod/tolerates-forever --timeout=120s >/dev/null
  node_show

  say "Before tainting: kubectl taint-eviction preview $node --taint $NODE_TAINT   (read-only)"
  plugin preview "$node" --taint "$NODE_TAINT" || true

  say "kubectl taint nodes $node $NODE_TAINT   (at $(date +%T); the controller's webhook warns)"
  k taint nodes "$node" "$NODE_TAINT"
  local start=$SECONDS
  while [ $((SECONDS - start)) -lt "$WATCH_SECONDS" ]; do
    sleep 2
    printf '\n-- %2d s after the taint\n' $((SECONDS - start))
    node_show
  done

  say "Events: the controller's TaintManagerEviction and the kubelet's Killing"
  k -n "$NS" get events --sort-by=.lastTimestamp \
    --field-selector 'reason!=Scheduled,reason!=Pulled,reason!=Created,reason!=Started,reason!=SuccessfulCreate,reason!=ScalingReplicaSet,reason!=MissingClusterDNS' \
    -o custom-columns='LAST-SEEN:.lastTimestamp,REASON:.reason,OBJECT:.involvedObject.name,SOURCE:.source.component,MESSAGE:.message' | tail -n 20

  local leader
  leader=$(k -n "$DEPLOY_NS" get lease taint-eviction-controller -o jsonpath='{.spec.holderIdentity}')
  leader=${leader%%_*}
  say "What the leader ($leader) logged"
  k -n "$DEPLOY_NS" logs "$leader" | grep -E 'acting|deleting pod|deleted|cancelled|scheduled' | tail -n 12 || true
  echo
  echo "Expected: preview said what follows before anything changed (web: now, tolerates-10s: in"
  echo "10s, tolerates-forever and the controller: never), and kubectl taint printed the same as the"
  echo "controller's webhook warning. Then the web pods are deleted at once and their containers"
  echo "stopped by the kubelet"
  echo "(RUNNING goes to 0, the pods vanish); the ReplicaSet's replacements stay Pending (the node is"
  echo "tainted); tolerates-10s goes after ~10 s; tolerates-forever and the controller stay. A pod"
  echo "object goes once the kubelet has removed its sandbox (its container GC runs once a minute)."
  stage_mark scenario "$scenario_t0" "$(date +%s)" ok

  cat <<EOT

Everything stays up. Try it by hand:
  export KUBECONFIG=$KUBECONFIG
  kubectl taint nodes $node $NODE_TAINT_KEY-            # remove the taint: the replacements start
  kubectl taint nodes $node $NODE_TAINT      # and watch: kubectl -n $NS get pods -w
  kubectl -n $DEPLOY_NS delete pod $leader    # the other replica takes the lease over
  kubectl -n $DEPLOY_NS logs -f deployment/taint-eviction-controller
  kubectl get events -A --field-selector reason=TaintManagerEviction
  ctr --address $TEC_CLUSTER_CONTAINERD_SOCK -n k8s.io tasks ls   # the containers themselves
Stop everything (and put the machine back as it was): make demo-down
EOT
}

# node_workload NAME REPLICAS: a Deployment without tolerations.
node_workload() {
  k apply -f - >/dev/null <<EOT
apiVersion: apps/v1
kind: Deployment
metadata: {name: $1, namespace: $NS}
spec:
  replicas: $2
  selector: {matchLabels: {app: $1}}
  template:
    metadata: {labels: {app: $1}}
    spec:
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 5
      containers: [{name: app, image: $TEC_CLUSTER_WORKLOAD_IMAGE, imagePullPolicy: Never}]
EOT
}

# node_pod NAME SECONDS|forever: a pod (no controller re-creates it) tolerating the taint.
node_pod() {
  local tol="{key: $NODE_TAINT_KEY, operator: Exists, effect: NoExecute"
  if [ "$2" = forever ]; then tol+="}"; else tol+=", tolerationSeconds: $2}"; fi
  k apply -f - >/dev/null <<EOT
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: $NS}
spec:
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 5
  containers: [{name: app, image: $TEC_CLUSTER_WORKLOAD_IMAGE, imagePullPolicy: Never}]
  tolerations: [$tol]
EOT
}

# The pods, and how many of the namespace's containers containerd runs (sandboxes included).
node_show() {
  k -n "$NS" get pods -o custom-columns='POD:.metadata.name,PHASE:.status.phase,NODE:.spec.nodeName,DELETION-TIMESTAMP:.metadata.deletionTimestamp,DISRUPTION:.status.conditions[?(@.type=="DisruptionTarget")].reason'
  local ids running=0 id
  ids=$(ctr --address "$TEC_CLUSTER_CONTAINERD_SOCK" -n k8s.io containers ls -q "labels.\"io.kubernetes.pod.namespace\"==$NS" 2>/dev/null || true)
  for id in $ids; do
    ctr --address "$TEC_CLUSTER_CONTAINERD_SOCK" -n k8s.io tasks ls 2>/dev/null | grep -q "^$id .*RUNNING" && running=$((running + 1))
  done
  echo "containerd: $running containers RUNNING in namespace $NS (pause sandboxes included)"
}


# start_local_controller [FLAG...]: the controller as a local process (ServiceAccount
# kubeconfig $SA_KUBECONFIG) with FLAG..., on free metrics and probe ports (METRICS_PORT,
# HEALTH_PORT); returns once it is ready and acting. The metrics port is plain HTTP on the
# loopback address (--metrics-secure=false), so the demo's curl needs no token.
start_local_controller() {
  METRICS_PORT=$(free_port)
  HEALTH_PORT=$(free_port)
  "$BIN" --kubeconfig "$SA_KUBECONFIG" --leader-elect-resource-namespace "$DEPLOY_NS" "$@" \
    --metrics-bind-address "127.0.0.1:$METRICS_PORT" --metrics-secure=false \
    --health-probe-bind-address "127.0.0.1:$HEALTH_PORT" >"$LOG_FILE" 2>&1 </dev/null &
  echo $! >"$PID_FILE"
  local deadline=$((SECONDS + 30))
  until curl -fsS --max-time 1 "http://127.0.0.1:$HEALTH_PORT/readyz" >/dev/null 2>&1 \
        && grep -q "acting: replayed" "$LOG_FILE"; do
    kill -0 "$(cat "$PID_FILE")" 2>/dev/null || { tail -20 "$LOG_FILE" >&2; die "the controller exited"; }
    [ "$SECONDS" -lt "$deadline" ] || { tail -20 "$LOG_FILE" >&2; die "the controller is not acting after 30 s"; }
    sleep 0.2
  done
  echo "pid $(cat "$PID_FILE"), log $LOG_FILE"
  echo "metrics http://127.0.0.1:$METRICS_PORT/metrics, probes http://127.0.0.1:$HEALTH_PORT/healthz and /readyz"
}

# ---------------------------------------------------------------------------------------------
# `make demo-breaker`: an eviction policy holding a mass eviction. Its own control plane (state
# in .local/demo-breaker-cluster, so the real-node demo's in-cluster controller never sees
# these nodes) and the controller as a local process with a policy file.
# ---------------------------------------------------------------------------------------------
readonly BREAKER_CLUSTER_DIR="$ROOT/.local/demo-breaker-cluster"
readonly BREAKER_NODES=10 BREAKER_PODS_PER_NODE=3

breaker_demo() {
  export TEC_CLUSTER_DIR=$BREAKER_CLUSTER_DIR
  say "Local control plane of its own (etcd + kube-apiserver v1.20.2, no kubelet; state in ${BREAKER_CLUSTER_DIR#"$ROOT"/})"
  "$CLUSTER" up
  KUBECONFIG="$("$CLUSTER" env | sed -n 's/^export KUBECONFIG=//p')"
  export KUBECONFIG
  for f in namespace serviceaccount rbac; do
    k apply -f "deploy/$f.yaml" >/dev/null
  done
  SA_KUBECONFIG=$("$CLUSTER" sa-kubeconfig "$DEPLOY_NS" taint-eviction-controller \
    "$DEMO_DIR/breaker.kubeconfig")
  stop_controller

  say "A clean slate: $BREAKER_NODES nodes untainted, $((BREAKER_NODES * BREAKER_PODS_PER_NODE)) pods without tolerations in namespace $NS"
  k get namespace "$NS" >/dev/null 2>&1 || k create namespace "$NS" >/dev/null
  k -n "$NS" delete pods --all --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
  local deadline=$((SECONDS + 30)) i j
  until [ -z "$(k -n "$NS" get pods -o name)" ]; do
    [ "$SECONDS" -lt "$deadline" ] || die "the pods of a previous demo did not go away"
    sleep 0.2
  done
  for i in $(seq "$BREAKER_NODES"); do
    printf 'apiVersion: v1\nkind: Node\nmetadata: {name: breaker-node-%s, labels: {tec.demo: breaker}}\n' "$i"
    echo ---
  done | k apply -f - >/dev/null
  k taint nodes -l tec.demo=breaker dedicated:NoExecute- >/dev/null 2>&1 || true
  for i in $(seq "$BREAKER_NODES"); do
    for j in $(seq "$BREAKER_PODS_PER_NODE"); do
      printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: app-%s-%s, namespace: %s}\n' "$i" "$j" "$NS"
      printf 'spec: {nodeName: breaker-node-%s, automountServiceAccountToken: false, containers: [{name: app, image: registry.k8s.io/pause:3.9}]}\n---\n' "$i"
    done
  done | k apply -f - >/dev/null
  echo "pods: $(k -n "$NS" get pods -o name | wc -l) on $BREAKER_NODES nodes (breaker-node-1..$BREAKER_NODES)"

  local policy="$DEMO_DIR/breaker-policy.yaml"
  cat >"$policy" <<'EOT'
apiVersion: taint-eviction-controller/v1alpha1
kind: EvictionPolicy
rateLimit:
  evictionsPerSecond: 1        # at most one eviction a second, cluster-wide
  burst: 1
stormBreaker:
  maxTaintedNodesPercent: 50   # more than half the nodes tainted NoExecute: hold everything
  hysteresisPercent: 10        # until fewer than 40% are
EOT
  say "The controller with --policy $policy:"
  sed 's/^/    /' "$policy"
  start_local_controller --policy "$policy"

  say "The mistake: kubectl taint nodes --all $TAINT   (at $(date +%T))"
  echo "(every node of this cluster; upstream's taint manager would delete all $((BREAKER_NODES * BREAKER_PODS_PER_NODE)) pods at once)"
  k taint nodes --all "$TAINT" >/dev/null
  local start=$SECONDS
  while [ $((SECONDS - start)) -lt "$WATCH_SECONDS" ]; do
    sleep 4
    breaker_show "$((SECONDS - start)) s after the taint"
  done

  say "Events on the controller's Lease: kubectl get events -n $DEPLOY_NS --field-selector involvedObject.kind=Lease"
  k -n "$DEPLOY_NS" get events --field-selector involvedObject.kind=Lease \
    -o custom-columns='LAST-SEEN:.lastTimestamp,TYPE:.type,REASON:.reason,MESSAGE:.message' | tail -n 5

  say "The fix: kubectl taint nodes --all dedicated:NoExecute-   (at $(date +%T))"
  k taint nodes --all dedicated:NoExecute- >/dev/null
  sleep 3
  breaker_show "after the untaint"
  say "What the controller logged"
  grep -E 'storm breaker|deleting pod|cancelled' "$LOG_FILE" | cut -c1-160 | tail -n 12 || true
  echo
  echo "Expected: the first evictions start at 1/s while fewer than half the nodes carry the taint;"
  echo "once more than half do (one kubectl command taints them one after another), the breaker"
  echo "opens and every other eviction is held (evictions_waiting), with a Warning StormBreakerOpen"
  echo "on the Lease. Removing the taint cancels the held evictions and closes the breaker: only"
  echo "the few pods evicted before it opened are gone (no kubelet: they stay Terminating). (--all"
  echo "untaints the nodes one after another: once fewer than 40% are tainted the breaker closes,"
  echo "and an eviction on a node not yet untainted may start, and be cancelled, in between.)"
  cat <<EOT

Everything stays up. Try it by hand:
  export KUBECONFIG=$KUBECONFIG
  kubectl taint nodes breaker-node-1 breaker-node-2 $TAINT   # 20%: evicted at 1/s
  \$EDITOR $policy                  # re-read within 5 s (rate, thresholds)
  curl -s http://127.0.0.1:$METRICS_PORT/metrics | grep -E 'storm_breaker|evictions_waiting'
  tail -f $LOG_FILE
Stop everything: make demo-down
EOT
}

# breaker_show TITLE: pods by state, and the policy's metrics.
breaker_show() {
  local terminating total
  total=$(k -n "$NS" get pods -o name | wc -l)
  terminating=$(k -n "$NS" get pods -o jsonpath='{range .items[*]}{.metadata.deletionTimestamp}{"\n"}{end}' | grep -c . || true)
  printf '\n-- %s: %s of %s pods evicted (Terminating); ' "$1" "$terminating" "$total"
  curl -fsS --max-time 2 "http://127.0.0.1:$METRICS_PORT/metrics" 2>/dev/null \
    | grep -E '^taint_eviction_controller_(storm_breaker_open|evictions_waiting|tainted_nodes) ' \
    | sed 's/^taint_eviction_controller_//' | tr '\n' ' '
  echo
}

# prepare JOBS (`make demo` runs it first): builds what the demo runs and nothing else, the three
# parts side by side: the controller binary alone (the default preset's target
# taint-eviction-controller, no tests or benchmarks), the kube binaries the demo starts (all five
# with a real node, else kube-apiserver) and, with a real node, the base, pause and workload
# images (debootstrap mostly waits on the network). Cached parts cost nothing.
prepare() {
  local jobs=$1 node=0 t0=$SECONDS rc=0 pids=() names=() i
  if [ "${TEC_DEMO_NODE:-1}" != 0 ] && "$CLUSTER" node-preflight >/dev/null 2>&1; then node=1; fi
  mkdir -p "$DEMO_DIR"
  say "Building what the demo runs (first run: the kube binaries from source, about 5 minutes; logs in $DEMO_DIR)"
  timed build cmake --build --preset default -j "$jobs" --target taint-eviction-controller \
    kubectl-taint_eviction >"$DEMO_DIR/build-controller.log" 2>&1 &
  pids+=($!) names+=("the controller (build-controller.log)")
  if [ "$node" -eq 1 ]; then
    timed "kube binaries" "$CLUSTER" build kube-apiserver kube-controller-manager kube-scheduler \
      kubelet kube-proxy >"$DEMO_DIR/build-kube.log" 2>&1 &
    pids+=($!) names+=("the kube binaries (build-kube.log)")
    timed images bash -c 'for image in base pause workload; do "$1" "$image" || exit 1; done' _ \
      "$ROOT/deploy/local/images.sh" >"$DEMO_DIR/build-images.log" 2>&1 &
    pids+=($!) names+=("the base, pause and workload images (build-images.log)")
  else
    timed "kube binaries" "$CLUSTER" build kube-apiserver >"$DEMO_DIR/build-kube.log" 2>&1 &
    pids+=($!) names+=("kube-apiserver (build-kube.log)")
  fi
  for i in "${!pids[@]}"; do
    if ! wait "${pids[$i]}"; then
      echo "demo: building ${names[$i]} failed; its last lines:" >&2
      tail -n 30 "$DEMO_DIR/$(sed 's/.*(\(.*\))/\1/' <<<"${names[$i]}")" >&2
      rc=1
    fi
  done
  [ "$rc" -eq 0 ] && echo "built in $((SECONDS - t0)) s"
  return "$rc"
}

case "${1:-up}" in
  down)
    stop_controller
    "$CLUSTER" down
    if [ -f "$BREAKER_CLUSTER_DIR/env" ]; then
      TEC_CLUSTER_DIR=$BREAKER_CLUSTER_DIR "$CLUSTER" down
    fi
    exit 0
    ;;
  breaker)
    [ -x "$BIN" ] || die "no controller binary at $BIN (run 'make build' or set TEC_BIN)"
    mkdir -p "$DEMO_DIR"
    breaker_demo
    exit 0
    ;;
  prepare)
    prepare "${2:-2}"
    exit $?
    ;;
  cold)
    mkdir -p "$DEMO_DIR"
    export TEC_DEMO_STAGES="$DEMO_DIR/stages.txt" TEC_DEMO_T0
    TEC_DEMO_T0=$(date +%s)
    : >"$TEC_DEMO_STAGES"
    timed deps scripts/install-deps.sh --demo || { stage_table; exit 1; }
    timed configure bash -c 'cmake --preset default >/dev/null' || { stage_table; exit 1; }
    prepare "${2:-2}" || { stage_table; exit 1; }
    rc=0
    "$0" up || rc=$?
    stage_table
    exit "$rc"
    ;;
  up) ;;
  *) echo "usage: $0 [up|cold [JOBS]|prepare [JOBS]|breaker|down]" >&2; exit 2 ;;
esac

[ -x "$BIN" ] || die "no controller binary at $BIN (run 'make build' or set TEC_BIN)"
for c in kubectl python3 curl; do
  command -v "$c" >/dev/null 2>&1 || die "$c not found on PATH"
done
mkdir -p "$DEMO_DIR"

# A real node when this machine can run one (root, cgroup v1, containerd and friends
# installable, no other real-node cluster running); TEC_DEMO_NODE=0 skips it.
if [ "${TEC_DEMO_NODE:-1}" != 0 ]; then
  if why=$("$CLUSTER" node-preflight 2>&1); then
    node_demo
    exit 0
  fi
  say "No real node on this machine: $(tail -n 1 <<<"$why" | sed 's/^cluster.sh: error: //')"
  echo "Falling back to the demo without a kubelet (deleted pods stay Terminating)."
fi

say "Local control plane (etcd + kube-apiserver v1.20.2, no kubelet, no scheduler)"
timed up "$CLUSTER" up
scenario_t0=$(date +%s)
KUBECONFIG="$("$CLUSTER" env | sed -n 's/^export KUBECONFIG=//p')"
export KUBECONFIG

say "RBAC from deploy/ (ServiceAccount, ClusterRole, bindings, Lease Role)"
for f in namespace serviceaccount rbac; do
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
start_local_controller

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

say "Before tainting: kubectl taint-eviction preview $NODE1 --taint $TAINT   (read-only)"
plugin preview "$NODE1" --taint "$TAINT" || true

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
stage_mark scenario "$scenario_t0" "$(date +%s)" ok

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
