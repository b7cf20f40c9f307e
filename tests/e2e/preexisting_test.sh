#!/usr/bin/env bash
# End to end: taints and pods that existed before the controller started are handled after its
# first sync (replayed into the controller once it leads): the untolerated pod is evicted, the
# pod tolerating the taint forever is not, and a pod tolerating it for 3 s goes after ~3 s.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

setup_rbac
NODE="tec-e2e-pre-$SUFFIX"
make_node "$NODE"
make_pod untolerated "$NODE"
make_pod forever "$NODE" "$(toleration testTaint1 test1)"
make_pod three "$NODE" "$(toleration testTaint1 test1 3)"
taint "$NODE" testTaint1=test1:NoExecute
assert_not_terminating_for 1 untolerated forever three  # nothing acts before we start

t0=$(now_ms)
start_controller pre
wait_terminating untolerated 20
log "untolerated pre-existing pod evicted $(($(now_ms) - t0)) ms after the controller started"
wait_terminating three 20
log "pod tolerating 3 s evicted $(($(now_ms) - t0)) ms after the controller started"
assert_not_terminating_for 3 forever
assert_disruption_condition untolerated
assert_disruption_condition three
stop_controller "$CONTROLLER_PID"
echo "PASS: $TEST_NAME"
