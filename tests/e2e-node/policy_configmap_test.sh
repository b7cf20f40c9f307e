#!/usr/bin/env bash
# Policy changes you can see, on the real node (issue 31): the Deployment from deploy/ mounts
# the policy ConfigMap and runs with --policy-configmap, so
#   - `kubectl describe configmap taint-eviction-controller-policy` shows each replica's
#     PolicyApplied Event from its start;
#   - a typo put in the ConfigMap shows a Warning PolicyRejected there within the reload
#     interval (5 s) plus the kubelet's ConfigMap sync (up to its sync period, about a minute),
#     naming the line, the column and the field, and the policy in force is unchanged (each
#     replica logs that it stays);
#   - the shipped ConfigMap is put back at the end.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CM=taint-eviction-controller-policy
wait_until 60 "the controller Deployment available with 2 replicas" controller_available 2
k -n "$CONTROLLER_NS" get configmap "$CM" -o json >"$WORK/shipped.json" || fail "no ConfigMap $CM"
on_exit_restore() {
  k -n "$CONTROLLER_NS" get configmap "$CM" -o json \
    | python3 -c 'import json,sys; c=json.load(sys.stdin); s=json.load(open(sys.argv[1])); c["data"]=s["data"]; print(json.dumps(c))' \
      "$WORK/shipped.json" | k replace -f - >/dev/null 2>&1 || true
}
events_of_cm() { k -n "$CONTROLLER_NS" describe configmap "$CM" | sed -n '/^Events:/,$p'; }
# cm_events REASON REGEX: how many times an Event with REASON whose message matches REGEX was
# reported on the ConfigMap (an Event repeated is one object with a higher count). Tests before
# this one on the node may have changed the policy, or run this one: only a rise counts.
cm_events() {
  k -n "$CONTROLLER_NS" get events \
    --field-selector "reason=$1,involvedObject.kind=ConfigMap,involvedObject.name=$CM" \
    -o jsonpath='{range .items[*]}{.count}|{.message}{"\n"}{end}' \
    | awk -F'|' -v re="$2" '$2 ~ re { c += ($1 == "" ? 1 : $1) } END { print c + 0 }'
}
readonly APPLIED=' applied [(]was '
readonly REJECTED='stays in force: .*policy[.]yaml:[0-9]+:3: rateLimit[.]evictionsPerSecnd: unknown field'
rejected_since() { [ "$(cm_events PolicyRejected "$REJECTED")" -gt "$1" ]; }
has() { events_of_cm | matches -E "$1"; }

wait_until 60 "a PolicyApplied Event from the start on ConfigMap $CM" \
  has "Normal +PolicyApplied .*Policy sha256:[0-9a-f]{12} in force since the start"
log "at start: $(events_of_cm | grep -c PolicyApplied) PolicyApplied line(s) on $CM"

# The typo: a rateLimit with a misspelt field, appended to the shipped policy.yaml.
python3 - "$WORK/shipped.json" >"$WORK/typo.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["data"]["policy.yaml"] = c["data"]["policy.yaml"].rstrip("\n") + "\nrateLimit:\n  evictionsPerSecnd: 5\n"
for k in ("resourceVersion", "uid", "creationTimestamp", "managedFields"):
    c["metadata"].pop(k, None)
print(json.dumps(c))
PY
applied_before=$(cm_events PolicyApplied "$APPLIED") || fail "cannot list the Events of ConfigMap $CM"
rejected_before=$(cm_events PolicyRejected "$REJECTED") || fail "cannot list the Events of ConfigMap $CM"
since=$(date -u -d "@$(($(date +%s) - 1))" +%Y-%m-%dT%H:%M:%SZ)  # for the pods' logs
trap 'rc=$?; on_exit_restore; (exit $rc); cleanup' EXIT
t0=$(now_ms)
k -n "$CONTROLLER_NS" apply -f "$WORK/typo.json" >/dev/null 2>&1 \
  || k -n "$CONTROLLER_NS" replace -f "$WORK/typo.json" >/dev/null || fail "cannot write the typo into $CM"
wait_until 180 "a new PolicyRejected Warning on ConfigMap $CM ($rejected_before before the edit)" \
  rejected_since "$rejected_before"
has "Warning +PolicyRejected .*$REJECTED" || fail "kubectl describe configmap $CM does not show the PolicyRejected Warning: $(events_of_cm)"
log "PolicyRejected on $CM $(($(now_ms) - t0)) ms after the edit"
for p in $(controller_pods); do
  wait_until 60 "pod $p logging that the policy in force stays" \
    bash -c "timeout 30 kubectl -n '$CONTROLLER_NS' logs --since-time='$since' '$p' | grep -q 'eviction policy change rejected, the policy in force stays'"
done
applied_after=$(cm_events PolicyApplied "$APPLIED") || fail "cannot list the Events of ConfigMap $CM"
[ "$applied_after" = "$applied_before" ] \
  || fail "a policy was applied after the typo ($applied_before changed policies applied before it, $applied_after after): $(events_of_cm)"
log "both replicas kept the policy in force"
echo "PASS: $TEST_NAME"
