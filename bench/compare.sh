#!/usr/bin/env bash
# kube-controller-manager's taint manager and ours, side by side, on one local API server
# (issue 7; BENCHMARKS.md). Builds kube-controller-manager v1.20.2 from Debian's source package
# (cached like kube-apiserver), brings up a cluster of its own in build/bench-cluster, runs
# build/bin/eviction_compare against it, and wipes the cluster afterwards. Arguments go to
# eviction_compare (e.g. --quick, --scenarios mass,floor). Results: build/bench/.
#
# Run it on an idle machine: the controllers, the API server and etcd share its cores.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cluster="$root/deploy/local/cluster.sh"
# etcd's data on tmpfs by default: fsync on this kind of shared virtual disk takes from 1 to
# 100 ms and swamps what is being compared (TEC_BENCH_CLUSTER_DIR=build/bench-cluster puts it
# on the disk instead). Either way both controllers face the same API server.
default_dir="$root/build/bench-cluster"
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
  default_dir="/dev/shm/tec-bench-cluster-$(id -u)"
fi
export TEC_CLUSTER_DIR=${TEC_BENCH_CLUSTER_DIR:-$default_dir}
# 150,000 realistic pods (scenario 7) with their managedFields and the outage's and churn's
# revisions outgrow etcd's 2 GiB default quota; tmpfs holds only what is written.
export TEC_ETCD_QUOTA_BYTES=${TEC_ETCD_QUOTA_BYTES:-$((8 * 1024 * 1024 * 1024))}
# kube-apiserver 1.20 holds 150,000 realistic pods in a live heap of 5-7 GiB; with Go's default
# GC it grew to 16-21 GiB while seeding and listing them, which with kube-controller-manager's
# 5.7 GiB outgrows this 24 GiB machine. A soft limit keeps it at about 10.5 GiB (its LIST of
# all pods then took 5-8 s to its first byte, against 4-8 s at 11 GiB and 11-19 s at 8 GiB).
export TEC_APISERVER_GOMEMLIMIT=${TEC_APISERVER_GOMEMLIMIT-10GiB}
out=${TEC_BENCH_OUT:-$root/build/bench}

for bin in eviction_compare taint-eviction-controller; do
  [ -x "$root/build/bin/$bin" ] || { echo "compare.sh: build/bin/$bin is missing; run 'make build'" >&2; exit 2; }
done

kcm=$("$cluster" build kube-controller-manager | tail -n 1)
[ -x "$kcm" ] || { echo "compare.sh: no kube-controller-manager binary ('$kcm')" >&2; exit 1; }

"$cluster" down --wipe >/dev/null 2>&1 || true
"$cluster" up
trap '"$cluster" down --wipe >/dev/null 2>&1 || true' EXIT

mkdir -p "$out"
# The scale scenario restarts the control plane after seeding each size (same ports, state and
# credentials), so its syncs meet an API server whose heap holds the cluster and nothing of the
# phases before (eviction_compare.cpp, restart_server).
restart="$(printf '%q' "$cluster") down >&2 && $(printf '%q' "$cluster") up >&2"
"$root/build/bin/eviction_compare" --kubeconfig "$TEC_CLUSTER_DIR/admin.kubeconfig" \
  --cluster-dir "$TEC_CLUSTER_DIR" --kcm "$kcm" --tec "$root/build/bin/taint-eviction-controller" \
  --restart-apiserver "$restart" --out-dir "$out" "$@"
