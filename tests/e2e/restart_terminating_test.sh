#!/usr/bin/env bash
# End to end, issue 29 item 5: a controller SIGKILLed in the middle of a rate-limited mass
# eviction, then restarted, deletes nothing twice. The pods the first run deleted are still
# terminating (no kubelet confirms them here, as a grace period would on a real node); the
# second run replays them and must leave them alone: no "deleting pod" line, no DELETE
# (pod_deletions_total counts only the pods still to go), no second "Marking for deletion"
# Event, each counted in terminating_pods_skipped_total; and every other pod is evicted.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
readonly PODS=12 RATE=2

setup_rbac
NODE="tec-e2e-restart-$SUFFIX"
make_node "$NODE"
for i in $(seq 1 "$PODS"); do
  printf -- '---\napiVersion: v1\nkind: Pod\nmetadata: {name: p%02d, namespace: %s}\nspec:\n  nodeName: %s\n  automountServiceAccountToken: false\n  containers: [{name: pause, image: registry.k8s.io/pause:3.9}]\n' \
    "$i" "$NS" "$NODE"
done >"$WORK/pods.yaml"
k create -f "$WORK/pods.yaml" >/dev/null || fail "cannot create the pods"

policy="$WORK/policy.yaml"
cat >"$policy" <<EOT
apiVersion: taint-eviction-controller/v1alpha1
kind: EvictionPolicy
rateLimit:
  evictionsPerSecond: $RATE
  burst: 1
EOT

# terminating_pods: the names of the pods with a deletionTimestamp, one a line, sorted.
terminating_pods() {
  k -n "$NS" get pods -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.deletionTimestamp}{"\n"}{end}' \
    | awk '$2 != "" { print $1 }' | sort
}
count_lines() { grep -c . || true; }

start_controller first --policy "$policy"
PID_FIRST=$CONTROLLER_PID
wait_acting "$CONTROLLER_LOG" 60
taint "$NODE" testTaint1=test1:NoExecute

# Kill it mid-run: a third of the pods gone, the rest waiting for the rate limiter.
deadline=$((SECONDS + 60))
until [ "$(terminating_pods | count_lines)" -ge $((PODS / 3)) ]; do
  [ "$SECONDS" -lt "$deadline" ] || fail "fewer than $((PODS / 3)) pods evicted within 60 s"
  sleep 0.2
done
kill -KILL "$PID_FIRST"
wait "$PID_FIRST" 2>/dev/null || true
sleep 1  # a request the kill interrupted has landed or never will
terminating_pods >"$WORK/before.txt"
before=$(count_lines <"$WORK/before.txt")
[ "$before" -lt "$PODS" ] || fail "every pod was evicted before the kill: nothing left mid-run"
log "first run killed with $before of $PODS pods terminating"

start_controller second --policy "$policy"
LOG_SECOND=$CONTROLLER_LOG
wait_acting "$LOG_SECOND" 60  # after the killed leader's Lease expires (15 s)
deadline=$((SECONDS + 60))
until [ "$(terminating_pods | count_lines)" -eq "$PODS" ]; do
  [ "$SECONDS" -lt "$deadline" ] || fail "only $(terminating_pods | count_lines) of $PODS pods evicted by the second run within 60 s"
  sleep 0.5
done

# Nothing the first run deleted was deleted again.
while read -r p; do
  ! grep -q "deleting pod pod=\"$NS/$p\"" "$LOG_SECOND" \
    || fail "the second run deleted $NS/$p again (terminating since the first run)"
done <"$WORK/before.txt"
remaining=$((PODS - before))
wait_metric taint_eviction_controller_pod_deletions_total "v == $remaining" 10
# Each terminating pod is decided twice by the replay: with its node and on its own.
wait_metric taint_eviction_controller_terminating_pods_skipped_total "v >= $before" 10
skipped=$METRIC_VALUE
# At most one "Marking for deletion" per pod (the first run's may be lost with it: its Events
# are written after its deletions).
for i in $(seq 1 "$PODS"); do
  p=$(printf 'p%02d' "$i")
  marks=$(k -n "$NS" get events --field-selector "reason=TaintManagerEviction,involvedObject.name=$p" \
    -o jsonpath='{range .items[*]}{.message}|{.count}{"\n"}{end}' \
    | awk -F'|' '/^Marking for deletion/ { n += ($2 == "" ? 1 : $2) } END { print n + 0 }')
  [ "$marks" -le 1 ] || fail "pod $NS/$p has $marks 'Marking for deletion' occurrences"
done
log "second run: $remaining deleted, $before left alone (terminating_pods_skipped_total $skipped)"
echo "PASS: $TEST_NAME"
