#!/usr/bin/env bash
# End to end, losing the lease: another holder takes the Lease over (as a partitioned leader
# would find after the fact); the controller must stop acting and exit non-zero within the
# renew deadline plus a few seconds, as kube-controller-manager does. The Lease is handed back
# (holderIdentity "") at the end so the next test does not wait for it.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

on_cleanup() {
  k -n "$DEPLOY_NS" patch lease "$LEASE_NAME" --type merge \
    -p '{"spec":{"holderIdentity":"","leaseDurationSeconds":1}}' >/dev/null 2>&1 || true
}

setup_rbac
start_controller loser --leader-elect-lease-duration=6s --leader-elect-renew-deadline=4s \
  --leader-elect-retry-period=1s
wait_acting "$CONTROLLER_LOG"
pid=$CONTROLLER_PID

now=$(date -u +%Y-%m-%dT%H:%M:%S.000000Z)
k -n "$DEPLOY_NS" patch lease "$LEASE_NAME" --type merge \
  -p "{\"spec\":{\"holderIdentity\":\"e2e-thief\",\"leaseDurationSeconds\":60,\"renewTime\":\"$now\"}}" >/dev/null \
  || fail "cannot take the lease over"
t0=$(now_ms)
rc=0
for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && fail "the controller still runs 15 s after losing its lease"
wait "$pid" || rc=$?
ms=$(($(now_ms) - t0))
[ "$rc" -ne 0 ] || fail "the controller exited 0 after losing its lease (expected non-zero)"
grep -q "lost the leader lease" "$CONTROLLER_LOG" || fail "no 'lost the leader lease' in the log"
CONTROLLER_PIDS=()
log "lease taken over: the controller exited with status $rc after ${ms} ms (renew deadline 4 s)"
echo "PASS: $TEST_NAME"
