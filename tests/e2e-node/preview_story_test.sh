#!/usr/bin/env bash
# "See before" on the real node (issue 32), one story told by every tool, with the controller
# running in the cluster as the Deployment from deploy/ (its webhook, its Lease, its history):
#   1. a policy in the ConfigMap: pods labelled tec.test/never-evict=true are excluded, the taint
#      key tec.test/ignored is ignored;
#   2. five pods on the node: no toleration, tolerationSeconds 40, tolerated forever, excluded by
#      the policy, opted out by the annotation;
#   3. `kubectl taint-eviction preview` for the ignored taint says "never" for all of them, and
#      applying that taint evicts nothing over 20 s;
#   4. `preview` for tec.test/evict says now / in 40s / never / never / never, with why;
#   5. `kubectl taint` prints the webhook's warning;
#   6. `pending` (through the Lease and a port-forward to the acting replica) lists the 40 s pod;
#   7. the controller then evicts exactly the pods preview named, at the times it named (within
#      a tolerance), and the others stay for 60 s past the taint;
#   8. `explain` tells the same story from the history: deleted now, deleted at 40 s, tolerates
#      forever.
# Everything the plugin and kubectl printed is in the log, for README.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CM=taint-eviction-controller-policy
PLUGIN_BIN=${TEC_PLUGIN_BIN:-$REPO_ROOT/build/bin/kubectl-taint_eviction}
[ -x "$PLUGIN_BIN" ] || fail "no plugin binary at $PLUGIN_BIN (set TEC_PLUGIN_BIN)"
mkdir -p "$WORK/bin"
ln -s "$(readlink -f "$PLUGIN_BIN")" "$WORK/bin/kubectl-taint_eviction"
export PATH="$WORK/bin:$PATH"
IGNORED_KEY=tec.test/ignored

wait_until 60 "the controller Deployment available with 2 replicas" controller_available 2
k -n "$CONTROLLER_NS" get configmap "$CM" -o json >"$WORK/shipped.json" || fail "no ConfigMap $CM"
restore_policy() {
  k taint nodes "$NODE" "$IGNORED_KEY-" >/dev/null 2>&1
  k -n "$CONTROLLER_NS" get configmap "$CM" -o json \
    | python3 -c 'import json,sys; c=json.load(sys.stdin); s=json.load(open(sys.argv[1])); c["data"]=s["data"]; print(json.dumps(c))' \
      "$WORK/shipped.json" | k replace -f - >/dev/null 2>&1 || true
}
# The next test on this node must find the shipped policy in force, not this test's: after
# putting it back, wait (bounded, as the kubelet syncs the mounted file within about a minute)
# until each replica's last policy line no longer has this test's taint rule.
last_policy_lines_without_ours() {
  local p n=0
  for p in $(controller_pods); do
    k -n "$CONTROLLER_NS" logs "$p" | grep -E "eviction policy (reloaded|from) " | tail -n 1 \
      | matches -v "taint rules tec.test/ignored Ignore" && n=$((n + 1))
  done
  [ "$n" -ge 2 ]
}
on_cleanup() {
  restore_policy
  local deadline=$((SECONDS + 180))
  until last_policy_lines_without_ours; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "$TEST_NAME: the replicas did not reload the shipped policy within 180 s" >&2
      return
    fi
    sleep 2
  done
}

kc() { timeout "$CMD_TIMEOUT" kubectl "$@"; }  # no global flags: kubectl refuses them before a plugin
show() {  # show kc ARGS...: run kubectl, print the command and its output indented (README pastes
          # them), keep the output in $OUT
  local rc=0
  OUT=$("$@" 2>&1) || rc=$?
  echo "\$ kubectl ${*:2}"
  sed 's/^/    /' <<<"$OUT"
  return "$rc"
}

# 1. The policy, and both replicas applying it (the kubelet syncs the mounted file within about
#    a minute; the controller re-reads it within 5 s).
python3 - "$WORK/shipped.json" >"$WORK/policy.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["data"]["policy.yaml"] = """apiVersion: taint-eviction-controller/v1alpha1
kind: EvictionPolicy
exclude:
  podSelector:
    matchLabels:
      tec.test/never-evict: "true"
taints:
  - key: tec.test/ignored
    action: Ignore
"""
for k in ("resourceVersion", "uid", "creationTimestamp", "managedFields"):
    c["metadata"].pop(k, None)
print(json.dumps(c))
PY
k -n "$CONTROLLER_NS" replace -f "$WORK/policy.json" >/dev/null || fail "cannot write the policy into $CM"
# Each replica logs the policy it loads and reloads; earlier tests' PolicyApplied Events on the
# ConfigMap do not say which policy is in force now, its last such line does (only this test
# ignores the key).
applied_by_both() {
  local p n=0
  for p in $(controller_pods); do
    k -n "$CONTROLLER_NS" logs "$p" | grep -E "eviction policy (reloaded|from) " | tail -n 1 \
      | matches "taint rules tec.test/ignored Ignore" && n=$((n + 1))
  done
  [ "$n" -ge 2 ]
}
wait_until 240 "both replicas logging the new policy (taint rules tec.test/ignored Ignore)" applied_by_both
log "both replicas applied the policy"

# 2. The pods.
make_namespace
pod() {  # pod NAME EXTRA_METADATA_YAML TOLERATIONS_YAML
  k apply -f - >/dev/null <<EOT || fail "cannot create pod $1"
apiVersion: v1
kind: Pod
metadata:
  name: $1
  namespace: $NS
$2
spec:
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  nodeName: $NODE
  tolerations: $3
  containers:
  - name: sleep
    image: $TEC_CLUSTER_WORKLOAD_IMAGE
    imagePullPolicy: Never
    securityContext: {runAsUser: 65534, allowPrivilegeEscalation: false}
EOT
}
pod no-toleration "" "[]"
pod tolerates-40s "" "[{key: $TAINT_KEY, operator: Exists, effect: NoExecute, tolerationSeconds: 40}]"
pod tolerates-forever "" "[{key: $TAINT_KEY, operator: Exists, effect: NoExecute}]"
pod excluded "  labels: {tec.test/never-evict: \"true\"}" "[]"
pod opted-out "  annotations: {taint-eviction-controller/exclude: \"true\"}" "[]"
all_running() { [ "$(k -n "$NS" get pods -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | grep -c '^Running$')" -eq 5 ]; }
wait_until 120 "the five pods Running" all_running
log "five pods Running on $NODE"

# 3. The ignored taint: preview says never for every pod, and the taint evicts nothing.
show kc taint-eviction preview "$NODE" --taint "$IGNORED_KEY=x:NoExecute" \
  || fail "preview of the ignored taint failed"
[ "$(grep -c ' never ' <<<"$OUT")" -ge 5 ] || fail "preview of the ignored taint: not 'never' for all five pods"
grep -q "ignores" <<<"$OUT" || fail "preview of the ignored taint does not say a rule ignores it"
k taint nodes "$NODE" "$IGNORED_KEY=x:NoExecute" >/dev/null || fail "cannot taint with $IGNORED_KEY"
sleep 20  # "not evicted" over a meaningful interval
[ "$(k -n "$NS" get pods -o name | wc -l)" -eq 5 ] || fail "the ignored taint evicted a pod"
[ -z "$(k -n "$NS" get pods -o jsonpath='{.items[*].metadata.deletionTimestamp}')" ] \
  || fail "the ignored taint started deleting a pod"
k taint nodes "$NODE" "$IGNORED_KEY-" >/dev/null || fail "cannot remove $IGNORED_KEY"
log "the ignored taint evicted nothing in 20 s"

# 4. The real taint's preview.
TAINT="$TAINT_KEY=x:NoExecute"
show kc taint-eviction preview "$NODE" --taint "$TAINT" || fail "preview failed"
PREVIEW=$OUT
expect_row() {  # expect_row POD REGEX
  grep -E "(^| )$1 " <<<"$PREVIEW" | grep -Eq "$2" || fail "preview row of $1 is not /$2/: $(grep -E "(^| )$1 " <<<"$PREVIEW")"
}
expect_row no-toleration ' now '
expect_row tolerates-40s ' in 40s '
expect_row tolerates-forever ' never '
expect_row excluded ' never '
expect_row opted-out ' never '

# 5. The taint, with the webhook's warning. The webhook is on the controller's pods behind the
#    Service (kube-proxy); the API server may call it a moment after the replicas are ready.
t_taint=$(now_ms)
show kc taint nodes "$NODE" "$TAINT" || fail "kubectl taint failed"
TAINT_OUT=$OUT
grep -q "^Warning: tainting $NODE with $TAINT evicts [0-9]* pods\? now" <<<"$TAINT_OUT" \
  || fail "kubectl taint printed no warning from the webhook: $TAINT_OUT"

# 6. pending, from the acting replica through the Lease and a port-forward.
pending_lists() {
  OUT=$(kc taint-eviction pending -n "$NS" 2>&1) && grep -Eq "(^| )tolerates-40s " <<<"$OUT"
}
wait_until 30 "pending listing tolerates-40s" pending_lists
show kc taint-eviction pending -n "$NS" || fail "pending failed"
grep -q "could not reach the acting replica" <<<"$OUT" && fail "pending fell back to Events: $OUT"
grep -Eq '(^| )tolerates-40s +'"$NODE"' ' <<<"$OUT" || fail "pending does not show tolerates-40s on $NODE: $OUT"
src=$(kc taint-eviction pending -n "$NS" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["source"])') \
  || fail "pending -o json failed"
[[ "$src" == "pod $CONTROLLER_NS/"* ]] || fail "pending read '$src', expected a controller replica (Lease and port-forward)"
log "pending read the acting replica through the Lease: $src"

# 7. The outcomes, and their times against the preview's.
gone_or_terminating() {
  local ts
  ts=$(k -n "$NS" get pod "$1" -o jsonpath='{.metadata.deletionTimestamp}' 2>/dev/null) || return 0
  [ -n "$ts" ]
}
wait_until 60 "no-toleration deleted" gone_or_terminating no-toleration
t_now=$(($(now_ms) - t_taint))
wait_until 120 "tolerates-40s deleted" gone_or_terminating tolerates-40s
t_40=$(($(now_ms) - t_taint))
log "no-toleration deleted after $t_now ms (preview: now), tolerates-40s after $t_40 ms (preview: in 40s)"
[ "$t_now" -lt 15000 ] || fail "no-toleration took $t_now ms, preview said now"
[ "$t_40" -ge 38000 ] && [ "$t_40" -lt 60000 ] || fail "tolerates-40s went after $t_40 ms, preview said 40 s"
while [ $(($(now_ms) - t_taint)) -lt 60000 ]; do sleep 1; done  # "not evicted" for 60 s past the taint
for p in tolerates-forever excluded opted-out; do
  ts=$(k -n "$NS" get pod "$p" -o jsonpath='{.metadata.deletionTimestamp}') || fail "pod $p is gone, preview said never"
  [ -z "$ts" ] || fail "pod $p is being deleted, preview said never"
done
log "tolerates-forever, excluded and opted-out still there 60 s after the taint"

# 8. explain: the same story from the history, the pending list and a fresh decision.
show kc taint-eviction explain no-toleration -n "$NS" || fail "explain no-toleration failed"
grep -q "deleted" <<<"$OUT" || fail "explain no-toleration does not show the deletion from the history: $OUT"
show kc taint-eviction explain tolerates-40s -n "$NS" || fail "explain tolerates-40s failed"
grep -q "deleted" <<<"$OUT" || fail "explain tolerates-40s does not show the deletion from the history: $OUT"
show kc taint-eviction explain tolerates-forever -n "$NS" || fail "explain tolerates-forever failed"
grep -qi "never\|forever" <<<"$OUT" || fail "explain tolerates-forever does not say never: $OUT"
show kc get events -n "$NS" --field-selector reason=TaintManagerEviction
echo "PASS: $TEST_NAME"
