#!/usr/bin/env bash
# On the real node, with the controller running in the cluster as the Deployment from deploy/:
# a NoExecute taint the controller tolerates but a workload does not makes the controller
# delete the workload's pods, and the kubelet really stops their containers:
#   - the workload Deployment's pods run on the node (containerd tasks RUNNING);
#   - after `kubectl taint`, each pod gets DisruptionTarget=True (DeletionByTaintManager) and a
#     deletionTimestamp (seen on a watch), a "Marking for deletion" event with its UID, then
#     disappears, and its containers' tasks are no longer running;
#   - the ReplicaSet's replacements stay Pending, unscheduled because of the taint;
#   - the controller's own pods tolerate the taint and stay.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
readonly APP=sleeper REPLICAS=3

make_namespace
wait_until 60 "the controller Deployment available with 2 replicas" controller_available 2
controllers_before=$(controller_pods | sort | tr '\n' ' ')

workload "$APP" "$REPLICAS"
wait_until 120 "$REPLICAS pods of $APP Running on $NODE" app_running "$APP" "$REPLICAS"
victims=$(pods_of "$APP" | awk '{ print $1 }' | sort)
declare -A uid containers
for p in $victims; do
  uid[$p]=$(k -n "$NS" get pod "$p" -o jsonpath='{.metadata.uid}')
  containers[$p]=$(containers_of_pod "$NS" "$p" | tr '\n' ' ')
  [ -n "${containers[$p]// /}" ] || fail "no containerd containers for pod $NS/$p"
  running=0
  for c in ${containers[$p]}; do [ "$(task_status "$c")" = RUNNING ] && running=$((running + 1)); done
  # The sandbox (pause) and the workload container.
  [ "$running" -ge 2 ] || fail "pod $NS/$p: $running running containerd tasks, expected the sandbox and the container"
done
log "running on $NODE: $(tr '\n' ' ' <<<"$victims") (containerd tasks RUNNING)"

record_pod_updates "$WORK/watch.json" "$REPLICAS"
t0=$(now_ms)
taint_node now
log "tainted $NODE $TAINT_KEY=now:NoExecute"

# Every original pod disappears: deleted by the controller, stopped and finalised by the kubelet.
gone() {
  local p
  for p in $victims; do
    k -n "$NS" get pod "$p" -o name >/dev/null 2>&1 && return 1
  done
  return 0
}
wait_until 120 "the workload pods deleted and gone" gone
log "all $REPLICAS pods gone $(($(now_ms) - t0)) ms after the taint"

# Seen on the watch: DisruptionTarget=True with the taint manager's reason, and a deletion.
with_condition=$(watch_saw "$WORK/watch.json" \
  'any(c.get("type") == "DisruptionTarget" and c.get("status") == "True" and c.get("reason") == "DeletionByTaintManager" for c in pod.get("status", {}).get("conditions", []))' \
  | sort) || true
for p in $victims; do
  grep -qxF "$p" <<<"$with_condition" || fail "pod $NS/$p never showed DisruptionTarget=True/DeletionByTaintManager on the watch"
done
deleted=$(watch_saw "$WORK/watch.json" 'pod["metadata"].get("deletionTimestamp") is not None' | sort) || true
for p in $victims; do
  grep -qxF "$p" <<<"$deleted" || fail "pod $NS/$p never had a deletionTimestamp on the watch"
done
log "every pod had DisruptionTarget=True (DeletionByTaintManager) and a deletionTimestamp before it went"

# The kubelet stopped the containers: no task of theirs runs any more.
stopped() {
  local p c s
  for p in $victims; do
    for c in ${containers[$p]}; do
      s=$(task_status "$c")
      [ "$s" = RUNNING ] && return 1
    done
  done
  return 0
}
wait_until 60 "the containers of the evicted pods stopped" stopped
log "containerd: no task of the evicted pods' containers is running"

# The events, with the pod's UID.
for p in $victims; do
  ev=$(events_for "$p")
  grep -qxF "TaintManagerEviction|Marking for deletion Pod $NS/$p|${uid[$p]}" <<<"$ev" \
    || fail "no 'Marking for deletion' TaintManagerEviction event with uid for $NS/$p: $(tr '\n' ' ' <<<"$ev")"
  grep -q '^Killing|' <<<"$ev" || fail "no kubelet 'Killing' event for $NS/$p (was the container really stopped?): $(tr '\n' ' ' <<<"$ev")"
done
log "TaintManagerEviction 'Marking for deletion' events (with UIDs) and the kubelet's Killing events are there"

# The ReplicaSet's replacements: Pending, unschedulable because of the taint, for a while.
unschedulable() {
  local n
  n=$(k -n "$NS" get pods -l "app=$APP" \
    -o jsonpath='{range .items[*]}{.status.phase}/{.spec.nodeName}/{.status.conditions[?(@.type=="PodScheduled")].reason}{"\n"}{end}' \
    | grep -c '^Pending//Unschedulable$' || true)
  [ "$n" -eq "$REPLICAS" ]
}
wait_until 60 "$REPLICAS replacement pods Pending and Unschedulable" unschedulable
msg=$(k -n "$NS" get pods -l "app=$APP" -o jsonpath='{.items[0].status.conditions[?(@.type=="PodScheduled")].message}')
grep -q "taint" <<<"$msg" || fail "the replacements are unschedulable but not because of the taint: $msg"
deadline=$(($(now_ms) + 10000))
while [ "$(now_ms)" -lt "$deadline" ]; do
  unschedulable || fail "a replacement pod left Pending/Unschedulable while the node is tainted"
  sleep 1
done
log "the $REPLICAS replacements stayed Pending for 10 s: $msg"

# The controller tolerates the taint: its pods are the same and still running.
controllers_after=$(controller_pods | sort | tr '\n' ' ')
[ "$controllers_after" = "$controllers_before" ] \
  || fail "the controller pods changed while the node was tainted: before '$controllers_before', after '$controllers_after'"

# Untainted, the replacements are scheduled and run again.
untaint_node
wait_until 120 "the replacements Running after the taint is removed" app_running "$APP" "$REPLICAS"
log "taint removed: $REPLICAS replacements Running"

echo "PASS: $TEST_NAME"
