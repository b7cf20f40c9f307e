# Shared helpers for the end-to-end tests: the controller binary as a subprocess, talking to the
# local control plane (deploy/local/cluster.sh) as the deploy/ ServiceAccount, and kubectl
# (admin) to create nodes, pods and taints and to observe the result. Sourced, not run.
#
# Environment (ctest sets it): KUBECONFIG (admin), TEC_CLUSTER_DIR (for sa-kubeconfig),
# TEC_BIN (the controller binary). Every name a test creates carries a unique suffix, so
# tests can run one after another on one cluster; everything is removed on exit.
set -euo pipefail

# matches GREP-ARGS...: grep -q's answer, but reading all its input. grep -q stops at its first
# match, and under pipefail the writer it leaves behind (kubectl, curl) can die of SIGPIPE and
# fail the pipeline although the line was there (seen: 4 in 100 `kubectl ... | head -1` on a
# busy machine). Use `producer | matches PATTERN`, never `producer | grep -q PATTERN`.
matches() { grep "$@" >/dev/null; }

readonly REQ_TIMEOUT=20s  # per kubectl request
readonly CMD_TIMEOUT=60   # seconds, hard cap per kubectl invocation
readonly DEPLOY_NS=taint-eviction-controller
readonly SA_NAME=taint-eviction-controller
readonly LEASE_NAME=taint-eviction-controller
readonly METRICS_READER=tec-e2e-metrics-reader  # setup_rbac: METRICS_CURL sends its token

E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO_ROOT=$(cd "$E2E_DIR/../.." && pwd -P)
readonly E2E_DIR REPO_ROOT
TEST_NAME=${TEST_NAME:-$(basename "$0" .sh)}

fail() {
  echo "FAIL: $TEST_NAME: $*" >&2
  exit 1
}
log() { echo "$TEST_NAME: $*"; }

[ -n "${KUBECONFIG:-}" ] || { echo "FAIL: $TEST_NAME: KUBECONFIG is not set" >&2; exit 2; }
[ -r "$KUBECONFIG" ] || fail "KUBECONFIG=$KUBECONFIG is not readable"
[ -n "${TEC_BIN:-}" ] && [ -x "$TEC_BIN" ] || fail "TEC_BIN (the controller binary) is not set or not executable"
for c in kubectl timeout curl; do
  command -v "$c" >/dev/null 2>&1 || fail "$c not found on PATH"
done

k() { timeout "$CMD_TIMEOUT" kubectl --request-timeout="$REQ_TIMEOUT" "$@"; }
now_ms() { date +%s%3N; }

SUFFIX="$(date +%s)-$$-$RANDOM"
NS="tec-e2e-$SUFFIX"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tec-e2e.XXXXXX")
NODES=()
CONTROLLER_PIDS=()
CONTROLLER_LOGS=()
METRICS_CURL=(-k)  # setup_rbac adds the metrics reader's bearer token

# terminate_pid PID: SIGTERM, up to 10 s to exit, then SIGKILL (a helper process a test started:
# a Prometheus, a kube-controller-manager). Never fails.
terminate_pid() {
  kill -TERM "$1" 2>/dev/null || return 0
  for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$1" 2>/dev/null || true
}

cleanup() {
  local rc=$?
  set +e
  for pid in "${CONTROLLER_PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null
  done
  if declare -F on_cleanup >/dev/null; then on_cleanup; fi  # a test's own extra cleanup
  for pid in "${CONTROLLER_PIDS[@]}"; do
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
  done
  if [ "$rc" -ne 0 ]; then
    for f in "${CONTROLLER_LOGS[@]}"; do
      echo "---- last lines of $f" >&2
      tail -n 40 "$f" >&2
    done
  fi
  # No kubelet, no controller-manager: force pods out and finalize the namespace by hand.
  if k get namespace "$NS" >/dev/null 2>&1; then
    k -n "$NS" delete pods --all --grace-period=0 --force --wait=false >/dev/null 2>&1
    k delete namespace "$NS" --wait=false --ignore-not-found >/dev/null 2>&1
    printf '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"%s"},"spec":{"finalizers":[]}}' "$NS" \
      | k replace --raw "/api/v1/namespaces/$NS/finalize" -f - >/dev/null 2>&1
  fi
  for n in "${NODES[@]}"; do
    k delete node "$n" --wait=false --ignore-not-found >/dev/null 2>&1
  done
  rm -rf "$WORK"
  if [ "$rc" -eq 0 ] && [ -n "${RUN_AGAIN:-}" ]; then  # again(): a fresh run of the whole test
    exec env TEC_E2E_ATTEMPT=$((E2E_ATTEMPT + 1)) bash "$0"
  fi
  exit "$rc"
}
trap cleanup EXIT

# again REASON: this run cannot test what it claims because the test's own writes were too
# slow (a loaded machine), which says nothing about the controller: clean everything up and
# run the whole test again, up to E2E_ATTEMPTS times, then fail with REASON.
readonly E2E_ATTEMPTS=3 E2E_ATTEMPT=${TEC_E2E_ATTEMPT:-1}
again() {
  [ "$E2E_ATTEMPT" -lt "$E2E_ATTEMPTS" ] \
    || fail "$* (in each of $E2E_ATTEMPTS attempts: this machine is too slow to test it)"
  log "$*: attempt $E2E_ATTEMPT of $E2E_ATTEMPTS tested nothing, running the test again"
  RUN_AGAIN=1
  exit 0
}

# deploy_objects FILE KIND [NAME]: the objects of deploy/FILE of that kind (and name), as YAML,
# e.g. `deploy_objects webhook.yaml Secret | k apply -f -`.
deploy_objects() {
  python3 - "$REPO_ROOT/deploy/$1" "$2" "${3:-}" <<'PY'
import sys, yaml
path, kind, name = sys.argv[1:4]
docs = [d for d in yaml.safe_load_all(open(path)) if d and d["kind"] == kind
        and (not name or d["metadata"]["name"] == name)]
if not docs:
    sys.exit(f"deploy_objects: no {kind} {name} in {path}")
yaml.safe_dump_all(docs, sys.stdout, sort_keys=False)
PY
}

# The deploy/ RBAC (everything but the Deployment, Service and policy/v1 PDB) and a kubeconfig
# for its ServiceAccount, so the controller runs with exactly the permissions it ships with.
# Also a metrics reader: a ServiceAccount bound to deploy/'s metrics-reader ClusterRole, whose
# token METRICS_CURL (curl options) sends to the controller's secure metrics port (HTTPS with
# the self-signed certificate generated at start, hence -k).
setup_rbac() {
  local f
  for f in namespace serviceaccount rbac; do
    k apply -f "$REPO_ROOT/deploy/$f.yaml" >/dev/null || fail "cannot apply deploy/$f.yaml"
  done
  SA_KUBECONFIG=$("$REPO_ROOT/deploy/local/cluster.sh" sa-kubeconfig "$DEPLOY_NS" "$SA_NAME" \
    "$WORK/sa.kubeconfig") || fail "cannot write a ServiceAccount kubeconfig"
  local reader_kubeconfig token
  reader_kubeconfig=$("$REPO_ROOT/deploy/local/cluster.sh" sa-kubeconfig "$DEPLOY_NS" \
    "$METRICS_READER" "$WORK/metrics-reader.kubeconfig") || fail "cannot make the metrics reader"
  k create clusterrolebinding "$METRICS_READER" --clusterrole=taint-eviction-controller-metrics-reader \
    --serviceaccount="$DEPLOY_NS:$METRICS_READER" --dry-run=client -o yaml | k apply -f - >/dev/null \
    || fail "cannot bind the metrics reader"
  token=$(kubectl --kubeconfig "$reader_kubeconfig" config view --raw -o jsonpath='{.users[0].user.token}') \
    && [ -n "$token" ] || fail "no token in $reader_kubeconfig"
  METRICS_CURL=(-k -H "Authorization: Bearer $token")
  k create namespace "$NS" >/dev/null || fail "cannot create namespace $NS"
  # A Lease left held by a process an earlier run killed would delay this test by up to the
  # lease duration. The e2e tests of one cluster run one at a time (a lane's RESOURCE_LOCK), so no
  # controller holds it now.
  k -n "$DEPLOY_NS" patch lease "$LEASE_NAME" --type merge \
    -p '{"spec":{"holderIdentity":"","leaseDurationSeconds":1}}' >/dev/null 2>&1 || true
}

# start_controller NAME [extra flags...]: starts the controller in the background; sets
# CONTROLLER_PID, CONTROLLER_LOG; waits until it serves /readyz (caches synced). The metrics
# port listens on METRICS_BIND_ADDRESS (default 127.0.0.1:0).
start_controller() {
  local name=$1
  shift
  CONTROLLER_LOG="$WORK/controller-$name.log"
  : >"$CONTROLLER_LOG"  # exists before the background child opens it (the sed below reads it)
  "$TEC_BIN" --kubeconfig "$SA_KUBECONFIG" --leader-elect-resource-namespace "$DEPLOY_NS" \
    --metrics-bind-address "${METRICS_BIND_ADDRESS:-127.0.0.1:0}" \
    --health-probe-bind-address 127.0.0.1:0 \
    --log-level debug "$@" >"$CONTROLLER_LOG" 2>&1 &
  CONTROLLER_PID=$!
  CONTROLLER_PIDS+=("$CONTROLLER_PID")
  CONTROLLER_LOGS+=("$CONTROLLER_LOG")
  local deadline=$((SECONDS + 30))
  HEALTH_URL="" METRICS_URL=""
  while [ -z "$HEALTH_URL" ] || [ -z "$METRICS_URL" ]; do
    kill -0 "$CONTROLLER_PID" 2>/dev/null || fail "controller $name exited early: $(tail -5 "$CONTROLLER_LOG")"
    [ "$SECONDS" -lt "$deadline" ] || fail "controller $name did not start serving within 30 s"
    HEALTH_URL=$(sed -n 's|.*serving /healthz and /readyz on \(http://[^ ]*\).*|\1|p' "$CONTROLLER_LOG" | head -1) || true
    METRICS_URL=$(sed -n 's|.*serving /metrics on \(https\{0,1\}://[^ ]*\).*|\1|p' "$CONTROLLER_LOG" | head -1) || true
    sleep 0.1
  done
  until curl -fsS --max-time 2 "$HEALTH_URL/readyz" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || fail "controller $name not ready (/readyz) within 30 s"
    sleep 0.2
  done
}

# wait_acting LOG: until the controller logged that it acts (leader + caches synced).
wait_acting() {
  local logf=$1 deadline=$((SECONDS + ${2:-30}))
  until grep -q "acting: replayed" "$logf"; do
    [ "$SECONDS" -lt "$deadline" ] || fail "controller ($logf) did not start acting within ${2:-30} s"
    sleep 0.1
  done
}

# wait_scheduled LOG POD SECONDS: until the controller logged an eviction scheduled for $NS/POD.
wait_scheduled() {
  local deadline=$((SECONDS + $3))
  until grep -q "scheduled eviction pod=\"$NS/$2\"" "$1"; do
    [ "$SECONDS" -lt "$deadline" ] || fail "no eviction scheduled for $NS/$2 within $3 s"
    sleep 0.1
  done
}

# stop_controller PID: SIGTERM; must exit 0 within 10 s.
stop_controller() {
  local pid=$1 t0 rc=0
  t0=$(now_ms)
  kill -TERM "$pid"
  for _ in $(seq 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && fail "controller pid $pid still running 12 s after SIGTERM"
  wait "$pid" || rc=$?
  [ "$rc" -eq 0 ] || fail "controller pid $pid exited with status $rc after SIGTERM (expected 0)"
  STOP_MS=$(($(now_ms) - t0))
  [ "$STOP_MS" -le 10000 ] || fail "controller took ${STOP_MS} ms to stop (limit 10 s)"
}

make_node() {  # make_node NAME
  NODES+=("$1")
  k apply -f - >/dev/null <<EOT || fail "cannot create node $1"
apiVersion: v1
kind: Node
metadata:
  name: $1
  labels:
    tec.test/e2e: "true"
EOT
}

# make_pod NAME NODE [TOLERATIONS_YAML]: a pod bound to NODE (no scheduler runs).
make_pod() {
  local name=$1 node=$2 tolerations=${3:-} block=""
  if [ -n "$tolerations" ]; then block=$'  tolerations:\n'"$tolerations"; fi
  k apply -f - >/dev/null <<EOT || fail "cannot create pod $NS/$name"
apiVersion: v1
kind: Pod
metadata:
  name: $name
  namespace: $NS
spec:
  nodeName: $node
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 30
  containers:
  - name: pause
    image: registry.k8s.io/pause:3.9
$block
EOT
}

# toleration KEY VALUE [SECONDS]: one Equal/NoExecute toleration as YAML list item.
toleration() {
  printf '  - key: %s\n    operator: Equal\n    value: %s\n    effect: NoExecute\n' "$1" "$2"
  if [ -n "${3:-}" ]; then printf '    tolerationSeconds: %s\n' "$3"; fi
}

# publish_policy CONTENT: $WORK/policy/policy.yaml (POLICY_FILE) holds CONTENT, updated as the
# kubelet updates a mounted ConfigMap: a new ..vN directory, swapped in by one rename of ..data.
POLICY_FILE="$WORK/policy/policy.yaml"
POLICY_VERSION=0
publish_policy() {
  POLICY_VERSION=$((POLICY_VERSION + 1))
  local dir="$WORK/policy" d="$WORK/policy/..v$POLICY_VERSION"
  mkdir -p "$d"
  printf '%s\n' "$1" >"$d/policy.yaml"
  ln -s "..v$POLICY_VERSION" "$dir/..data_tmp"
  mv -T "$dir/..data_tmp" "$dir/..data"
  [ -L "$dir/policy.yaml" ] || ln -s ..data/policy.yaml "$dir/policy.yaml"
}
POLICY_HEADER='apiVersion: taint-eviction-controller/v1alpha1
kind: EvictionPolicy'

taint() { k taint nodes "$1" "$2" >/dev/null || fail "kubectl taint $1 $2 failed"; }

# Prints "name=deletionTimestamp" for every pod in $NS.
pod_states() {
  k -n "$NS" get pods -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.deletionTimestamp}{"\n"}{end}'
}

terminating() {  # terminating POD -> 0 when it has a deletionTimestamp
  local ts
  ts=$(k -n "$NS" get pod "$1" -o jsonpath='{.metadata.deletionTimestamp}' 2>/dev/null) || return 1
  [ -n "$ts" ]
}

# wait_terminating POD SECONDS
wait_terminating() {
  local deadline=$(($(now_ms) + $2 * 1000))
  until terminating "$1"; do
    [ "$(now_ms)" -lt "$deadline" ] || fail "pod $NS/$1 was not evicted within $2 s"
    sleep 0.2
  done
}

# assert_not_terminating_for SECONDS POD...: none of the pods gets a deletionTimestamp.
assert_not_terminating_for() {
  local secs=$1 deadline p states
  shift
  deadline=$(($(now_ms) + secs * 1000))
  while [ "$(now_ms)" -lt "$deadline" ]; do
    states=$(pod_states) || fail "cannot list pods"
    for p in "$@"; do
      grep -qxF "$p=" <<<"$states" || fail "pod $NS/$p was evicted (or vanished) but must not be: $(grep "^$p=" <<<"$states")"
    done
    sleep 0.5
  done
}

# assert_disruption_condition POD: DisruptionTarget=True, reason DeletionByTaintManager.
assert_disruption_condition() {
  local c
  c=$(k -n "$NS" get pod "$1" -o jsonpath='{range .status.conditions[?(@.type=="DisruptionTarget")]}{.status}|{.reason}{end}') \
    || fail "cannot read pod $NS/$1"
  [ "$c" = "True|DeletionByTaintManager" ] || fail "pod $NS/$1 has DisruptionTarget '$c', expected True|DeletionByTaintManager"
}

# events POD: "message|involvedObject.uid" lines of the pod's TaintManagerEviction events.
events() {
  k -n "$NS" get events --field-selector "reason=TaintManagerEviction,involvedObject.name=$1" \
    -o jsonpath='{range .items[*]}{.message}|{.involvedObject.uid}|{.type}{"\n"}{end}'
}

pod_uid() { k -n "$NS" get pod "$1" -o jsonpath='{.metadata.uid}'; }

# wait_event POD MESSAGE_PREFIX SECONDS
wait_event() {
  local deadline=$((SECONDS + $3))
  until grep -q "^$2" <<<"$(events "$1")"; do
    [ "$SECONDS" -lt "$deadline" ] || fail "no '$2' event for $NS/$1 within $3 s (events: $(events "$1" | tr '\n' ' '))"
    sleep 0.3
  done
}

# metric NAME_WITH_LABELS: the value of one sample on the controller's /metrics.
metric() {
  curl "${METRICS_CURL[@]}" -fsS --max-time 5 "$METRICS_URL/metrics" | awk -v n="$1" '$1 == n { print $2; found=1 } END { if (!found) print "absent" }'
}

# events_with_reason POD REASON: "type|message|involvedObject.uid" lines of the pod's events
# with that reason.
events_with_reason() {
  k -n "$NS" get events --field-selector "reason=$2,involvedObject.name=$1" \
    -o jsonpath='{range .items[*]}{.type}|{.message}|{.involvedObject.uid}{"\n"}{end}'
}

# wait_metric NAME_WITH_LABELS AWK_CONDITION SECONDS: until the sample's value v satisfies the
# condition (e.g. 'v >= 1'); sets METRIC_VALUE. Not for $(...): it fails the test itself.
wait_metric() {
  local deadline=$((SECONDS + $3))
  while :; do
    METRIC_VALUE=$(metric "$1") || METRIC_VALUE=absent
    if [ "$METRIC_VALUE" != absent ] && awk -v v="$METRIC_VALUE" "BEGIN { exit !($2) }"; then
      return 0
    fi
    [ "$SECONDS" -lt "$deadline" ] || fail "metric $1 is $METRIC_VALUE, not '$2', after $3 s"
    sleep 0.5
  done
}

# condition_time POD TYPE: the lastTransitionTime of the pod's condition TYPE ("" if none).
condition_time() {
  k -n "$NS" get pod "$1" -o jsonpath="{.status.conditions[?(@.type==\"$2\")].lastTransitionTime}"
}

# eviction_state POD: "state/why" of $NS/POD in the controller's /debug/evictions (the metrics
# port, METRICS_URL), "none" when it is not listed.
eviction_state() {
  curl "${METRICS_CURL[@]}" -fsS --max-time 10 "$METRICS_URL/debug/evictions" | python3 -c "
import json, sys
doc = json.load(sys.stdin)
e = [x for x in doc['evictions'] if x['pod'] == '$NS/$1']
print(e[0]['state'] + '/' + e[0]['why'] if e else 'none')"
}
