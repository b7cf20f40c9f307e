#!/usr/bin/env bash
# The demo: brings the local control plane up and shows what is in it. (The daemon issue turns
# this into a full taint scenario.)
set -euo pipefail
cd "$(dirname "$0")/.."
deploy/local/cluster.sh up
kubeconfig="$(deploy/local/cluster.sh env | sed -n 's/^export KUBECONFIG=//p')"
echo
kubectl --kubeconfig "$kubeconfig" get nodes,pods -A
echo
echo "The local control plane stays up. Try:"
echo "  export KUBECONFIG=$kubeconfig"
echo "  kubectl get ns"
echo "Stop it with: make demo-down   (or deploy/local/cluster.sh down --wipe to drop its state)"
