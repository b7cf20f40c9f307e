#!/usr/bin/env bash
# End to end, the namespace opt-out annotation (taint-eviction-controller/exclude: "true")
# against the local kube-apiserver, the controller running as the deploy/ ServiceAccount:
#   0. an old ClusterRole without namespaces list/watch (an upgrade that kept it): the
#      controller logs one clear error line per LIST attempt, repeated with backoff, /readyz
#      is 500 naming the namespaces, and it never acts; it runs with leader election and the
#      Lease permissions, and never takes the Lease (it campaigns only once its caches sync,
#      so it cannot keep a healthy replica from acting);
#   1. namespace OPT annotated, namespace $NS not, each with a pod that does not tolerate the
#      taint (none) and one tolerating it 20 s (t20); taint the node: $NS/none goes at once,
#      $NS/t20 at ~20 s; OPT's pods are not terminating 40 s after the taint, and the
#      controller says why (reason=namespace_annotation);
#   2. remove OPT's annotation: its pods are evicted (none promptly, t20 20 s later);
#   3. a new pod of $NS tolerating 60 s, its eviction pending; annotate $NS: the pending
#      eviction is cancelled ("Cancelling deletion" event) and the pod outlives its due time.
# taint_eviction_controller_pods_skipped_total{reason="namespace_annotation"} counts the skips.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
command -v jq >/dev/null 2>&1 || fail "jq not found on PATH"

readonly ANNOTATION=taint-eviction-controller/exclude
OPT="tec-e2e-opt-$SUFFIX"
OLD_RBAC="tec-e2e-old-rbac-$SUFFIX"
N="tec-e2e-optout-$SUFFIX"

on_cleanup() {
  if k get namespace "$OPT" >/dev/null 2>&1; then
    k -n "$OPT" delete pods --all --grace-period=0 --force --wait=false >/dev/null 2>&1
    k delete namespace "$OPT" --wait=false --ignore-not-found >/dev/null 2>&1
    printf '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"%s"},"spec":{"finalizers":[]}}' "$OPT" \
      | k replace --raw "/api/v1/namespaces/$OPT/finalize" -f - >/dev/null 2>&1
  fi
  k delete clusterrolebinding "$OLD_RBAC" --ignore-not-found >/dev/null 2>&1
  k delete clusterrole "$OLD_RBAC" --ignore-not-found >/dev/null 2>&1
  k -n "$DEPLOY_NS" delete rolebinding "$OLD_RBAC" --ignore-not-found >/dev/null 2>&1
  k -n "$DEPLOY_NS" delete serviceaccount "$OLD_RBAC" --ignore-not-found >/dev/null 2>&1
}

# in_ns NAMESPACE COMMAND...: runs a lib.sh helper (they act in $NS) in another namespace.
in_ns() {
  local NS=$1
  shift
  "$@"
}

# deleted_ms NAMESPACE POD: when the controller sent the pod's DELETE (its log's clock, ms).
deleted_ms() {
  local line
  line=$(grep -m1 "deleting pod pod=\"$1/$2\"" "$CONTROLLER_LOG") \
    || fail "no 'deleting pod' line for $1/$2 in the controller log"
  date -d "${line%% *}" +%s%3N || fail "cannot read the time of: $line"
}

setup_rbac
make_node "$N"

# 0. The ClusterRole of the previous release (deploy/rbac.yaml's ClusterRole without the namespaces
#    rule) under another name, bound to a ServiceAccount of its own.
k -n "$DEPLOY_NS" create serviceaccount "$OLD_RBAC" >/dev/null || fail "cannot create the old-RBAC ServiceAccount"
k get clusterrole taint-eviction-controller -o json \
  | jq --arg name "$OLD_RBAC" '{apiVersion, kind, metadata: {name: $name},
        rules: [.rules[] | select((.resources | index("namespaces")) | not)]}' \
  | k apply -f - >/dev/null || fail "cannot create the old ClusterRole"
k create clusterrolebinding "$OLD_RBAC" --clusterrole="$OLD_RBAC" \
  --serviceaccount="$DEPLOY_NS:$OLD_RBAC" >/dev/null || fail "cannot bind the old ClusterRole"
k -n "$DEPLOY_NS" create rolebinding "$OLD_RBAC" --role=taint-eviction-controller-leader-election \
  --serviceaccount="$DEPLOY_NS:$OLD_RBAC" >/dev/null || fail "cannot bind the Lease Role"
old_kubeconfig=$("$REPO_ROOT/deploy/local/cluster.sh" sa-kubeconfig "$DEPLOY_NS" "$OLD_RBAC" \
  "$WORK/old.kubeconfig") || fail "cannot write a kubeconfig for the old-RBAC ServiceAccount"
# RBAC changes take effect within a second or so; wait until the old role really says no.
deadline=$((SECONDS + 30))
until [ "$(k auth can-i list namespaces --as="system:serviceaccount:$DEPLOY_NS:$OLD_RBAC" 2>/dev/null)" = no ] \
  && [ "$(k auth can-i list pods --all-namespaces --as="system:serviceaccount:$DEPLOY_NS:$OLD_RBAC" 2>/dev/null)" = yes ] \
  && [ "$(k -n "$DEPLOY_NS" auth can-i update "leases.coordination.k8s.io/$LEASE_NAME" --as="system:serviceaccount:$DEPLOY_NS:$OLD_RBAC" 2>/dev/null)" = yes ]; do
  [ "$SECONDS" -lt "$deadline" ] || fail "the old-RBAC ServiceAccount's permissions did not settle"
  sleep 0.5
done

old_log="$WORK/controller-old-rbac.log"
"$TEC_BIN" --kubeconfig "$old_kubeconfig" --leader-elect-resource-namespace "$DEPLOY_NS" \
  --metrics-bind-address 127.0.0.1:0 --health-probe-bind-address 127.0.0.1:0 \
  --log-level debug >"$old_log" 2>&1 &
old_pid=$!
CONTROLLER_PIDS+=("$old_pid")
CONTROLLER_LOGS+=("$old_log")
deadline=$((SECONDS + 90))
until [ "$(grep -c "cannot list namespaces" "$old_log")" -ge 3 ]; do
  kill -0 "$old_pid" 2>/dev/null || fail "the controller with the old ClusterRole exited: $(tail -5 "$old_log")"
  [ "$SECONDS" -lt "$deadline" ] || fail "no 3 'cannot list namespaces' lines within 90 s: $(tail -5 "$old_log")"
  sleep 0.5
done
line=$(grep -m1 "cannot list namespaces" "$old_log")
log "old ClusterRole: $line"
grep -qE "^[^ ]+ error " <<<"$line" || fail "the 'cannot list namespaces' line is not an error: $line"
grep -q "403" <<<"$line" || fail "the line does not give the 403: $line"
grep -q "needs list and watch on namespaces" <<<"$line" || fail "the line does not say what is missing: $line"
grep -q "retrying in [0-9]* ms" <<<"$line" || fail "the line does not say when it retries: $line"
grep "namespaces: list failed" "$old_log" && fail "the reflector's generic warning was logged too"
# Backoff: the retries are spaced out (0.8 s doubling), not a tight loop.
mapfile -t waits < <(grep "cannot list namespaces" "$old_log" | sed -n 's/.*retrying in \([0-9]*\) ms.*/\1/p')
[ "${waits[2]}" -gt "${waits[0]}" ] || fail "the retries do not back off: ${waits[*]} ms"
health=$(sed -n 's|.*serving /healthz and /readyz on \(http://[^ ]*\).*|\1|p' "$old_log" | head -1)
[ -n "$health" ] || fail "the old-RBAC controller does not serve its probes"
code=$(curl -s -o "$WORK/readyz" -w '%{http_code}' --max-time 5 "$health/readyz") || true
[ "$code" = 500 ] || fail "/readyz answered $code with the old ClusterRole, expected 500 (a failed check)"
grep -q "namespaces" "$WORK/readyz" || fail "/readyz does not name the namespaces: $(cat "$WORK/readyz")"
log "/readyz: $code $(tr '\n' ' ' <"$WORK/readyz")"
grep -q "acting: replayed" "$old_log" && fail "the controller acts although it cannot list namespaces"
identity=$(sed -n 's|.*leader election: lease [^ ]* as \([^ ]*\) .*|\1|p' "$old_log" | head -1)
[ -n "$identity" ] || fail "the old-RBAC controller did not log its leader election identity"
holder=$(k -n "$DEPLOY_NS" get lease "$LEASE_NAME" -o jsonpath='{.spec.holderIdentity}' 2>/dev/null) || true
[ "$holder" != "$identity" ] || fail "the controller that cannot sync its caches holds the Lease"
grep -q "became the leader" "$old_log" && fail "the controller that cannot sync its caches became the leader"
log "old ClusterRole: Lease not taken (holder '${holder}', ours $identity)"
stop_controller "$old_pid"
log "old ClusterRole: error line repeated with backoff (${waits[*]} ms), not ready, not acting"

# 1. Two namespaces, the same pods in each; only OPT is annotated.
k create namespace "$OPT" >/dev/null || fail "cannot create namespace $OPT"
k annotate namespace "$OPT" "$ANNOTATION=true" >/dev/null || fail "cannot annotate $OPT"
for ns in "$NS" "$OPT"; do
  in_ns "$ns" make_pod none "$N"
  in_ns "$ns" make_pod t20 "$N" "$(toleration tec.test/optout gone 20)"
done

start_controller main
wait_acting "$CONTROLLER_LOG"
grep -q "namespace=\"$OPT\" opts out of taint eviction" "$CONTROLLER_LOG" \
  || fail "the controller did not log that $OPT opts out"
grep -q "namespace=\"$NS\" opts out" "$CONTROLLER_LOG" && fail "$NS is reported as opting out"
log "controller acting; metrics at $METRICS_URL"

ts=$(now_ms)
taint "$N" tec.test/optout=gone:NoExecute
te=$(now_ms)
wait_terminating none 15
log "$NS/none evicted $(($(now_ms) - ts)) ms after the taint"
wait_terminating t20 60
d20=$(($(deleted_ms "$NS" t20) - ts))
log "$NS/t20 deleted ${d20} ms after the taint was sent (taint took $((te - ts)) ms)"
[ "$d20" -ge 19999 ] || fail "$NS/t20 (tolerationSeconds 20) deleted ${d20} ms after the taint, before 20 s"
[ "$d20" -le $((te - ts + 35000)) ] || fail "$NS/t20 deleted only ${d20} ms after the taint"

remaining=$(( (ts + 40000 - $(now_ms)) / 1000 ))
[ "$remaining" -ge 1 ] || remaining=1
in_ns "$OPT" assert_not_terminating_for "$remaining" none t20
for p in none t20; do
  grep -q "deleting pod pod=\"$OPT/$p\"" "$CONTROLLER_LOG" && fail "a DELETE was sent for $OPT/$p"
  grep -q "scheduled eviction pod=\"$OPT/$p\"" "$CONTROLLER_LOG" && fail "an eviction was scheduled for $OPT/$p"
  grep -q "not evicting pod=\"$OPT/$p\" reason=namespace_annotation" "$CONTROLLER_LOG" \
    || fail "the controller did not say why $OPT/$p stays (reason=namespace_annotation)"
done
log "$OPT/none and $OPT/t20 still running $(( ($(now_ms) - ts) / 1000 )) s after the taint (reason=namespace_annotation)"

skipped_metric='taint_eviction_controller_pods_skipped_total{reason="namespace_annotation"}'
wait_metric "$skipped_metric" 'v >= 2' 10
log "$skipped_metric = $METRIC_VALUE"

# 2. The annotation goes: OPT's pods are decided again and evicted.
tr0=$(now_ms)
k annotate namespace "$OPT" "$ANNOTATION-" >/dev/null || fail "cannot remove the annotation of $OPT"
in_ns "$OPT" wait_terminating none 20
log "annotation removed: $OPT/none evicted $(($(now_ms) - tr0)) ms later"
grep -q "namespace=\"$OPT\" no longer opts out" "$CONTROLLER_LOG" \
  || fail "the controller did not log that $OPT no longer opts out"
in_ns "$OPT" wait_terminating t20 60
dr=$(($(deleted_ms "$OPT" t20) - tr0))
log "$OPT/t20 deleted ${dr} ms after the annotation was removed"
# Its countdown starts when the controller learns of the change (not when the taint came).
[ "$dr" -ge 19000 ] || fail "$OPT/t20 deleted ${dr} ms after the annotation went, expected ~20 s"

# 3. A pending eviction, then the annotation: cancelled, and the pod outlives its due time.
make_pod t60 "$N" "$(toleration tec.test/optout gone 60)"
tc=$(now_ms)
deadline=$((SECONDS + 30))
until grep -q "scheduled eviction pod=\"$NS/t60\"" "$CONTROLLER_LOG"; do
  [ "$SECONDS" -lt "$deadline" ] || fail "no eviction scheduled for $NS/t60"
  sleep 0.2
done
k annotate namespace "$NS" "$ANNOTATION=true" >/dev/null || fail "cannot annotate $NS"
wait_event t60 "Cancelling deletion of Pod $NS/t60" 30
log "$NS annotated $(($(now_ms) - tc)) ms after $NS/t60 was created: 'Cancelling deletion' event"
grep -q "^Cancelling deletion of Pod $NS/t60|$(pod_uid t60)|Normal$" <<<"$(events t60)" \
  || fail "the cancel event lacks the pod's uid: $(events t60 | tr '\n' ' ')"
# Due 60 s after the pod was created (tc); watch it until 15 s past that.
remaining=$(( (tc + 75000 - $(now_ms)) / 1000 ))
[ "$remaining" -ge 1 ] || remaining=1
assert_not_terminating_for "$remaining" t60
grep -q "deleting pod pod=\"$NS/t60\"" "$CONTROLLER_LOG" && fail "a DELETE was sent for $NS/t60"
log "$NS/t60 still running $(( ($(now_ms) - tc) / 1000 )) s after it was created (due at 60 s)"

stop_controller "$CONTROLLER_PID"
echo "PASS: $TEST_NAME"
