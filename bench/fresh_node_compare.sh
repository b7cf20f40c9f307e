#!/usr/bin/env bash
# What --fresh-node-check costs (issue 33 item 4; BENCHMARKS.md): ours without it (A) and with
# it (B), interleaved A,B,B,A on one API server: the single-pod latency, taint PATCH to the
# pod's deletionTimestamp (bench/single_eviction.py, blocks of --block runs) and the 5,000-pod
# mass eviction with the client limits lifted (build/bin/eviction_compare's mass scenario,
# 50 nodes x 100 pods, every other repetition in reverse order). Both are the same binary; two
# wrapper scripts in the output directory add the flag.
#
# Needs a running local API server of its own:
#   TEC_CLUSTER_DIR=/dev/shm/NAME deploy/local/cluster.sh up
#   TEC_CLUSTER_DIR=/dev/shm/NAME bench/fresh_node_compare.sh
# RUNS (single evictions per variant, 20), BLOCK (5), MASS_REPEAT (4); results in
# TEC_BENCH_OUT (build/bench-fresh): single.json, eviction_compare.json and the logs. TEC_BIN:
# the binary (build/bin/taint-eviction-controller).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
dir=${TEC_CLUSTER_DIR:?"set TEC_CLUSTER_DIR to the directory of a running deploy/local/cluster.sh"}
out=${TEC_BENCH_OUT:-$root/build/bench-fresh}
bin=${TEC_BIN:-$root/build/bin/taint-eviction-controller}
for b in "$bin" "$root/build/bin/eviction_compare"; do
  [ -x "$b" ] || { echo "fresh_node_compare.sh: $b is missing; run 'make build'" >&2; exit 2; }
done
mkdir -p "$out"
printf '#!/bin/sh\nexec %q --fresh-node-check=false "$@"\n' "$bin" >"$out/tec-without"
printf '#!/bin/sh\nexec %q --fresh-node-check=true "$@"\n' "$bin" >"$out/tec-with"
chmod +x "$out/tec-without" "$out/tec-with"

python3 "$root/bench/single_eviction.py" --kubeconfig "$dir/admin.kubeconfig" \
  --tec "$out/tec-without" --tec-base "$out/tec-with" --runs "${RUNS:-20}" \
  --block "${BLOCK:-5}" --abba --log-dir "$out" --out "$out/single.json"

"$root/build/bin/eviction_compare" --kubeconfig "$dir/admin.kubeconfig" --cluster-dir "$dir" \
  --tec "$out/tec-without" --tec-base "$out/tec-with" --controllers tec,tec-base \
  --scenarios mass --mass-repeat "${MASS_REPEAT:-4}" --out-dir "$out"
