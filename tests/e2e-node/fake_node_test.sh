#!/usr/bin/env bash
# A fake (kubelet-less) Node beside the real one, for scenarios that need more nodes than the
# machine has: the in-cluster controller evicts a pod bound to it when it is tainted NoExecute
# (DisruptionTarget, deletion), and the pods on the real node are left alone. With no kubelet
# to finish the deletion the pod stays Terminating; the test removes it and the Node after.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
readonly FAKE="tec-fake-$SUFFIX"

on_cleanup() {
  k -n "$NS" delete pods --all --grace-period=0 --force --wait=false >/dev/null 2>&1
  k delete node "$FAKE" --ignore-not-found --wait=false >/dev/null 2>&1
}

make_namespace
wait_until 60 "the controller Deployment available with 2 replicas" controller_available 2
k apply -f - >/dev/null <<EOT || fail "cannot create the fake node $FAKE"
apiVersion: v1
kind: Node
metadata:
  name: $FAKE
  labels:
    tec.test/fake: "true"
spec:
  taints:
  - {key: tec.test/fake, effect: NoSchedule}
EOT
# One pod on the fake node (bound by name: no scheduler involved), one on the real node.
k apply -f - >/dev/null <<EOT || fail "cannot create pods"
apiVersion: v1
kind: Pod
metadata: {name: on-fake, namespace: $NS}
spec:
  nodeName: $FAKE
  automountServiceAccountToken: false
  containers: [{name: c, image: $TEC_CLUSTER_WORKLOAD_IMAGE, imagePullPolicy: Never}]
---
apiVersion: v1
kind: Pod
metadata: {name: on-real, namespace: $NS}
spec:
  nodeName: $NODE
  automountServiceAccountToken: false
  containers: [{name: c, image: $TEC_CLUSTER_WORKLOAD_IMAGE, imagePullPolicy: Never}]
EOT
real_running() { [ "$(k -n "$NS" get pod on-real -o jsonpath='{.status.phase}')" = Running ]; }
wait_until 120 "pod on-real Running on $NODE" real_running

k taint nodes "$FAKE" tec.test/gone=now:NoExecute >/dev/null || fail "cannot taint $FAKE"
terminating() { [ -n "$(k -n "$NS" get pod on-fake -o jsonpath='{.metadata.deletionTimestamp}')" ]; }
wait_until 60 "the pod on the fake node evicted" terminating
cond=$(k -n "$NS" get pod on-fake -o jsonpath='{.status.conditions[?(@.type=="DisruptionTarget")].reason}')
[ "$cond" = DeletionByTaintManager ] || fail "the evicted pod on $FAKE has DisruptionTarget reason '$cond'"
log "the in-cluster controller evicted the pod on the fake node $FAKE (DisruptionTarget $cond)"

deadline=$(($(now_ms) + 5000))
while [ "$(now_ms)" -lt "$deadline" ]; do
  [ -z "$(k -n "$NS" get pod on-real -o jsonpath='{.metadata.deletionTimestamp}')" ] \
    || fail "the pod on the real node was evicted by a taint on $FAKE"
  sleep 0.5
done
real_running || fail "the pod on the real node stopped running"
log "the pod on the real node $NODE still runs"

echo "PASS: $TEST_NAME"
