#!/usr/bin/env bash
# Integration test for the in-cluster manifests in deploy/ against a local control plane
# (deploy/local/cluster.sh up, kube-apiserver v1.20.2):
#   1. everything `kubectl apply -k deploy/` installs except the PodDisruptionBudget passes a
#      server-side dry run (renamed into a throw-away namespace by a generated overlay), and
#      so does a Pod built from the Deployment's pod template (priority class, pod validation);
#   2. the pod template meets the "restricted" Pod Security Standard (checked here: 1.20 has no
#      Pod Security admission);
#   2b. the NetworkPolicy selects the controller's pods and admits only the metrics port, only
#      from namespaces carrying the monitoring label (the probes come from the node, which a
#      NetworkPolicy always admits);
#   2c. placement: the replicas may never share a node (required pod anti-affinity by
#      hostname) and are spread over zones (topologySpreadConstraints on
#      topology.kubernetes.io/zone, ScheduleAnyway), so one node or zone failing cannot take
#      both (issue 29); deploy/local/node-overlay (the single-node test cluster) relaxes the
#      anti-affinity to preferred and changes nothing else of the placement;
#   3. the PodDisruptionBudget: `kubectl apply --dry-run=client` when the server serves
#      policy/v1 (1.21+). A 1.20 server does not, and kubectl cannot map the kind without it,
#      so there the PDB is checked against the policy/v1 object kubectl itself generates and
#      its spec is server-validated as policy/v1beta1 (same fields);
#   4. the RBAC is least-privilege: the ServiceAccount, roles and bindings are created for
#      real and `kubectl auth can-i --as=<the ServiceAccount>` must allow exactly what the
#      controller does and deny the rest.
# Everything it creates is deleted on exit.
#
# Usage: KUBECONFIG=<path> tests/integration/manifests_test.sh
# Exit 0 and a PASS line on success; non-zero and FAIL lines otherwise.
set -euo pipefail

readonly TEST_NAME=manifests_test
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
readonly LEASE_NAME=taint-eviction-controller

command -v realpath >/dev/null 2>&1 || fail "realpath (coreutils) not found on PATH"

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
DEPLOY_DIR=$(cd "$SCRIPT_DIR/../../deploy" && pwd -P)
readonly SCRIPT_DIR DEPLOY_DIR

suffix="$(date +%s)-$$-$RANDOM"
NS="tec-it-manifests-$suffix"
NAME_SUFFIX="-it-$suffix"
SA="taint-eviction-controller$NAME_SUFFIX"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tec-manifests-test.XXXXXX")
RBAC_APPLIED=0

cleanup() {
  local rc=$?
  set +e
  if [ "$RBAC_APPLIED" -eq 1 ]; then
    k delete -k "$WORK/rbac" --ignore-not-found --wait=false >/dev/null 2>&1
  fi
  # No namespace controller in the local cluster: finalize the (now empty) namespace by hand.
  if k get namespace "$NS" >/dev/null 2>&1; then
    k delete namespace "$NS" --wait=false --ignore-not-found >/dev/null 2>&1
    printf '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"%s"},"spec":{"finalizers":[]}}' "$NS" \
      | k replace --raw "/api/v1/namespaces/$NS/finalize" -f - >/dev/null 2>&1
  fi
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT

echo "$TEST_NAME: namespace $NS, name suffix $NAME_SUFFIX"

k get --raw /readyz >/dev/null 2>&1 || fail "the API server behind $KUBECONFIG is not ready (/readyz)"

# write_overlay DIR [KIND...]: a kustomization in DIR that takes deploy/ into $NS, appends
# $NAME_SUFFIX to every name (cluster-scoped ones cannot clash with a real install), serves the
# FlowSchemas as this 1.20 server does (deploy/components/flowcontrol-v1beta1) and drops the
# objects of the given kinds.
write_overlay() {
  local dir=$1 kind
  shift
  mkdir -p "$dir"
  {
    echo "apiVersion: kustomize.config.k8s.io/v1beta1"
    echo "kind: Kustomization"
    echo "namespace: $NS"
    echo "nameSuffix: $NAME_SUFFIX"
    echo "resources:"
    echo "  - $(realpath --relative-to="$dir" "$DEPLOY_DIR")"
    echo "components:"
    echo "  - $(realpath --relative-to="$dir" "$DEPLOY_DIR/components/flowcontrol-v1beta1")"
    [ $# -gt 0 ] && echo "patches:"
    for kind in "$@"; do
      cat <<EOF
  - target:
      kind: $kind
    patch: |-
      \$patch: delete
      kind: $kind
      metadata:
        name: unused
EOF
    done
  } >"$dir/kustomization.yaml"
}

# --- 0. the shipped kustomization renders and holds what it should -------------------------

k kustomize "$DEPLOY_DIR" >"$WORK/rendered.yaml" || fail "kubectl kustomize $DEPLOY_DIR failed"
for kind in Namespace ServiceAccount ClusterRole ClusterRoleBinding Role RoleBinding ConfigMap \
  Deployment Service NetworkPolicy PodDisruptionBudget FlowSchema; do
  grep -q "^kind: $kind\$" "$WORK/rendered.yaml" || fail "deploy/ renders no $kind"
done
if grep -E '^  namespace: ' "$WORK/rendered.yaml" | grep -v '^  namespace: taint-eviction-controller$' >/dev/null; then
  fail "deploy/ renders an object outside namespace taint-eviction-controller"
fi
# The FlowSchemas (flowcontrol v1, Kubernetes 1.29+) name the ServiceAccount deploy/ ships.
fs_subjects=$(awk 'BEGIN { RS = "---\n" } /(^|\n)kind: FlowSchema\n/ { printf "%s---\n", $0 }' \
  "$WORK/rendered.yaml" | grep -c '^        name: taint-eviction-controller$' || true)
[ "$fs_subjects" -eq 2 ] || fail "expected 2 FlowSchemas for ServiceAccount taint-eviction-controller, got $fs_subjects"
[ "$(grep -c '^apiVersion: flowcontrol.apiserver.k8s.io/v1$' "$WORK/rendered.yaml")" -eq 2 ] \
  || fail "deploy/ should render its 2 FlowSchemas as flowcontrol.apiserver.k8s.io/v1"
for v in v1beta1 v1beta3; do
  mkdir -p "$WORK/fs-$v"
  printf 'resources: [%s]\ncomponents: [%s]\n' "$(realpath --relative-to="$WORK/fs-$v" "$DEPLOY_DIR")" \
    "$(realpath --relative-to="$WORK/fs-$v" "$DEPLOY_DIR/components/flowcontrol-$v")" \
    >"$WORK/fs-$v/kustomization.yaml"
  [ "$(k kustomize "$WORK/fs-$v" | grep -c "^apiVersion: flowcontrol.apiserver.k8s.io/$v\$")" -eq 2 ] \
    || fail "deploy/components/flowcontrol-$v does not turn both FlowSchemas into $v"
done
# deploy/components/fresh-node-check: the flag and the `get` on nodes it needs, together.
mkdir -p "$WORK/fnc"
printf 'resources: [%s]\ncomponents: [%s]\n' "$(realpath --relative-to="$WORK/fnc" "$DEPLOY_DIR")" \
  "$(realpath --relative-to="$WORK/fnc" "$DEPLOY_DIR/components/fresh-node-check")" \
  >"$WORK/fnc/kustomization.yaml"
k kustomize "$WORK/fnc" >"$WORK/fnc.yaml" || fail "deploy/components/fresh-node-check does not render"
grep -q -- '^        - --fresh-node-check$' "$WORK/fnc.yaml" \
  || fail "deploy/components/fresh-node-check does not add --fresh-node-check"
awk 'BEGIN { RS = "---\n" } /(^|\n)kind: ClusterRole\n/ && /\n  name: taint-eviction-controller\n/' \
  "$WORK/fnc.yaml" | tr -d '\n' | grep -- '- nodes  verbs:  - get  - list  - watch' >/dev/null \
  || fail "deploy/components/fresh-node-check does not grant get on nodes"
grep -q -- '--fresh-node-check' "$WORK/rendered.yaml" && fail "deploy/ alone turns on --fresh-node-check"

# --- 1. server-side dry run of everything but the PDB ---------------------------------------

k create namespace "$NS" --save-config >/dev/null || fail "cannot create namespace $NS"
write_overlay "$WORK/all-but-pdb" PodDisruptionBudget
k kustomize "$WORK/all-but-pdb" >"$WORK/all-but-pdb.yaml" || fail "the test overlay does not render"
grep -q '^kind: PodDisruptionBudget$' "$WORK/all-but-pdb.yaml" && fail "the test overlay still has the PDB"
out=$(k apply --dry-run=server -f "$WORK/all-but-pdb.yaml" 2>&1) \
  || fail "server-side dry run of deploy/ (without the PDB) was rejected:
$out"
echo "  ${out//$'\n'/$'\n'  }"
n_objects=$(grep -c '(server dry run)' <<<"$out" || true)
# Namespace, ServiceAccount, ClusterRole, ClusterRoleBinding, Role, RoleBinding, the policy
# ConfigMap, Deployment, Service, NetworkPolicy, two FlowSchemas (v1beta1 here), and for the
# secure metrics port (issue 31) the system:auth-delegator ClusterRoleBinding and the
# metrics-reader ClusterRole, and (issue 32) the ValidatingWebhookConfiguration and, for its
# certificates, the empty Secret and the caBundle's ClusterRole and ClusterRoleBinding.
[ "$n_objects" -eq 18 ] || fail "expected 18 objects in the server dry run, got $n_objects"

# The Deployment alone, for field checks (kubectl applies -o jsonpath to each object).
awk 'BEGIN { RS = "---\n" } /(^|\n)kind: Deployment\n/ { printf "%s", $0 }' "$WORK/all-but-pdb.yaml" \
  >"$WORK/deployment.yaml"
# deploy_json JSONPATH: a field of that Deployment.
deploy_json() {
  k create --dry-run=client -f "$WORK/deployment.yaml" -o jsonpath="$1"
}
[ "$(deploy_json '{.kind}')" = Deployment ] || fail "cannot find the Deployment in the render"

# --- 2. restricted Pod Security -------------------------------------------------------------

# expect_field JSONPATH WANT: a field of the Deployment in the shipped render.
expect_field() {
  local got
  got=$(deploy_json "$1") || fail "cannot read $1 from the Deployment"
  [ "$got" = "$2" ] || fail "Deployment $1: expected '$2', got '$got'"
}
c='.spec.template.spec.containers[0]'
expect_field '{.spec.replicas}' 2
expect_field '{.spec.template.spec.securityContext.runAsNonRoot}' true
expect_field '{.spec.template.spec.securityContext.runAsUser}' 65532
expect_field '{.spec.template.spec.securityContext.seccompProfile.type}' RuntimeDefault
expect_field "{$c.securityContext.runAsNonRoot}" true
expect_field "{$c.securityContext.readOnlyRootFilesystem}" true
expect_field "{$c.securityContext.allowPrivilegeEscalation}" false
expect_field "{$c.securityContext.capabilities.drop}" '["ALL"]'
expect_field "{$c.securityContext.capabilities.add}" ''
expect_field '{.spec.template.spec.hostNetwork}' ''
expect_field '{.spec.template.spec.hostPID}' ''
expect_field "{$c.livenessProbe.httpGet.path}" /healthz
expect_field "{$c.readinessProbe.httpGet.path}" /readyz
expect_field "{$c.env[?(@.name==\"POD_NAMESPACE\")].valueFrom.fieldRef.fieldPath}" metadata.namespace
expect_field '{.spec.template.spec.priorityClassName}' system-cluster-critical
# The policy: the ConfigMap of deploy/policy.yaml, mounted read-only, its key passed as --policy.
expect_field '{.spec.template.spec.volumes[?(@.name=="policy")].configMap.name}' \
  "taint-eviction-controller-policy$NAME_SUFFIX"
expect_field "{$c.volumeMounts[?(@.name==\"policy\")].mountPath}" /etc/taint-eviction-controller
expect_field "{$c.volumeMounts[?(@.name==\"policy\")].readOnly}" true
deploy_json "{$c.args}" | grep -F '"--policy=/etc/taint-eviction-controller/policy.yaml"' >/dev/null \
  || fail "the Deployment does not pass --policy=/etc/taint-eviction-controller/policy.yaml: $(deploy_json "{$c.args}")"
grep -q "^  name: taint-eviction-controller-policy$NAME_SUFFIX\$" "$WORK/all-but-pdb.yaml" \
  || fail "the render has no ConfigMap taint-eviction-controller-policy$NAME_SUFFIX"
n_containers=$(deploy_json '{range .spec.template.spec.containers[*]}{.name}{"\n"}{end}' | grep -c .)
[ "$n_containers" -eq 1 ] || fail "expected one container, got $n_containers (each needs the security context)"

# --- 2b. the NetworkPolicy (server-validated as networking.k8s.io/v1 in step 1) -------------

awk 'BEGIN { RS = "---\n" } /(^|\n)kind: NetworkPolicy\n/ { printf "%s", $0 }' "$WORK/all-but-pdb.yaml" \
  >"$WORK/networkpolicy.yaml"
# netpol_json JSONPATH: a field of that NetworkPolicy.
netpol_json() {
  k create --dry-run=client -f "$WORK/networkpolicy.yaml" -o jsonpath="$1"
}
expect_netpol() {
  local got
  got=$(netpol_json "$1") || fail "cannot read $1 from the NetworkPolicy"
  [ "$got" = "$2" ] || fail "NetworkPolicy $1: expected '$2', got '$got'"
}
expect_netpol '{.apiVersion}' networking.k8s.io/v1
expect_netpol '{.spec.podSelector.matchLabels}' "$(deploy_json '{.spec.template.metadata.labels}')"
expect_netpol '{.spec.policyTypes}' '["Ingress"]'
# One rule: the metrics port, from labelled namespaces only. No rule for the probe port.
expect_netpol '{range .spec.ingress[*]}{.ports[*].port}{"\n"}{end}' metrics
expect_netpol '{.spec.ingress[0].ports[0].protocol}' TCP
expect_netpol '{.spec.ingress[0].from[*].namespaceSelector.matchLabels}' \
  '{"taint-eviction-controller.io/metrics":"allowed"}'
expect_netpol '{.spec.ingress[0].from[*].podSelector}' ''
expect_netpol '{.spec.ingress[0].from[*].ipBlock}' ''
# The named ports exist on the container, with the ports the flags bind.
expect_field "{$c.ports[?(@.name==\"metrics\")].containerPort}" 8443
expect_field "{$c.ports[?(@.name==\"health\")].containerPort}" 8081
grep -q -- '--metrics-bind-address=:8443' "$WORK/deployment.yaml" || fail "metrics is not served on 8443"
grep -q -- '--health-probe-bind-address=:8081' "$WORK/deployment.yaml" || fail "probes are not served on 8081"

# --- 2c. placement: no node or zone failure takes both replicas -----------------------------

labels=$(deploy_json '{.spec.template.metadata.labels}')
anti='.spec.template.spec.affinity.podAntiAffinity'
req="$anti.requiredDuringSchedulingIgnoredDuringExecution"
n_required=$(deploy_json "{range $req[*]}{.topologyKey}{\"\\n\"}{end}" | grep -c . || true)
[ "$n_required" -eq 1 ] || fail "expected one required pod anti-affinity term, got $n_required"
expect_field "{$req[0].topologyKey}" kubernetes.io/hostname
expect_field "{$req[0].labelSelector.matchLabels}" "$labels"
expect_field "{$req[0].labelSelector.matchExpressions}" ''
expect_field "{$req[0].namespaces}" ''
expect_field "{$anti.preferredDuringSchedulingIgnoredDuringExecution}" ''
spread='.spec.template.spec.topologySpreadConstraints'
n_spread=$(deploy_json "{range $spread[*]}{.topologyKey}{\"\\n\"}{end}" | grep -c . || true)
[ "$n_spread" -eq 1 ] || fail "expected one topology spread constraint, got $n_spread"
expect_field "{$spread[0].topologyKey}" topology.kubernetes.io/zone
expect_field "{$spread[0].whenUnsatisfiable}" ScheduleAnyway
expect_field "{$spread[0].maxSkew}" 1
expect_field "{$spread[0].labelSelector.matchLabels}" "$labels"
# The selectors pick exactly the controller's replicas: the Deployment's own selector.
[ "$labels" = "$(deploy_json '{.spec.selector.matchLabels}')" ] \
  || fail "the pod template's labels differ from the Deployment's selector"

# The single-node test cluster's component, as deploy/local/node.sh applies it.
mkdir -p "$WORK/node-overlay"
{
  echo "apiVersion: kustomize.config.k8s.io/v1beta1"
  echo "kind: Kustomization"
  echo "resources:"
  echo "  - $(realpath --relative-to="$WORK/node-overlay" "$DEPLOY_DIR")"
  echo "components:"
  echo "  - $(realpath --relative-to="$WORK/node-overlay" "$DEPLOY_DIR/local/node-overlay")"
  echo "  - $(realpath --relative-to="$WORK/node-overlay" "$DEPLOY_DIR/components/flowcontrol-v1beta1")"
} >"$WORK/node-overlay/kustomization.yaml"
k kustomize "$WORK/node-overlay" >"$WORK/node-overlay.yaml" \
  || fail "deploy/ with deploy/local/node-overlay does not render"
awk 'BEGIN { RS = "---\n" } /(^|\n)kind: Deployment\n/ { printf "%s", $0 }' "$WORK/node-overlay.yaml" \
  >"$WORK/node-deployment.yaml"
# expect_node_field JSONPATH WANT: a field of the Deployment deploy/local/node.sh applies.
expect_node_field() {
  local got
  got=$(k create --dry-run=client -f "$WORK/node-deployment.yaml" -o jsonpath="$1") \
    || fail "cannot read $1 from the node-overlay Deployment"
  [ "$got" = "$2" ] || fail "node-overlay Deployment $1: expected '$2', got '$got'"
}
pref="$anti.preferredDuringSchedulingIgnoredDuringExecution"
expect_node_field "{$req}" ''
expect_node_field "{$pref[0].podAffinityTerm.topologyKey}" kubernetes.io/hostname
expect_node_field "{$pref[0].podAffinityTerm.labelSelector.matchLabels}" "$labels"
expect_node_field "{$spread}" "$(deploy_json "{$spread}")"
expect_node_field '{.spec.replicas}' 2

# --- 3. the PodDisruptionBudget -------------------------------------------------------------

pdb="$DEPLOY_DIR/pdb.yaml"
if k api-versions | grep -x 'policy/v1' >/dev/null; then
  out=$(k apply --dry-run=client -f "$pdb" 2>&1) || fail "client dry run of $pdb failed: $out"
  echo "  $out"
else
  echo "  the server has no policy/v1: checking $pdb against kubectl's own policy/v1 object"
  pdb_field() { k create --dry-run=client -f - -o jsonpath="$1" <"$2" 2>/dev/null; }
  # kubectl cannot map policy/v1 without discovery; read the file through the v1beta1 kind.
  sed 's#^apiVersion: policy/v1$#apiVersion: policy/v1beta1#' "$pdb" >"$WORK/pdb-v1beta1.yaml"
  grep -q '^apiVersion: policy/v1$' "$pdb" || fail "$pdb is not a policy/v1 object"
  grep -q '^kind: PodDisruptionBudget$' "$pdb" || fail "$pdb is not a PodDisruptionBudget"
  min_available=$(pdb_field '{.spec.minAvailable}' "$WORK/pdb-v1beta1.yaml") \
    || fail "cannot parse $pdb"
  [ "$min_available" = 1 ] || fail "PDB minAvailable: expected 1, got '$min_available'"
  selector=$(pdb_field '{.spec.selector.matchLabels}' "$WORK/pdb-v1beta1.yaml")
  template_selector=$(deploy_json '{.spec.selector.matchLabels}')
  [ "$selector" = "$template_selector" ] \
    || fail "PDB selector $selector differs from the Deployment's $template_selector"
  # The object kubectl generates for policy/v1 from the same inputs has the same spec.
  sel_arg=$(printf '%s' "$selector" | tr -d '{}"' | tr ':' '=')
  generated=$(k create poddisruptionbudget taint-eviction-controller --dry-run=client \
    --selector="$sel_arg" --min-available=1 -o jsonpath='{.apiVersion} {.spec.minAvailable} {.spec.selector.matchLabels}') \
    || fail "kubectl create poddisruptionbudget --dry-run=client failed"
  [ "$generated" = "policy/v1 1 $selector" ] \
    || fail "kubectl's policy/v1 PDB ('$generated') differs from $pdb ('policy/v1 1 $selector')"
  # The spec, server-validated under the older version of the same API.
  sed -i "s#^  namespace: taint-eviction-controller\$#  namespace: $NS#" "$WORK/pdb-v1beta1.yaml"
  out=$(k apply --dry-run=server -f "$WORK/pdb-v1beta1.yaml" 2>&1) \
    || fail "the PDB spec (as policy/v1beta1) was rejected by the server: $out"
  echo "  $out"
fi

# --- 4. least-privilege RBAC ----------------------------------------------------------------

write_overlay "$WORK/rbac" Namespace Deployment Service NetworkPolicy PodDisruptionBudget FlowSchema \
  ValidatingWebhookConfiguration
k apply -k "$WORK/rbac" >/dev/null || fail "cannot create the ServiceAccount, roles and bindings"
RBAC_APPLIED=1

# The Deployment's pod template as a Pod (its ServiceAccount exists now): pod-level admission
# (Priority resolves the priorityClassName) and validation only run for pods.
template_spec=$(deploy_json '{.spec.template.spec}') || fail "cannot read the Deployment's pod template"
template_labels=$(deploy_json '{.spec.template.metadata.labels}')
printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"template-check","namespace":"%s","labels":%s},"spec":%s}' \
  "$NS" "$template_labels" "$template_spec" >"$WORK/pod.json"
out=$(k apply --dry-run=server -f "$WORK/pod.json" -o jsonpath='{.spec.priority}' 2>&1) \
  || fail "a Pod from the Deployment's template was rejected by the server:
$out"
[ "$out" = "2000000000" ] || fail "the pod template should get system-cluster-critical priority 2000000000, got '$out'"

AS=(--as="system:serviceaccount:$NS:$SA" --as-group=system:serviceaccounts
  --as-group="system:serviceaccounts:$NS" --as-group=system:authenticated)
OTHER_NS="some-app-namespace"
failures=0

# can_i yes|no VERB RESOURCE [ARGS...]
can_i() {
  local want=$1 got
  shift
  got=$(k auth can-i "${AS[@]}" "$@" 2>"$WORK/can-i.err") || true
  case "$got" in
    yes | no) ;;
    *) fail "kubectl auth can-i $* did not answer yes/no: $got $(cat "$WORK/can-i.err")" ;;
  esac
  if [ "$got" != "$want" ]; then
    echo "FAIL: $TEST_NAME: can-i $*: expected $want, got $got" >&2
    failures=$((failures + 1))
  fi
}

# What the controller does.
can_i yes list nodes
can_i yes watch nodes
can_i yes list pods --all-namespaces
can_i yes watch pods --all-namespaces
can_i yes list namespaces   # the opt-out annotation (taint-eviction-controller/exclude)
can_i yes watch namespaces
can_i yes delete pods -n "$OTHER_NS"
can_i yes delete pods -n kube-system
can_i yes patch pods --subresource=status -n "$OTHER_NS"
can_i yes create pods --subresource=eviction -n "$OTHER_NS"   # evictionMode: Evict
can_i yes create events -n "$OTHER_NS"
can_i yes patch events -n "$OTHER_NS"
can_i yes list events --all-namespaces   # shadow mode's TaintManagerEviction watch
can_i yes watch events --all-namespaces
can_i yes create leases.coordination.k8s.io -n "$NS"
can_i yes get "leases.coordination.k8s.io/$LEASE_NAME" -n "$NS"
can_i yes update "leases.coordination.k8s.io/$LEASE_NAME" -n "$NS"
# The policy ConfigMap's UID, for its PolicyApplied/PolicyRejected Events (kustomize renamed
# the resourceName with the ConfigMap).
can_i yes get "configmaps/taint-eviction-controller-policy$NAME_SUFFIX" -n "$NS"
# The secure metrics port's delegated authentication and authorization (system:auth-delegator).
can_i yes create tokenreviews.authentication.k8s.io
can_i yes create subjectaccessreviews.authorization.k8s.io

# The webhook's certificates: its own Secret (kustomize renamed the resourceName with it), read
# and updated, never created; its own webhook configuration's caBundle.
can_i yes get "secrets/taint-eviction-controller-webhook-tls$NAME_SUFFIX" -n "$NS"
can_i yes update "secrets/taint-eviction-controller-webhook-tls$NAME_SUFFIX" -n "$NS"
can_i yes get validatingwebhookconfigurations.admissionregistration.k8s.io/taint-eviction-controller
can_i yes patch validatingwebhookconfigurations.admissionregistration.k8s.io/taint-eviction-controller

# What it must not.
can_i no create secrets -n "$NS"
can_i no get secrets/some-other-secret -n "$NS"
can_i no update secrets/some-other-secret -n "$NS"
can_i no patch "secrets/taint-eviction-controller-webhook-tls$NAME_SUFFIX" -n "$NS"
can_i no delete "secrets/taint-eviction-controller-webhook-tls$NAME_SUFFIX" -n "$NS"
can_i no get "secrets/taint-eviction-controller-webhook-tls$NAME_SUFFIX" -n "$OTHER_NS"
can_i no list validatingwebhookconfigurations.admissionregistration.k8s.io
can_i no create validatingwebhookconfigurations.admissionregistration.k8s.io
can_i no get validatingwebhookconfigurations.admissionregistration.k8s.io/some-other-webhook
can_i no patch validatingwebhookconfigurations.admissionregistration.k8s.io/some-other-webhook
can_i no update validatingwebhookconfigurations.admissionregistration.k8s.io/taint-eviction-controller
can_i no delete validatingwebhookconfigurations.admissionregistration.k8s.io/taint-eviction-controller
can_i no patch mutatingwebhookconfigurations.admissionregistration.k8s.io/taint-eviction-controller
can_i no get nodes/some-node
can_i no get namespaces/"$OTHER_NS"
can_i no update namespaces
can_i no patch namespaces
can_i no delete namespaces
can_i no get pods -n "$OTHER_NS"
can_i no create events.events.k8s.io -n "$OTHER_NS"
can_i no delete nodes
can_i no update nodes
can_i no patch nodes
can_i no patch nodes --subresource=status
can_i no create nodes
can_i no create pods -n "$OTHER_NS"
can_i no update pods -n "$OTHER_NS"
can_i no patch pods -n "$OTHER_NS"
can_i no deletecollection pods -n "$OTHER_NS"
can_i no update pods --subresource=status -n "$OTHER_NS"
can_i no create pods --subresource=exec -n "$OTHER_NS"
can_i no get secrets -n "$NS"
can_i no list secrets --all-namespaces
can_i no get configmaps -n "$OTHER_NS"
can_i no get configmaps/some-other-config -n "$NS"
can_i no list configmaps -n "$NS"
can_i no update "configmaps/taint-eviction-controller-policy$NAME_SUFFIX" -n "$NS"
can_i no delete events -n "$OTHER_NS"
can_i no get events -n "$OTHER_NS"
can_i no update events -n "$OTHER_NS"
can_i no list leases.coordination.k8s.io -n "$NS"
can_i no watch leases.coordination.k8s.io -n "$NS"
can_i no delete "leases.coordination.k8s.io/$LEASE_NAME" -n "$NS"
can_i no get leases.coordination.k8s.io/kube-controller-manager -n "$NS"
can_i no update leases.coordination.k8s.io/kube-controller-manager -n "$NS"
can_i no create leases.coordination.k8s.io -n kube-system
can_i no update "leases.coordination.k8s.io/$LEASE_NAME" -n kube-system
can_i no create serviceaccounts --subresource=token -n "$NS"
can_i no update deployments.apps -n "$NS"
can_i no create clusterrolebindings.rbac.authorization.k8s.io
can_i no '*' '*'

[ "$failures" -eq 0 ] || fail "$failures RBAC expectation(s) not met"

echo "PASS: $TEST_NAME"
