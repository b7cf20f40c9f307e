#!/usr/bin/env bash
# End to end, events as client-go's EventCorrelator records them (issue 11), against the local
# kube-apiserver with the controller running as the deploy/ ServiceAccount:
#   - a pod tolerating a taint for 1000 s, three taint/untaint cycles: each cycle schedules
#     and cancels its eviction, and the three cancellations are exactly one
#     "Cancelling deletion" Event with count 3 (one POST, then PATCHes of its count), which
#     `kubectl describe pod` shows as "(x3 over ...)";
#   - /metrics counts them as events_total{result="sent"} and {result="updated"}.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

setup_rbac
N1="tec-e2e-events-$SUFFIX"
make_node "$N1"
make_pod cycled "$N1" "$(toleration testTaint1 test1 1000)"

start_controller main
wait_acting "$CONTROLLER_LOG"
log "controller acting; metrics at $METRICS_URL"

# wait_log_count PATTERN N SECONDS: until PATTERN is in the controller log N times.
wait_log_count() {
  local deadline=$((SECONDS + $3))
  until [ "$(grep -c "$1" "$CONTROLLER_LOG")" -ge "$2" ]; do
    [ "$SECONDS" -lt "$deadline" ] || fail "'$1' not logged $2 times within $3 s"
    sleep 0.1
  done
}

# "message|count|involvedObject.uid" of every TaintManagerEviction Event of the pod.
cancel_events() {
  k -n "$NS" get events --field-selector "reason=TaintManagerEviction,involvedObject.name=cycled" \
    -o jsonpath='{range .items[*]}{.message}|{.count}|{.involvedObject.uid}{"\n"}{end}'
}

for i in 1 2 3; do
  taint "$N1" testTaint1=test1:NoExecute
  wait_log_count "scheduled eviction pod=\"$NS/cycled\"" "$i" 15
  taint "$N1" testTaint1:NoExecute-
  wait_log_count "cancelled eviction pod=\"$NS/cycled\"" "$i" 15
done
log "three taint/untaint cycles: three evictions scheduled and cancelled"

uid=$(pod_uid cycled)
want="Cancelling deletion of Pod $NS/cycled|3|$uid"
deadline=$((SECONDS + 30))
until [ "$(cancel_events)" = "$want" ]; do
  [ "$SECONDS" -lt "$deadline" ] || fail "expected exactly one Event '$want', got: $(cancel_events | tr '\n' ' ')"
  sleep 0.3
done
# And it stays so: no late second Event, no count beyond 3.
for _ in $(seq 10); do
  sleep 0.3
  got=$(cancel_events)
  [ "$got" = "$want" ] || fail "the Events changed after reaching count 3: $(tr '\n' ' ' <<<"$got")"
done
log "one 'Cancelling deletion' Event with count 3 and the pod's uid"

describe=$(k -n "$NS" describe pod cycled) || fail "kubectl describe pod failed"
grep -E "TaintManagerEviction" <<<"$describe" | grep -qF "(x3 over" \
  || fail "kubectl describe pod does not show the Event as x3: $(grep -A5 '^Events:' <<<"$describe")"
log "kubectl describe pod: $(grep TaintManagerEviction <<<"$describe" | tr -s ' ')"

sent=$(metric 'taint_eviction_controller_events_total{result="sent"}')
updated=$(metric 'taint_eviction_controller_events_total{result="updated"}')
log "metrics: events_total sent=$sent updated=$updated"
# At least: the controller acts on every node of the cluster, not only on this test's.
awk -v n="$sent" 'BEGIN { exit !(n >= 1) }' || fail "events_total{result=\"sent\"}=$sent, expected >= 1"
awk -v n="$updated" 'BEGIN { exit !(n >= 2) }' || fail "events_total{result=\"updated\"}=$updated, expected >= 2"

stop_controller "$CONTROLLER_PID"
echo "PASS: $TEST_NAME"
