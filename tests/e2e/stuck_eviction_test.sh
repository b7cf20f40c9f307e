#!/usr/bin/env bash
# End to end, a stuck eviction is visible (issue 11, item 5): the controller runs as a
# ServiceAccount that may do everything the deploy/ ClusterRole allows except DELETE pods.
#   - a pod on a tainted node cannot be deleted: after 5 failed attempts (about 1.5 s with the
#     100 ms doubling backoff) the pod gets a Warning TaintEvictionFailed Event carrying the
#     API's message, the controller logs one "eviction is stuck" warning, and
#     taint_eviction_controller_stuck_evictions is 1;
#   - it keeps retrying (pod_deletion_retries_total grows) without a second event (at most one
#     per 10 minutes) and without moving the DisruptionTarget condition's lastTransitionTime
#     (the condition is added once: the cached pod carries it);
#   - once delete is granted, the next retry deletes the pod and the gauge is back to 0.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

setup_rbac
NODELETE="tec-e2e-nodelete-$SUFFIX"  # ServiceAccount, ClusterRole and ClusterRoleBinding
GRANT="tec-e2e-grant-delete-$SUFFIX"  # ClusterRole and ClusterRoleBinding adding delete
on_cleanup() {
  k delete clusterrolebinding "$NODELETE" "$NODELETE-auth" "$GRANT" --ignore-not-found >/dev/null 2>&1
  k delete clusterrole "$NODELETE" "$GRANT" --ignore-not-found >/dev/null 2>&1
  k -n "$DEPLOY_NS" delete serviceaccount "$NODELETE" --ignore-not-found >/dev/null 2>&1
}

# bind_cluster_role NAME [ROLE]: a ClusterRoleBinding NAME of ClusterRole ROLE (default NAME)
# to the ServiceAccount.
bind_cluster_role() {
  k apply -f - >/dev/null <<EOT || fail "cannot bind ClusterRole ${2:-$1}"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: $1
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: ${2:-$1}
subjects:
- kind: ServiceAccount
  name: $NODELETE
  namespace: $DEPLOY_NS
EOT
}

# deploy/rbac.yaml's ClusterRole's rules without "delete".
deploy_objects rbac.yaml ClusterRole taint-eviction-controller \
  | sed -e "s/^  name: taint-eviction-controller\$/  name: $NODELETE/" \
  -e '/^  - delete$/d' \
  | k apply -f - >/dev/null || fail "cannot create ClusterRole $NODELETE"
verbs=$(k get clusterrole "$NODELETE" -o jsonpath='{.rules[*].verbs}') \
  || fail "cannot read ClusterRole $NODELETE"
grep -q '"list"' <<<"$verbs" || fail "ClusterRole $NODELETE lost its rules: $verbs"
grep -q '"delete"' <<<"$verbs" && fail "ClusterRole $NODELETE still grants delete: $verbs"
bind_cluster_role "$NODELETE"
# The secure metrics port's reviews, as deploy/rbac.yaml's auth-delegator binding grants them.
bind_cluster_role "$NODELETE-auth" system:auth-delegator
SA_KUBECONFIG=$("$REPO_ROOT/deploy/local/cluster.sh" sa-kubeconfig "$DEPLOY_NS" "$NODELETE" \
  "$WORK/nodelete.kubeconfig") || fail "cannot write a kubeconfig for $NODELETE"

NODE="tec-e2e-stuck-$SUFFIX"
make_node "$NODE"
make_pod stuck "$NODE"
# No Lease permissions for this account: one replica, no leader election.
start_controller stuck --leader-elect=false
wait_acting "$CONTROLLER_LOG"
log "controller acting as $DEPLOY_NS/$NODELETE (no pods delete); metrics at $METRICS_URL"

t0=$(now_ms)
taint "$NODE" testTaint1=test1:NoExecute
deadline=$((SECONDS + 60))
until [ -n "$(events_with_reason stuck TaintEvictionFailed)" ]; do
  [ "$SECONDS" -lt "$deadline" ] || fail "no TaintEvictionFailed event for $NS/stuck within 60 s"
  sleep 0.5
done
log "TaintEvictionFailed event $(($(now_ms) - t0)) ms after the taint"
uid=$(pod_uid stuck)
ev=$(events_with_reason stuck TaintEvictionFailed)
[ "$(wc -l <<<"$ev")" -eq 1 ] || fail "expected one TaintEvictionFailed event, got: $ev"
IFS='|' read -r ev_type ev_message ev_uid <<<"$ev"
[ "$ev_type" = Warning ] || fail "the event's type is '$ev_type', expected Warning"
[ "$ev_uid" = "$uid" ] || fail "the event's involvedObject.uid is '$ev_uid', expected $uid"
case "$ev_message" in
  "Cannot delete Pod $NS/stuck: DELETE pod $NS/stuck: 403 Forbidden: "*forbidden*) ;;
  *) fail "unexpected event message: $ev_message" ;;
esac
log "event: $ev_type TaintEvictionFailed '$ev_message'"
terminating stuck && fail "pod $NS/stuck was deleted although the controller may not delete pods"

wait_metric taint_eviction_controller_stuck_evictions 'v == 1' 15
retries=$(metric taint_eviction_controller_pod_deletion_retries_total)
failures=$(metric 'taint_eviction_controller_pod_deletion_failures_total{reason="forbidden"}')
log "stuck_evictions=1 pod_deletion_retries_total=$retries failures{forbidden}=$failures"
awk -v f="$failures" 'BEGIN { exit !(f >= 5) }' || fail "only $failures forbidden failures counted"
assert_disruption_condition stuck
transition=$(condition_time stuck DisruptionTarget)
[ -n "$transition" ] || fail "the DisruptionTarget condition has no lastTransitionTime"

# Still retried (the backoff grows to 30 s), quietly: no second event within 10 minutes.
wait_metric taint_eviction_controller_pod_deletion_retries_total "v >= $retries + 2" 90
log "retries continue: pod_deletion_retries_total=$METRIC_VALUE"
[ "$(events_with_reason stuck TaintEvictionFailed | wc -l)" -eq 1 ] \
  || fail "a second TaintEvictionFailed event within 10 minutes: $(events_with_reason stuck TaintEvictionFailed)"
n=$(grep -c "eviction is stuck pod=\"$NS/stuck\"" "$CONTROLLER_LOG" || true)
[ "$n" -eq 1 ] || fail "expected one 'eviction is stuck' log line, found $n"
[ "$(metric taint_eviction_controller_stuck_evictions)" = 1 ] || fail "stuck_evictions is not 1"
[ "$(condition_time stuck DisruptionTarget)" = "$transition" ] \
  || fail "the retries moved lastTransitionTime: $transition -> $(condition_time stuck DisruptionTarget)"
terminating stuck && fail "pod $NS/stuck was deleted although the controller may not delete pods"

# Grant delete: the next retry (at most ~36 s away with the jittered 30 s cap) deletes it.
k apply -f - >/dev/null <<EOT || fail "cannot create ClusterRole $GRANT"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: $GRANT
rules:
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["delete"]
EOT
bind_cluster_role "$GRANT"
t1=$(now_ms)
wait_terminating stuck 120
log "delete granted: pod deleted $(($(now_ms) - t1)) ms later"
wait_metric taint_eviction_controller_stuck_evictions 'v == 0' 15
log "stuck_evictions back to 0"
assert_disruption_condition stuck
[ "$(condition_time stuck DisruptionTarget)" = "$transition" ] \
  || fail "lastTransitionTime moved: $transition -> $(condition_time stuck DisruptionTarget)"

stop_controller "$CONTROLLER_PID"
echo "PASS: $TEST_NAME"
