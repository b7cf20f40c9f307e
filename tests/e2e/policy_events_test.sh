#!/usr/bin/env bash
# End to end, policy changes you can see (issue 31): with --policy-configmap, each load and
# reload of the policy file is an Event on that ConfigMap, shown by `kubectl describe
# configmap`, and the policy_* gauges follow:
#   - at start: Normal PolicyApplied naming the file's SHA-256; policy_info{sha256} is the
#     file's, policy_last_reload_successful 1;
#   - a typo (an unknown field): Warning PolicyRejected with FILE:LINE:COLUMN and the field,
#     policy_last_reload_successful 0, policy_info unchanged (the old policy stays in force);
#   - a valid change: Normal PolicyApplied "(was sha256:<old>)", the gauges move on.
# The file is updated the way the kubelet updates a mounted ConfigMap (..data swapped).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CM=taint-eviction-controller-policy  # the name deploy/rbac.yaml's Role lets the controller GET
on_cleanup() { k -n "$DEPLOY_NS" delete configmap "$CM" --ignore-not-found >/dev/null 2>&1; }

setup_rbac
dir="$WORK/policy"
publish() {  # publish CONTENT: the file (as the kubelet updates it) and the ConfigMap
  publish_policy "$1"
  k -n "$DEPLOY_NS" create configmap "$CM" --from-file=policy.yaml="$POLICY_FILE" \
    --dry-run=client -o yaml | k apply -f - >/dev/null || fail "cannot write ConfigMap $CM"
}
sha() { sha256sum "$dir/policy.yaml" | cut -d' ' -f1; }
header=$POLICY_HEADER
# describe_has PATTERN SECONDS: until `kubectl describe configmap` shows PATTERN (grep -E).
describe_has() {
  local deadline=$((SECONDS + $2))
  until k -n "$DEPLOY_NS" describe configmap "$CM" | matches -E "$1"; do
    [ "$SECONDS" -lt "$deadline" ] || fail "kubectl describe configmap $CM shows no '$1' within $2 s:
$(k -n "$DEPLOY_NS" describe configmap "$CM" | sed -n '/^Events:/,$p')"
    sleep 0.5
  done
}

publish "$header
rateLimit:
  evictionsPerSecond: 50"
first=$(sha)
start_controller events --policy "$dir/policy.yaml" --policy-configmap "$CM"
wait_acting "$CONTROLLER_LOG"
describe_has "Normal +PolicyApplied .*Policy sha256:${first:0:12} in force since the start" 30
wait_metric "taint_eviction_controller_policy_info{sha256=\"$first\"}" 'v == 1' 10
wait_metric taint_eviction_controller_policy_last_reload_successful 'v == 1' 10
log "start: PolicyApplied sha256:${first:0:12} on ConfigMap $CM"

# A typo: the policy in force stays.
publish "$header
rateLimit:
  evictionsPerSecnd: 5"
describe_has "Warning +PolicyRejected .*sha256:${first:0:12} stays in force: .*policy.yaml:4:3: rateLimit.evictionsPerSecnd: unknown field" 30
wait_metric taint_eviction_controller_policy_last_reload_successful 'v == 0' 10
wait_metric "taint_eviction_controller_policy_info{sha256=\"$first\"}" 'v == 1' 10
grep -q "eviction policy change rejected" "$CONTROLLER_LOG" || fail "no rejection in the log"
log "typo: PolicyRejected on ConfigMap $CM, sha256:${first:0:12} still in force"

# A valid change.
publish "$header
rateLimit:
  evictionsPerSecond: 20"
second=$(sha)
describe_has "Normal +PolicyApplied .*Policy sha256:${second:0:12} applied \\(was sha256:${first:0:12}\\)" 30
wait_metric "taint_eviction_controller_policy_info{sha256=\"$second\"}" 'v == 1' 10
wait_metric taint_eviction_controller_policy_last_reload_successful 'v == 1' 10
[ "$(metric "taint_eviction_controller_policy_info{sha256=\"$first\"}")" = absent ] \
  || fail "policy_info still has the old policy's series"
log "fix: PolicyApplied sha256:${second:0:12} (was ${first:0:12})"
echo "PASS: $TEST_NAME"
