#!/usr/bin/env bash
# scripts/conformance.sh [--kcm] CONTROLLER_BINARY
# Upstream's NoExecuteTaintManager e2e (Kubernetes 1.20's test/e2e/node/taints.go, 6 tests) on a
# real-node cluster of its own (deploy/local/cluster.sh up --node, state in
# .local/conformance), then the cluster taken down:
#   (default)  against this controller, the Deployment from deploy/ running CONTROLLER_BINARY
#              (make conformance; make test runs the same test on its node fixture);
#   --kcm      against kube-controller-manager's own taint manager, the controller scaled to 0
#              (make conformance-kcm).
# Prints the per-test results and appends them to build/conformance.md. Needs root; one
# real-node cluster per machine (the preflight refuses a second). docs/upstream-e2e.md.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cluster="$repo/deploy/local/cluster.sh"
mode=controller
if [ "${1:-}" = --kcm ]; then mode=kcm; shift; fi
binary=${1:-}
[ -x "$binary" ] || { echo "usage: conformance.sh [--kcm] CONTROLLER_BINARY" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "conformance.sh: the real node needs root" >&2; exit 1; }

export TEC_CLUSTER_DIR=${TEC_CLUSTER_DIR:-$repo/.local/conformance}
export KUBECONFIG="$TEC_CLUSTER_DIR/admin.kubeconfig"
export TEC_UPSTREAM_E2E_MODE=$mode
export TEC_UPSTREAM_E2E_REPORT=${TEC_UPSTREAM_E2E_REPORT:-$repo/build/conformance.md}
mkdir -p "$(dirname "$TEC_UPSTREAM_E2E_REPORT")"

down() { "$cluster" down --wipe >/dev/null 2>&1 || "$cluster" down --wipe; }
trap down EXIT
if [ -d "$TEC_CLUSTER_DIR" ]; then "$cluster" down --wipe; fi
"$cluster" node-preflight
"$cluster" build e2e.test >/dev/null  # before the cluster: the build wants both cores
if [ "$mode" = kcm ]; then
  TEC_NODE_KCM_TAINT_MANAGER=1 "$cluster" up --node --controller-binary "$binary"
  kubectl -n taint-eviction-controller scale deployment taint-eviction-controller --replicas=0 >/dev/null
else
  "$cluster" up --node --controller-binary "$binary"
fi
{ echo; echo "### $(date -u +%FT%TZ) $(git -C "$repo" describe --always --dirty 2>/dev/null || true)"; } \
  >>"$TEC_UPSTREAM_E2E_REPORT"
bash "$repo/tests/e2e-node/upstream_taints_test.sh"
echo "conformance.sh: results appended to $TEC_UPSTREAM_E2E_REPORT"
