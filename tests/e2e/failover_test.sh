#!/usr/bin/env bash
# End to end, leader failover: two controllers share the Lease; only the leader acts; kill -9 the
# leader; the other takes over and evicts a newly untolerated pod within the lease duration
# (15 s) + 5 s. Then SIGTERM releases the lease.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
readonly LEASE_SECONDS=15

setup_rbac
NODE="tec-e2e-failover-$SUFFIX"
make_node "$NODE"

start_controller a
PID_A=$CONTROLLER_PID LOG_A=$CONTROLLER_LOG METRICS_A=$METRICS_URL
wait_acting "$LOG_A"
start_controller b
PID_B=$CONTROLLER_PID LOG_B=$CONTROLLER_LOG METRICS_B=$METRICS_URL

holder=$(k -n "$DEPLOY_NS" get lease "$LEASE_NAME" -o jsonpath='{.spec.holderIdentity}')
log "leader: $holder"
grep -q "acting: replayed" "$LOG_B" && fail "controller b acts while a holds the lease"
METRICS_URL=$METRICS_B
[ "$(metric taint_eviction_controller_is_leader)" = 0 ] || fail "b reports is_leader != 0 as a follower"
METRICS_URL=$METRICS_A
[ "$(metric taint_eviction_controller_is_leader)" = 1 ] || fail "a reports is_leader != 1"

# The leader acts; the follower only watches.
make_pod first "$NODE"
taint "$NODE" testTaint1=test1:NoExecute
wait_terminating first 10
grep -q "deleting pod pod=\"$NS/first\"" "$LOG_B" && fail "the follower deleted a pod"

kill -KILL "$PID_A"
wait "$PID_A" 2>/dev/null || true
t0=$(now_ms)
make_pod second "$NODE"
wait_terminating second $((LEASE_SECONDS + 5))
ms=$(($(now_ms) - t0))
log "leader killed; the follower evicted the new pod after ${ms} ms (limit $(( (LEASE_SECONDS + 5) * 1000 )) ms)"
grep -q "acting: replayed" "$LOG_B" || fail "b did not log that it started acting"
assert_disruption_condition second

CONTROLLER_PIDS=("$PID_B")
stop_controller "$PID_B"
holder=$(k -n "$DEPLOY_NS" get lease "$LEASE_NAME" -o jsonpath='{.spec.holderIdentity}')
[ -z "$holder" ] || fail "the lease is still held by '$holder' after SIGTERM"
echo "PASS: $TEST_NAME"
