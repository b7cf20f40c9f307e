#!/usr/bin/env bash
# Integration test against a local control plane (deploy/local/cluster.sh up): a Pod bound to
# a Node gets the DefaultTolerationSeconds tolerations, and deleting it only marks it
# Terminating (deletionTimestamp set) because no kubelet confirms the deletion.
#
# Usage: KUBECONFIG=<path> tests/integration/pod_lifecycle_test.sh
# Exit 0 and a PASS line on success; non-zero and a FAIL line otherwise.
set -euo pipefail

readonly TEST_NAME=pod_lifecycle_test
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

suffix="$(date +%s)-$$-$RANDOM"
NS="tec-it-$suffix"
NODE="tec-it-node-$suffix"
POD="pause"

cleanup() {
  local rc=$?
  set +e
  # No kubelet and no controller-manager: force the pod out, then finalize the namespace by
  # hand (the namespace controller that would normally do it is not running).
  k -n "$NS" delete pod "$POD" --grace-period=0 --force --wait=false --ignore-not-found >/dev/null 2>&1
  if k get namespace "$NS" >/dev/null 2>&1; then
    k delete namespace "$NS" --wait=false --ignore-not-found >/dev/null 2>&1
    printf '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"%s"},"spec":{"finalizers":[]}}' "$NS" \
      | k replace --raw "/api/v1/namespaces/$NS/finalize" -f - >/dev/null 2>&1
  fi
  k delete node "$NODE" --wait=false --ignore-not-found >/dev/null 2>&1
  exit "$rc"
}
trap cleanup EXIT

echo "$TEST_NAME: namespace $NS, node $NODE"

k get --raw /readyz >/dev/null 2>&1 || fail "the API server behind $KUBECONFIG is not ready (/readyz)"

k create namespace "$NS" >/dev/null || fail "cannot create namespace $NS"

k apply -f - >/dev/null <<EOF || fail "cannot create node $NODE"
apiVersion: v1
kind: Node
metadata:
  name: $NODE
  labels:
    tec.test/integration: "true"
EOF

k apply -f - >/dev/null <<EOF || fail "cannot create pod $NS/$POD"
apiVersion: v1
kind: Pod
metadata:
  name: $POD
  namespace: $NS
spec:
  nodeName: $NODE
  automountServiceAccountToken: false
  containers:
  - name: pause
    image: registry.k8s.io/pause:3.9
EOF

# Tolerations added by the DefaultTolerationSeconds admission plugin.
tolerations=$(k -n "$NS" get pod "$POD" \
  -o jsonpath='{range .spec.tolerations[*]}{.key}|{.operator}|{.effect}|{.tolerationSeconds}{"\n"}{end}') \
  || fail "cannot read pod $NS/$POD"
for key in node.kubernetes.io/not-ready node.kubernetes.io/unreachable; do
  grep -qxF "$key|Exists|NoExecute|300" <<<"$tolerations" \
    || fail "pod lacks the $key:NoExecute toleration with tolerationSeconds=300; it has: $(tr '\n' ' ' <<<"$tolerations")"
done
echo "$TEST_NAME: DefaultTolerationSeconds tolerations present"

node_name=$(k -n "$NS" get pod "$POD" -o jsonpath='{.spec.nodeName}') || fail "cannot read pod $NS/$POD"
[ "$node_name" = "$NODE" ] || fail "pod is bound to '$node_name', expected '$NODE'"

# Graceful delete: with no kubelet to confirm, the pod stays (Terminating) with a deletionTimestamp.
k -n "$NS" delete pod "$POD" --wait=false >/dev/null || fail "cannot delete pod $NS/$POD"
deletion_ts=$(k -n "$NS" get pod "$POD" -o jsonpath='{.metadata.deletionTimestamp}') \
  || fail "pod $NS/$POD vanished after a graceful delete (expected it to stay Terminating)"
[ -n "$deletion_ts" ] || fail "pod $NS/$POD has no deletionTimestamp after delete"
grace=$(k -n "$NS" get pod "$POD" -o jsonpath='{.metadata.deletionGracePeriodSeconds}')
echo "$TEST_NAME: pod is Terminating (deletionTimestamp=$deletion_ts, grace=${grace}s)"

# Force delete removes it at once.
k -n "$NS" delete pod "$POD" --grace-period=0 --force --wait=false >/dev/null 2>&1 \
  || fail "force delete of pod $NS/$POD failed"
deadline=$((SECONDS + 30))
while k -n "$NS" get pod "$POD" >/dev/null 2>&1; do
  [ "$SECONDS" -lt "$deadline" ] || fail "pod $NS/$POD still exists 30 s after a force delete"
  sleep 1
done

echo "PASS: $TEST_NAME"
