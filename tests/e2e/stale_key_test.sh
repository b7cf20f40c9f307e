#!/usr/bin/env bash
# End to end, the stale-key race (docs/behaviour.md §9; kubernetes issues #100607,
# #107543, #110401, #125332), ROUNDS rounds on one node: taint the node; at once force-delete
# the pod and remove the taint; re-create a pod with the same name (new UID); check it is not
# evicted while the node is untainted; taint again -> the NEW pod must be evicted (its UID gets
# the DisruptionTarget condition and a deletionTimestamp). Then force-delete it and untaint for
# the next round. Upstream up to 1.32 skips the re-created pod forever after such a sequence.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ROUNDS=${ROUNDS:-30}

setup_rbac
NODE="tec-e2e-stale-$SUFFIX"
make_node "$NODE"
start_controller stale
wait_acting "$CONTROLLER_LOG"

force_delete() {
  k -n "$NS" delete pod "$1" --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
  local deadline=$((SECONDS + 20))
  while k -n "$NS" get pod "$1" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || fail "pod $NS/$1 still exists 20 s after a force delete"
    sleep 0.1
  done
}

max_ms=0
for round in $(seq "$ROUNDS"); do
  make_pod web "$NODE"
  taint "$NODE" testTaint1=test1:NoExecute
  force_delete web
  taint "$NODE" testTaint1:NoExecute-
  make_pod web "$NODE"
  uid=$(pod_uid web)
  # Untainted: the re-created pod must stay (a stale DELETE would carry the old UID and fail
  # its precondition; a stale entry must not evict the new pod).
  assert_not_terminating_for 1 web
  t0=$(now_ms)
  taint "$NODE" testTaint1=test1:NoExecute
  wait_terminating web 15
  ms=$(($(now_ms) - t0))
  [ "$ms" -gt "$max_ms" ] && max_ms=$ms
  [ "$(pod_uid web)" = "$uid" ] || fail "round $round: the evicted pod is not the re-created one"
  assert_disruption_condition web
  force_delete web
  taint "$NODE" testTaint1:NoExecute-
done
log "$ROUNDS rounds: the re-created pod was evicted every time (slowest ${max_ms} ms), never while untainted"
stop_controller "$CONTROLLER_PID"
echo "PASS: $TEST_NAME"
