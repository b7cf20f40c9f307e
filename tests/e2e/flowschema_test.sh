#!/usr/bin/env bash
# End to end, API Priority and Fairness (issue 31): deploy/flowschema.yaml, rendered for this
# 1.20 API server through deploy/components/flowcontrol-v1beta1, serves the controller's
# ServiceAccount as the built-in taint manager is served: its Lease requests in priority level
# leader-election, everything else in workload-high. Without it the same requests land in the
# default service-accounts FlowSchema (workload-low). Checked two ways, both with the
# ServiceAccount's own token (admin credentials are exempt from APF and would prove nothing):
#   - the API server's APF response headers (X-Kubernetes-PF-FlowSchema-UID and
#     -PriorityLevel-UID) on a LIST of nodes and a GET of the Lease, before and after;
#   - its apiserver_flowcontrol_dispatched_requests_total counters while the controller, running
#     with that token, acquires its Lease and evicts a pod.
# The FlowSchemas are deleted at the end (they are cluster-wide).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

on_cleanup() { k delete -f "$WORK/flowschema.yaml" --ignore-not-found >/dev/null 2>&1; }

setup_rbac
mkdir -p "$WORK/overlay"
printf 'resources: [%s]\ncomponents: [%s]\n' "$(realpath --relative-to="$WORK/overlay" "$REPO_ROOT/deploy")" \
  "$(realpath --relative-to="$WORK/overlay" "$REPO_ROOT/deploy/components/flowcontrol-v1beta1")" \
  >"$WORK/overlay/kustomization.yaml"
k kustomize "$WORK/overlay" | awk 'BEGIN { RS = "---\n" } /(^|\n)kind: FlowSchema\n/ { printf "---\n%s", $0 }' \
  >"$WORK/flowschema.yaml" || fail "deploy/ with the v1beta1 component does not render"
[ "$(grep -c '^kind: FlowSchema$' "$WORK/flowschema.yaml")" -eq 2 ] || fail "expected 2 FlowSchemas in deploy/"

token=$(k --kubeconfig "$SA_KUBECONFIG" config view --raw -o jsonpath='{.users[0].user.token}')
server=$(k --kubeconfig "$SA_KUBECONFIG" config view --raw -o jsonpath='{.clusters[0].cluster.server}')
k --kubeconfig "$SA_KUBECONFIG" config view --raw -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' \
  | base64 -d >"$WORK/ca.crt"
[ -n "$token" ] && [ -s "$WORK/ca.crt" ] || fail "no token or CA in $SA_KUBECONFIG"

uid_of() { k get "$1.v1beta1.flowcontrol.apiserver.k8s.io" "$2" -o jsonpath='{.metadata.uid}'; }
# served_by PATH: "FLOWSCHEMA PRIORITYLEVEL" (names) that APF picked for a request as us.
served_by() {
  local headers fs pl name
  headers=$(curl -sS -D - -o /dev/null --max-time 20 --cacert "$WORK/ca.crt" \
    -H "Authorization: Bearer $token" "$server$1" | tr -d '\r') || fail "curl $1 failed"
  fs=$(sed -n 's/^[Xx]-[Kk]ubernetes-[Pp][Ff]-[Ff]low[Ss]chema-[Uu][Ii][Dd]: //p' <<<"$headers")
  pl=$(sed -n 's/^[Xx]-[Kk]ubernetes-[Pp][Ff]-[Pp]riority[Ll]evel-[Uu][Ii][Dd]: //p' <<<"$headers")
  [ -n "$fs" ] && [ -n "$pl" ] || fail "no APF headers on $1 (is APF on?): $headers"
  name=$(k get flowschemas.v1beta1.flowcontrol.apiserver.k8s.io -o jsonpath="{range .items[?(@.metadata.uid==\"$fs\")]}{.metadata.name}{end}")
  echo -n "$name "
  k get prioritylevelconfigurations.v1beta1.flowcontrol.apiserver.k8s.io \
    -o jsonpath="{range .items[?(@.metadata.uid==\"$pl\")]}{.metadata.name}{end}"
}
nodes_path=/api/v1/nodes?limit=1
lease_path=/apis/coordination.k8s.io/v1/namespaces/$DEPLOY_NS/leases/$LEASE_NAME

# 1. Without the FlowSchemas: service-accounts / workload-low, Lease requests included.
k delete -f "$WORK/flowschema.yaml" --ignore-not-found >/dev/null
got=$(served_by "$nodes_path")
[ "$got" = "service-accounts workload-low" ] || fail "without deploy/flowschema.yaml a LIST should be served by service-accounts workload-low, got '$got'"
got=$(served_by "$lease_path")
[ "$got" = "service-accounts workload-low" ] || fail "without deploy/flowschema.yaml the Lease GET should be served by service-accounts workload-low, got '$got'"
log "without the FlowSchemas: service-accounts / workload-low"

# 2. With them (the API server's APF controller picks them up within a few seconds).
k apply -f "$WORK/flowschema.yaml" >/dev/null || fail "the API server rejected deploy/flowschema.yaml (v1beta1)"
deadline=$((SECONDS + 60))
until [ "$(served_by "$nodes_path")" = "taint-eviction-controller workload-high" ]; do
  [ "$SECONDS" -lt "$deadline" ] || fail "a LIST as the ServiceAccount is not served by taint-eviction-controller workload-high within 60 s: '$(served_by "$nodes_path")'"
  sleep 0.5
done
got=$(served_by "$lease_path")
[ "$got" = "taint-eviction-controller-leader-election leader-election" ] \
  || fail "the Lease GET should be served by taint-eviction-controller-leader-election leader-election, got '$got'"
got=$(served_by "/api/v1/namespaces/$NS/pods")
[ "$got" = "taint-eviction-controller workload-high" ] || fail "a namespaced LIST should be served by taint-eviction-controller workload-high, got '$got'"
log "with the FlowSchemas: workload-high, the Lease in leader-election"

# 3. The controller itself, with that token: its requests are counted in our two FlowSchemas.
# dispatched FLOWSCHEMA PRIORITYLEVEL: the API server's counter (0 when absent). Labels
# flow_schema/priority_level (flowSchema/priorityLevel in some releases).
dispatched() {
  k get --raw /metrics | awk -v fs="$1" -v pl="$2" '
    /^apiserver_flowcontrol_dispatched_requests_total\{/ &&
      (index($0, "flow_schema=\"" fs "\"") || index($0, "flowSchema=\"" fs "\"")) &&
      (index($0, "priority_level=\"" pl "\"") || index($0, "priorityLevel=\"" pl "\"")) { n += $NF }
    END { printf "%d", n }'
}
high0=$(dispatched taint-eviction-controller workload-high)
lease0=$(dispatched taint-eviction-controller-leader-election leader-election)
N1="tec-e2e-apf-$SUFFIX"
make_node "$N1"
make_pod victim "$N1"
start_controller apf
wait_acting "$CONTROLLER_LOG"
taint "$N1" tec.test/apf=x:NoExecute
wait_terminating victim 30
high1=$(dispatched taint-eviction-controller workload-high)
lease1=$(dispatched taint-eviction-controller-leader-election leader-election)
# The LISTs of pods, nodes and namespaces and the DELETE at least (WATCHes are long-running
# requests, which this server does not pass through APF; the Event may still be on its way).
[ $((high1 - high0)) -ge 4 ] || fail "workload-high counted $((high1 - high0)) requests of the controller (expected >= 4)"
# The Lease GET and its create or update.
[ $((lease1 - lease0)) -ge 2 ] || fail "leader-election counted $((lease1 - lease0)) Lease requests of the controller (expected >= 2)"
log "the controller's requests: $((high1 - high0)) in workload-high, $((lease1 - lease0)) in leader-election"
echo "PASS: $TEST_NAME"
