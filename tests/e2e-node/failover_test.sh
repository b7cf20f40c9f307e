#!/usr/bin/env bash
# Leader failover of the in-cluster Deployment: deleting the leader pod (the kubelet sends it
# SIGTERM, it releases the Lease) hands leadership to the other replica, which then evicts the
# next untolerated pod when the node is tainted. The Deployment replaces the deleted replica.
# The node is cordoned meanwhile: the replacement stays Pending, so the standby is the only
# candidate for the released Lease (a replacement that started at once could win the race).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
readonly APP=next

make_namespace
wait_until 60 "the controller Deployment available with 2 replicas" controller_available 2
wait_until 90 "a Lease holder among the running controller pods" current_leader
leader=$(current_leader)
other=$(controller_pods | grep -vxF "$leader" | head -n1)
[ -n "$other" ] || fail "no second controller replica beside the leader $leader"
log "leader $leader, standby $other"

workload "$APP" 1
wait_until 120 "the $APP pod Running" app_running "$APP" 1
victim=$(pods_of "$APP" | awk '{ print $1 }')

k cordon "$NODE" >/dev/null || fail "cannot cordon $NODE"
on_cleanup() { k uncordon "$NODE" >/dev/null 2>&1; }
t0=$(now_ms)
k -n "$CONTROLLER_NS" delete pod "$leader" --wait=false >/dev/null || fail "cannot delete the leader pod $leader"
new_leader() { [ "$(lease_holder_pod)" = "$other" ]; }
# A released Lease is taken at the next retry (2 s); an unreleased one after its duration (15 s).
wait_until 40 "$other taking over the Lease from $leader" new_leader
log "leader pod deleted; $other holds the Lease after $(($(now_ms) - t0)) ms"
leader_logs=$(k -n "$CONTROLLER_NS" logs "$other") || fail "kubectl logs $other failed"
grep -q "acting: replayed" <<<"$leader_logs" || wait_until 30 "$other acting" \
  sh -c "kubectl --request-timeout=$REQ_TIMEOUT -n $CONTROLLER_NS logs $other | grep -q 'acting: replayed'"

taint_node next
gone() { ! k -n "$NS" get pod "$victim" -o name >/dev/null 2>&1; }
wait_until 90 "the $APP pod $victim evicted by the new leader" gone
leader_logs=$(k -n "$CONTROLLER_NS" logs "$other")
grep -q "deleting pod pod=\"$NS/$victim\"" <<<"$leader_logs" \
  || fail "the new leader $other did not log the deletion of $NS/$victim"
log "the new leader $other evicted $NS/$victim"

# Uncordoned, the Deployment's replacement of the deleted replica runs: two available again
# (it tolerates the test taint, so it is scheduled although the node is tainted).
k uncordon "$NODE" >/dev/null || fail "cannot uncordon $NODE"
wait_until 120 "the controller Deployment back to 2 available replicas" controller_available 2
untaint_node

echo "PASS: $TEST_NAME"
