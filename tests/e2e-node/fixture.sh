#!/usr/bin/env bash
# The CTest fixture of the e2e-node tests.
#   fixture.sh up    takes down a node abandoned by a killed run (`cluster.sh node-preflight`),
#                    records the host's state (host_state.sh), then `cluster.sh up --node`:
#                    builds what is missing (kube binaries, images incl. deploy/Dockerfile),
#                    starts the cluster with its real node and the controller Deployment.
#   fixture.sh down  `cluster.sh down --wipe`, then fails unless the host is as `up` found it:
#                    no process naming the state dir, and the same mounts, links, addresses,
#                    iptables/ip6tables rules, sysctls, host paths, cgroups, netns and
#                    containerd shim sockets.
# Environment: TEC_CLUSTER_DIR (the state dir); TEC_NODE_CONTROLLER_BINARY (optional: run the
# Deployment from an image holding this host-built binary instead of deploy/Dockerfile's).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
cluster="$here/../../deploy/local/cluster.sh"
[ -n "${TEC_CLUSTER_DIR:-}" ] || { echo "fixture.sh: TEC_CLUSTER_DIR is not set" >&2; exit 2; }
before="${TEC_CLUSTER_DIR%/}.host-before"

case "${1:-}" in
  up)
    [ "$(id -u)" -eq 0 ] || { echo "fixture.sh: the real node needs root" >&2; exit 1; }
    # A state dir left by an interrupted run: take it down first, so the snapshot is clean.
    if [ -d "$TEC_CLUSTER_DIR" ]; then "$cluster" down --wipe; fi
    # A node another state dir's killed run left behind is taken down by the preflight, before
    # the snapshot (a running one makes it refuse).
    "$cluster" node-preflight
    "$here/host_state.sh" "$TEC_CLUSTER_DIR" >"$before"
    start=$(date +%s)
    args=(--node)
    if [ -n "${TEC_NODE_CONTROLLER_BINARY:-}" ]; then
      args+=(--controller-binary "$TEC_NODE_CONTROLLER_BINARY")
    fi
    "$cluster" up "${args[@]}"
    echo "fixture.sh: cluster with a real node up in $(($(date +%s) - start)) s"
    ;;
  down)
    start=$(date +%s)
    "$cluster" down --wipe
    echo "fixture.sh: down in $(($(date +%s) - start)) s"
    [ -f "$before" ] || { echo "fixture.sh: no host snapshot from 'up' ($before)"; exit 0; }
    after=$(mktemp)
    "$here/host_state.sh" "$TEC_CLUSTER_DIR" >"$after"
    if ! diff -u "$before" "$after" >"$after.diff"; then
      echo "FAIL: the host is not as 'up' found it after 'down' (- before up, + after down):" >&2
      cat "$after.diff" >&2
      rm -f "$after" "$after.diff"
      exit 1
    fi
    rm -f "$after" "$after.diff" "$before"
    echo "PASS: the host is as 'up' found it: processes, mounts, links, addresses, iptables, sysctls, host paths, cgroups, netns, shim sockets"
    ;;
  *)
    echo "usage: fixture.sh up|down" >&2
    exit 2
    ;;
esac
