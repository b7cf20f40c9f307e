#!/usr/bin/env bash
# End to end: the policy file is re-read while the controller runs, updated the way the kubelet
# updates a mounted ConfigMap (the file is a symlink through `..data`, and `..data` is swapped
# to a new directory at once). Start in dry-run (from the file): an untolerated pod is only
# "would delete". An invalid update is rejected: policy_reload_failures_total counts it, a
# warning names the problem, and dry-run stays (the next untolerated pod is not evicted). A
# valid update without dryRun applies without a restart ("eviction policy reloaded"), and the
# next untolerated pod is evicted.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

setup_rbac
NODE="tec-e2e-reload-$SUFFIX"
make_node "$NODE"
taint "$NODE" testTaint1=test1:NoExecute

dir="$WORK/policy"
publish() { publish_policy "$1"; }
header=$POLICY_HEADER
publish "$header
dryRun: true"

start_controller reload --policy "$dir/policy.yaml"
wait_acting "$CONTROLLER_LOG"

would_delete() { grep -q "dry run: would delete pod=\"$NS/$1\"" "$CONTROLLER_LOG"; }
wait_would_delete() {
  local deadline=$((SECONDS + 30))
  until would_delete "$1"; do
    [ "$SECONDS" -lt "$deadline" ] || fail "no 'would delete' for $NS/$1 within 30 s"
    sleep 0.3
  done
}

make_pod first "$NODE"
wait_would_delete first
assert_not_terminating_for 5 first
log "dry-run from the file: 'would delete' for first, not evicted"

publish "$header
dryRun: false
rateLimit:
  evictionsPerSecond: -1"
wait_metric taint_eviction_controller_policy_reload_failures_total 'v == 1' 30
grep -q "eviction policy change rejected.*evictionsPerSecond" "$CONTROLLER_LOG" \
  || fail "no warning naming the rejected field: $(grep -i 'policy' "$CONTROLLER_LOG" | tail -3 | tr '\n' ' ')"
make_pod second "$NODE"
wait_would_delete second
assert_not_terminating_for 5 first second
log "an invalid update is rejected and counted; dry-run stays in force"

publish "$header
dryRun: false"
deadline=$((SECONDS + 30))
until grep -q "eviction policy reloaded from $dir/policy.yaml" "$CONTROLLER_LOG"; do
  [ "$SECONDS" -lt "$deadline" ] || fail "the valid update was not applied within 30 s"
  sleep 0.3
done
make_pod third "$NODE"
wait_terminating third 30
v=$(metric taint_eviction_controller_policy_reload_failures_total)
[ "$v" = 1 ] || fail "policy_reload_failures_total is $v after a valid update"
log "a valid update applies without a restart: third is evicted"

stop_controller "$CONTROLLER_PID"
echo "PASS: $TEST_NAME"
