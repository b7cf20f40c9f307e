#!/usr/bin/env bash
# kube-controller-manager's taint manager and ours, side by side, on one local API server
# (issue 7; BENCHMARKS.md). Builds kube-controller-manager v1.20.2 from Debian's source package
# (cached like kube-apiserver), brings up a cluster of its own in build/bench-cluster, runs
# build/bin/eviction_compare against it, and wipes the cluster afterwards. Arguments go to
# eviction_compare (e.g. --quick, --scenarios mass,floor). Results: build/bench/.
#
# Run it on an idle machine: the controllers, the API server and etcd share its cores.
#
# Contention mode: TEC_BENCH_BUSY=N (or --busy N as the first argument) runs N busy loops at
# the default priority beside everything for the whole run, as other workloads on a node would:
# the same scenarios, the controllers still interleaved (KCM, ours, ours, KCM), on a machine
# whose cores are contended. The busy loops end with the script (trap).
set -euo pipefail

busy=${TEC_BENCH_BUSY:-0}
if [ "${1:-}" = "--busy" ]; then
  busy=$2
  shift 2
fi
case "$busy" in
  '' | *[!0-9]*) echo "compare.sh: --busy takes a count of busy loops, not '$busy'" >&2; exit 2 ;;
esac

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
busy_pids=()
cleanup() {
  if [ "${#busy_pids[@]}" -gt 0 ]; then
    kill "${busy_pids[@]}" 2>/dev/null || true
    wait "${busy_pids[@]}" 2>/dev/null || true
  fi
  "$cluster" down --wipe >/dev/null 2>&1 || true
}
trap cleanup EXIT
for ((i = 0; i < busy; i++)); do
  # A CPU-bound loop of its own (no I/O); bounded by the script's life.
  bash -c 'while :; do :; done' &
  busy_pids+=("$!")
done
[ "$busy" -eq 0 ] || echo "compare.sh: contention mode: $busy busy loops (pids ${busy_pids[*]})" >&2

mkdir -p "$out"
# The scale scenario restarts the control plane after seeding each size (same ports, state and
# credentials), so its syncs meet an API server whose heap holds the cluster and nothing of the
# phases before (eviction_compare.cpp, restart_server).
restart="$(printf '%q' "$cluster") down >&2 && $(printf '%q' "$cluster") up >&2"
"$root/build/bin/eviction_compare" --kubeconfig "$TEC_CLUSTER_DIR/admin.kubeconfig" \
  --cluster-dir "$TEC_CLUSTER_DIR" --kcm "$kcm" --tec "$root/build/bin/taint-eviction-controller" \
  --restart-apiserver "$restart" --out-dir "$out" "$@"
