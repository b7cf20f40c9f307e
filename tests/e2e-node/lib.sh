# shellcheck shell=bash disable=SC2034 # sourced by the tests, which use what it defines
# Shared helpers for the tests on the real node (deploy/local/cluster.sh up --node): kubectl as
# admin, containerd's ctr on the node's socket, and the controller running in the cluster as the
# Deployment from deploy/. Sourced, not run.
#
# Environment (ctest sets it): TEC_CLUSTER_DIR, the state dir of a cluster started with
# `up --node`; its env file gives KUBECONFIG, the node name and containerd's socket. Every
# test uses its own namespace and removes its taint and namespace on exit; the tests run one
# at a time (RESOURCE_LOCK node): each taints the only node.
set -euo pipefail

# matches GREP-ARGS...: grep -q's answer, but reading all its input. grep -q stops at its first
# match, and under pipefail the writer it leaves behind (kubectl, curl) can die of SIGPIPE and
# fail the pipeline although the line was there (seen: 4 in 100 `kubectl ... | head -1` on a
# busy machine). Use `producer | matches PATTERN`, never `producer | grep -q PATTERN`.
matches() { grep "$@" >/dev/null; }

readonly REQ_TIMEOUT=20s  # per kubectl request
readonly CMD_TIMEOUT=60   # seconds, hard cap per kubectl invocation
readonly CONTROLLER_NS=taint-eviction-controller
readonly CONTROLLER_SELECTOR=app.kubernetes.io/name=taint-eviction-controller,app.kubernetes.io/component=controller
readonly LEASE_NAME=taint-eviction-controller
readonly TAINT_KEY=tec.test/evict  # tolerated by the controller (deploy/local/node-overlay)

E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO_ROOT=$(cd "$E2E_DIR/../.." && pwd -P)
readonly E2E_DIR REPO_ROOT
TEST_NAME=${TEST_NAME:-$(basename "$0" .sh)}

fail() {
  echo "FAIL: $TEST_NAME: $*" >&2
  exit 1
}
log() { echo "$TEST_NAME: $(date +%T.%3N) $*"; }

[ -n "${TEC_CLUSTER_DIR:-}" ] || { echo "FAIL: $TEST_NAME: TEC_CLUSTER_DIR is not set" >&2; exit 2; }
[ -r "$TEC_CLUSTER_DIR/env" ] || fail "no env file in $TEC_CLUSTER_DIR (is the cluster up?)"
# shellcheck disable=SC1091
source "$TEC_CLUSTER_DIR/env"
[ "${TEC_CLUSTER_MODE:-}" = node ] || fail "the cluster in $TEC_CLUSTER_DIR has no real node (cluster.sh up --node)"
for c in kubectl ctr timeout; do
  command -v "$c" >/dev/null 2>&1 || fail "$c not found on PATH"
done
readonly NODE=$TEC_CLUSTER_NODE_NAME

k() { timeout "$CMD_TIMEOUT" kubectl --request-timeout="$REQ_TIMEOUT" "$@"; }
kctr() { timeout "$CMD_TIMEOUT" ctr --address "$TEC_CLUSTER_CONTAINERD_SOCK" "$@"; }
now_ms() { date +%s%3N; }

SUFFIX="$(date +%s)-$$-$RANDOM"
NS="tec-node-e2e-$SUFFIX"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tec-e2e-node.XXXXXX")
BACKGROUND_PIDS=()

cleanup() {
  local rc=$?
  set +e
  for pid in "${BACKGROUND_PIDS[@]}"; do kill "$pid" 2>/dev/null; done
  if declare -F on_cleanup >/dev/null; then on_cleanup; fi  # a test's own extra cleanup
  if [ "$rc" -ne 0 ]; then
    echo "---- pods" >&2
    k get pods -A -o wide >&2
    echo "---- controller logs (last 30 lines of each replica)" >&2
    for p in $(k -n "$CONTROLLER_NS" get pods -l "$CONTROLLER_SELECTOR" -o name); do
      echo "-- $p" >&2
      k -n "$CONTROLLER_NS" logs "$p" --tail=30 >&2
    done
  fi
  k taint nodes "$NODE" "$TAINT_KEY-" >/dev/null 2>&1
  # A real cluster: the namespace controller and the kubelet clean up the namespace.
  k delete namespace "$NS" --wait=false --ignore-not-found >/dev/null 2>&1
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT

# wait_until SECONDS WHAT CMD...: until CMD succeeds (polled every 0.2 s), else fail.
wait_until() {
  local secs=$1 what=$2 deadline
  shift 2
  deadline=$(($(now_ms) + secs * 1000))
  until "$@"; do
    [ "$(now_ms)" -lt "$deadline" ] || fail "$what: not within $secs s"
    sleep 0.2
  done
}

make_namespace() {
  k create namespace "$NS" >/dev/null || fail "cannot create namespace $NS"
  # The ServiceAccount admission plugin needs the namespace's default ServiceAccount (made by
  # kube-controller-manager) before it admits a pod.
  wait_until 60 "default ServiceAccount in $NS" k -n "$NS" get serviceaccount default -o name
}

# workload NAME REPLICAS: a Deployment of the local busybox image (no toleration of TAINT_KEY).
workload() {
  k apply -f - >/dev/null <<EOT || fail "cannot create Deployment $NS/$1"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: $1
  namespace: $NS
spec:
  replicas: $2
  selector:
    matchLabels: {app: $1}
  template:
    metadata:
      labels: {app: $1}
    spec:
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 10
      containers:
      - name: sleep
        image: $TEC_CLUSTER_WORKLOAD_IMAGE
        imagePullPolicy: Never
        securityContext:
          runAsUser: 65534
          allowPrivilegeEscalation: false
EOT
}

# pods_of APP [FIELD_SELECTOR]: "name phase nodeName deletionTimestamp" per pod of the app.
pods_of() {
  k -n "$NS" get pods -l "app=$1" ${2:+--field-selector "$2"} \
    -o jsonpath='{range .items[*]}{.metadata.name} {.status.phase} {.spec.nodeName}{" "}{.metadata.deletionTimestamp}{"\n"}{end}'
}

# running_count APP: pods of APP Running on the node and not terminating.
running_count() {
  pods_of "$1" | awk -v n="$NODE" '$2 == "Running" && $3 == n && $4 == "" { c++ } END { print c + 0 }'
}

# app_running APP N: exactly N pods of APP are Running (and not terminating) on the node.
app_running() { [ "$(running_count "$1")" -eq "$2" ]; }

# The container ids (containerd, k8s.io namespace) of the containers of pod NS/NAME.
containers_of_pod() {
  kctr -n k8s.io containers ls -q \
    "labels.\"io.kubernetes.pod.namespace\"==$1,labels.\"io.kubernetes.pod.name\"==$2"
}

# task_status ID: the containerd task status of container ID (RUNNING, STOPPED, ...), or
# "none" when it has no task.
task_status() {
  kctr -n k8s.io tasks ls 2>/dev/null | awk -v id="$1" '$1 == id { print $3; found = 1 } END { if (!found) print "none" }'
}

# task_pid ID: the host pid of the running task of container ID.
task_pid() {
  kctr -n k8s.io tasks ls 2>/dev/null | awk -v id="$1" '$1 == id && $3 == "RUNNING" { print $2 }'
}

# The controller pods that are Running and not terminating, by name.
controller_pods() {
  k -n "$CONTROLLER_NS" get pods -l "$CONTROLLER_SELECTOR" \
    -o jsonpath='{range .items[*]}{.metadata.name} {.status.phase} {.metadata.deletionTimestamp}{"\n"}{end}' \
    | awk '$2 == "Running" && NF == 2 { print $1 }'
}

# The pod name of the current Lease holder.
lease_holder_pod() {
  local id
  id=$(k -n "$CONTROLLER_NS" get lease "$LEASE_NAME" -o jsonpath='{.spec.holderIdentity}' 2>/dev/null) || return 1
  # The identity is "<hostname>_<random>"; a pod's hostname is its name.
  echo "${id%%_*}"
}

# The Lease holder's pod name when it is one of the running controller pods, else fails. Right
# after a rollout the Lease can still name a replica of the one before (gone or terminating)
# until it is released or expires (its duration, 15 s): a test that reads the leader must wait
# for this, not for any holder.
current_leader() {
  local h
  h=$(lease_holder_pod) && [ -n "$h" ] && controller_pods | matches -xF "$h" && echo "$h"
}

# controller_available N: the Deployment reports N available replicas.
controller_available() {
  [ "$(k -n "$CONTROLLER_NS" get deployment taint-eviction-controller -o jsonpath='{.status.availableReplicas}')" = "$1" ]
}

# record_pod_updates FILE N: every change of a pod in $NS, as JSON watch events, appended to
# FILE in the background, so a state a pod is in for a moment only is not missed. Returns once
# the watch has listed the N pods there are (it is then established).
record_pod_updates() {
  local file=$1 n=$2
  timeout 900 kubectl get pods -n "$NS" --watch --output-watch-events -o json >"$file" 2>"$file.err" &
  BACKGROUND_PIDS+=("$!")
  wait_until 30 "the pod watch listing $n pods" watch_listed "$file" "$n"
}
watch_listed() { [ "$(grep -Ec '"type": ?"ADDED"' "$1")" -ge "$2" ]; }

# watch_saw FILE PYTHON_EXPR: some recorded pod object (variable `pod`, a dict) satisfies the
# expression; prints the names of the pods that did.
watch_saw() {
  python3 - "$1" "$2" <<'EOT'
import json, sys
text, expr = open(sys.argv[1]).read(), sys.argv[2]
dec, i, names = json.JSONDecoder(), 0, []
while True:
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text):
        break
    try:
        event, i = dec.raw_decode(text, i)
    except ValueError:
        break  # a half-written last object
    pod = event.get("object", {})
    if eval(expr, {}, {"pod": pod}) and pod["metadata"]["name"] not in names:
        names.append(pod["metadata"]["name"])
print("\n".join(names))
sys.exit(0 if names else 1)
EOT
}

# events_for POD: "reason|message|uid" of the events about POD.
events_for() {
  k -n "$NS" get events --field-selector "involvedObject.name=$1" \
    -o jsonpath='{range .items[*]}{.reason}|{.message}|{.involvedObject.uid}{"\n"}{end}'
}

taint_node() { k taint nodes "$NODE" "$TAINT_KEY=$1:NoExecute" --overwrite >/dev/null || fail "cannot taint $NODE"; }
untaint_node() { k taint nodes "$NODE" "$TAINT_KEY-" >/dev/null 2>&1 || true; }
