#!/usr/bin/env bash
# The identities of the API Priority and Fairness scenario (eviction_compare --scenarios apf,
# issue 31), made with the admin credentials of a deploy/local/cluster.sh cluster:
# - OUT/tec.kubeconfig: the controller's own ServiceAccount (deploy/'s RBAC, a TokenRequest
#   token), as it runs in a cluster;
# - OUT/kcm.kubeconfig: kube-controller-manager as system:kube-controller-manager (a client
#   certificate from the cluster's CA), as kubeadm runs it: its leader election then falls in
#   the default system-leader-election FlowSchema, and with --use-service-account-credentials
#   its node lifecycle controller runs as kube-system/node-controller (workload-high);
# - OUT/noise.tokens: one TokenRequest token per line for ServiceAccounts noise-1..N of
#   namespace tec-bench-noise, which may list its pods (the default service-accounts
#   FlowSchema puts them in workload-low, where ours lands without deploy/flowschema.yaml);
# - OUT/flowschema.yaml: deploy/flowschema.yaml as this 1.20 server serves it (v1beta1, as
#   deploy/components/flowcontrol-v1beta1 renders it).
# Usage: bench/apf_setup.sh CLUSTER_DIR OUT_DIR NOISE_ACCOUNTS
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
export TEC_CLUSTER_DIR=$1
out=$2
accounts=$3
[[ "$accounts" =~ ^[1-9][0-9]*$ ]] || { echo "apf_setup.sh: NOISE_ACCOUNTS must be a positive number" >&2; exit 2; }
export KUBECONFIG="$TEC_CLUSTER_DIR/admin.kubeconfig"
cluster="$root/deploy/local/cluster.sh"
mkdir -p "$out"
k() { kubectl --request-timeout=60s "$@"; }

for f in namespace serviceaccount rbac; do
  k apply -f "$root/deploy/$f.yaml" >/dev/null
done
"$cluster" sa-kubeconfig taint-eviction-controller taint-eviction-controller "$out/tec.kubeconfig" >/dev/null

# deploy/flowschema.yaml through the v1beta1 component (an overlay inside OUT).
mkdir -p "$out/flowschema-overlay/base"
cp "$root/deploy/flowschema.yaml" "$out/flowschema-overlay/base/"
printf 'resources: [flowschema.yaml]\n' >"$out/flowschema-overlay/base/kustomization.yaml"
cp -r "$root/deploy/components/flowcontrol-v1beta1" "$out/flowschema-overlay/component"
printf 'resources: [base]\ncomponents: [component]\n' >"$out/flowschema-overlay/kustomization.yaml"
k kustomize "$out/flowschema-overlay" >"$out/flowschema.yaml"
grep -q '^apiVersion: flowcontrol.apiserver.k8s.io/v1beta1$' "$out/flowschema.yaml"

# The noise: N ServiceAccounts that may list pods in tec-bench-noise.
k create namespace tec-bench-noise --dry-run=client -o yaml | k apply -f - >/dev/null
k create clusterrole tec-bench-noise --verb=list --resource=pods --dry-run=client -o yaml \
  | k apply -f - >/dev/null
k -n tec-bench-noise create rolebinding tec-bench-noise --clusterrole=tec-bench-noise \
  --group=system:serviceaccounts:tec-bench-noise --dry-run=client -o yaml | k apply -f - >/dev/null
: >"$out/noise.tokens"
for ((i = 1; i <= accounts; i++)); do
  k -n tec-bench-noise create serviceaccount "noise-$i" --dry-run=client -o yaml | k apply -f - >/dev/null
  echo '{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":86400}}' \
    | k create --raw "/api/v1/namespaces/tec-bench-noise/serviceaccounts/noise-$i/token" -f - \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"]["token"])' >>"$out/noise.tokens"
done

# kube-controller-manager's identity: a client certificate, CN system:kube-controller-manager.
pki="$TEC_CLUSTER_DIR/pki"
openssl req -new -newkey rsa:2048 -nodes -keyout "$out/kcm.key" -subj "/CN=system:kube-controller-manager" \
  -out "$out/kcm.csr" 2>/dev/null
openssl x509 -req -in "$out/kcm.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
  -CAserial "$out/ca.srl" -days 2 -out "$out/kcm.crt" 2>/dev/null
server=$(k config view --raw -o jsonpath='{.clusters[0].cluster.server}')
cat >"$out/kcm.kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: tec-local
  cluster:
    server: $server
    certificate-authority-data: $(base64 -w0 "$pki/ca.crt")
users:
- name: kcm
  user:
    client-certificate-data: $(base64 -w0 "$out/kcm.crt")
    client-key-data: $(base64 -w0 "$out/kcm.key")
contexts:
- name: kcm@tec-local
  context: {cluster: tec-local, user: kcm}
current-context: kcm@tec-local
KUBECONFIG
chmod 600 "$out/kcm.kubeconfig" "$out/kcm.key"
echo "$server"
