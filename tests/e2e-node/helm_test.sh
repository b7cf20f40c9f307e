#!/usr/bin/env bash
# The Helm chart on the real node, in place of the kustomize install the fixture made:
#   - deploy/'s objects (as cluster.sh applied them) are deleted, the namespace kept, and
#     `helm install` of charts/taint-eviction-controller runs the same image with the node's
#     settings (the node-overlay's: image pulled never, the test taint tolerated, the
#     anti-affinity preferred; the PDB and FlowSchemas in the versions 1.20 serves);
#   - the controller runs and evicts as the kustomize install does: deployment_test.sh and
#     eviction_test.sh, unchanged, pass against it;
#   - `helm upgrade` changing the policy reaches the running replicas without a restart: each
#     logs the reloaded policy, a PolicyApplied Event "applied (was ...)" is on the ConfigMap,
#     the pods are the same, and the webhook certificates and caBundle the controller wrote are
#     kept; a policy the controller would reject is refused (the chart's pre-upgrade Job runs
#     the image's --check-policy) before anything changes;
#   - `helm uninstall` leaves none of the release's objects behind;
#   - the kustomize install is put back at the end, for the tests after this one.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
command -v helm >/dev/null 2>&1 || fail "helm not found on PATH (scripts/install-deps.sh installs it)"
readonly RELEASE=tec CHART="$REPO_ROOT/charts/taint-eviction-controller" CM=taint-eviction-controller-policy
readonly KUSTOMIZATION="$TEC_CLUSTER_DIR/node/deploy"
[ -f "$KUSTOMIZATION/kustomization.yaml" ] || fail "no $KUSTOMIZATION/kustomization.yaml (cluster.sh up --node writes it)"
h() { timeout 300 helm --kubeconfig "$KUBECONFIG" "$@"; }

restore_kustomize() {
  h uninstall "$RELEASE" -n "$CONTROLLER_NS" --wait --timeout 120s >/dev/null 2>&1
  k apply -k "$KUSTOMIZATION" >/dev/null 2>&1
  timeout 180 kubectl -n "$CONTROLLER_NS" rollout status deployment/taint-eviction-controller \
    --timeout=170s >/dev/null 2>&1 || echo "$TEST_NAME: the kustomize install did not come back" >&2
}
on_cleanup() { restore_kustomize; }

wait_until 60 "the controller Deployment (kustomize) available with 2 replicas" controller_available 2

# deploy/ (with the node overlay) off, all but the Namespace: Helm adopts no object it did not
# create, and the release is stored in this namespace.
kubectl kustomize "$KUSTOMIZATION" >"$WORK/kustomize.yaml" || fail "kubectl kustomize $KUSTOMIZATION failed"
python3 - "$WORK/kustomize.yaml" >"$WORK/kustomize-objects.yaml" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] != "Namespace"]
print(yaml.safe_dump_all(docs))
PY
k delete -f "$WORK/kustomize-objects.yaml" --ignore-not-found --wait=true >/dev/null \
  || fail "cannot delete the kustomize install"
no_controller_pods() { [ -z "$(k -n "$CONTROLLER_NS" get pods -l "$CONTROLLER_SELECTOR" -o name)" ]; }
wait_until 120 "the kustomize install's pods gone" no_controller_pods
log "kustomize install deleted (namespace kept)"

image=$TEC_CLUSTER_CONTROLLER_IMAGE
cat >"$WORK/values.yaml" <<EOT
image:
  repository: ${image%:*}
  tag: "${image##*:}"
  pullPolicy: Never
requireReplicasOnDifferentNodes: false
tolerations:
  - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 300}
  - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 300}
  - {key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}
  - {key: $TAINT_KEY, operator: Exists, effect: NoExecute}
EOT
t0=$(now_ms)
h install "$RELEASE" "$CHART" -n "$CONTROLLER_NS" -f "$WORK/values.yaml" --wait --timeout 240s \
  >"$WORK/install.out" 2>&1 || fail "helm install failed: $(cat "$WORK/install.out")"
log "helm install: deployed in $(($(now_ms) - t0)) ms"
h get manifest "$RELEASE" -n "$CONTROLLER_NS" >"$WORK/manifest.yaml" || fail "helm get manifest failed"
grep -q '^apiVersion: policy/v1beta1$' "$WORK/manifest.yaml" || fail "the release's PDB is not policy/v1beta1 (1.20)"
k -n "$CONTROLLER_NS" get pdb taint-eviction-controller -o name >/dev/null || fail "no PDB"
[ "$(k get flowschemas -o name | grep -c taint-eviction-controller)" = 2 ] || fail "the FlowSchemas are not there"

# The Lease of the deleted replicas expires (15 s) before one of the release's takes it.
wait_until 90 "the Lease held by a replica of the release" current_leader

# The same checks as for the kustomize install.
for t in deployment_test eviction_test; do
  log "running $t.sh against the Helm release"
  TEST_NAME="$TEST_NAME/$t" bash "$E2E_DIR/$t.sh" || fail "$t.sh failed against the Helm release"
done

# An upgrade with a policy the controller would reject: refused by the controller's own
# --check-policy in the chart's pre-upgrade Job, before anything changes. Helm records the
# attempt as a failed revision; the deployed one and the ConfigMap stay as they were.
deployed_revision() {
  h history "$RELEASE" -n "$CONTROLLER_NS" -o json |
    python3 -c 'import json,sys; print([r["revision"] for r in json.load(sys.stdin) if r["status"] == "deployed"])'
}
policy_text() { k -n "$CONTROLLER_NS" get configmap "$CM" -o jsonpath='{.data.policy\.yaml}'; }
before=$(deployed_revision) policy_before=$(policy_text)
if h upgrade "$RELEASE" "$CHART" -n "$CONTROLLER_NS" --reuse-values --timeout 240s \
    --set policy.rateLimit.evictionsPerSecnd=5 >"$WORK/bad.out" 2>&1; then
  fail "helm upgrade accepted a misspelt policy field"
fi
grep -q "pre-upgrade" "$WORK/bad.out" || fail "helm's refusal is not the pre-upgrade check's: $(cat "$WORK/bad.out")"
k -n "$CONTROLLER_NS" logs job/taint-eviction-controller-policy-check >"$WORK/check.log" 2>&1 || true
grep -q "evictionsPerSecnd" "$WORK/check.log" || fail "the policy check's log does not name the field: $(cat "$WORK/check.log")"
[ "$(deployed_revision)" = "$before" ] || fail "a refused upgrade changed the deployed revision ($before -> $(deployed_revision))"
[ "$(policy_text)" = "$policy_before" ] || fail "a refused upgrade changed the policy ConfigMap"
log "helm upgrade with policy.rateLimit.evictionsPerSecnd refused: $(head -c 400 "$WORK/bad.out" | tr "\n\t" "  "); the check's log: $(head -c 300 "$WORK/check.log")"

# An upgrade that changes the policy: the ConfigMap changes, the replicas reload it. What the
# controller wrote (the webhook Secret's certificates, the caBundle) stays as it was.
pods_before=$(controller_pods | sort | tr '\n' ' ')
certs() {
  k -n "$CONTROLLER_NS" get secret taint-eviction-controller-webhook-tls -o jsonpath='{.data.ca\.crt}{.data.tls\.crt}' | sha256sum
  k get validatingwebhookconfiguration taint-eviction-controller -o jsonpath='{.webhooks[0].clientConfig.caBundle}' | sha256sum
}
has_certs() { [ -n "$(k -n "$CONTROLLER_NS" get secret taint-eviction-controller-webhook-tls -o jsonpath='{.data.tls\.crt}')" ] &&
  [ -n "$(k get validatingwebhookconfiguration taint-eviction-controller -o jsonpath='{.webhooks[0].clientConfig.caBundle}')" ]; }
wait_until 60 "the webhook certificate in its Secret and the caBundle" has_certs
certs_before=$(certs)
applied_count() { k -n "$CONTROLLER_NS" describe configmap "$CM" | sed -n '/^Events:/,$p' | grep -c "PolicyApplied .* applied (was" || true; }
t0=$(now_ms)
h upgrade "$RELEASE" "$CHART" -n "$CONTROLLER_NS" --reuse-values --wait --timeout 120s \
  --set policy.rateLimit.evictionsPerSecond=7 --set policy.rateLimit.burst=9 >"$WORK/upgrade.out" 2>&1 \
  || fail "helm upgrade failed: $(cat "$WORK/upgrade.out")"
k -n "$CONTROLLER_NS" get configmap "$CM" -o jsonpath='{.data.policy\.yaml}' | matches 'evictionsPerSecond: 7' \
  || fail "the ConfigMap does not hold the upgraded policy"
reloaded_by_all() {
  local p
  for p in $(controller_pods); do
    timeout 30 kubectl -n "$CONTROLLER_NS" logs "$p" | matches 'eviction policy reloaded from .*rate limit 7/s burst 9' || return 1
  done
}
# The kubelet's ConfigMap sync (up to about a minute) and the reload interval (5 s).
wait_until 240 "both replicas running the upgraded policy (rate limit 7/s burst 9 in their logs)" reloaded_by_all
wait_until 60 "a PolicyApplied 'applied (was ...)' Event on $CM" bash -c "[ \"\$(kubectl -n '$CONTROLLER_NS' describe configmap '$CM' | sed -n '/^Events:/,\$p' | grep -c 'PolicyApplied .* applied (was')\" -ge 1 ]"
[ "$(certs)" = "$certs_before" ] || fail "helm upgrade changed the webhook Secret's certificates or the caBundle the controller wrote"
[ "$(controller_pods | sort | tr '\n' ' ')" = "$pods_before" ] \
  || fail "the replicas changed across the policy upgrade ($pods_before -> $(controller_pods | tr '\n' ' ')): expected a reload, not a restart"
log "helm upgrade: policy reloaded by both replicas without a restart, $(($(now_ms) - t0)) ms; PolicyApplied Events: $(applied_count); the webhook certificates and caBundle kept"

# Uninstall: none of the release's objects is left.
h uninstall "$RELEASE" -n "$CONTROLLER_NS" --wait --timeout 180s >/dev/null || fail "helm uninstall failed"
wait_until 120 "the controller pods gone after helm uninstall" no_controller_pods
python3 - "$WORK/manifest.yaml" >"$WORK/objects.txt" <<'PY'
import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d:
        print(d["kind"], d["metadata"]["name"], d["metadata"].get("namespace", ""))
PY
left=""
while read -r kind name ns; do
  if k get "$kind" "$name" ${ns:+-n "$ns"} -o name >/dev/null 2>&1; then left+=" $kind/$name"; fi
done <"$WORK/objects.txt"
[ -z "$left" ] || fail "left after helm uninstall:$left"
helm_labelled=$(k get all,configmaps,secrets,serviceaccounts,roles,rolebindings,networkpolicies,poddisruptionbudgets \
  -n "$CONTROLLER_NS" -l app.kubernetes.io/managed-by=Helm -o name)
[ -z "$helm_labelled" ] || fail "objects labelled managed-by=Helm left: $helm_labelled"
[ -z "$(k get secrets -n "$CONTROLLER_NS" -l owner=helm -o name)" ] || fail "Helm's release Secrets left"
log "helm uninstall: none of the $(wc -l <"$WORK/objects.txt") objects of the release is left"

echo "PASS: $TEST_NAME"
