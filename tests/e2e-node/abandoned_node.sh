#!/usr/bin/env bash
# A real node that a killed run left behind does not block the machine. The CI once failed
# because a `make test` killed mid-run (its processes gone, its bridge, mounts, iptables chains
# and kubepods cgroups left) made every later `up --node` refuse.
#
# Starts its own real-node cluster in state dir A (after the node fixture's tests: one real
# node per machine), then:
#   1. while A runs, `node-preflight` for another state dir B refuses, naming A;
#   2. every process naming A's state dir (control plane, kubelet, containerd and its shims) is
#      killed with SIGKILL, as a killed job's would be; the pods' own processes stay;
#   3. `node-preflight` for B now succeeds, saying it took A's node down;
#   4. the host is as it was before A's `up` (host_state.sh): no bridge, mounts, iptables
#      chains, cgroups, changed sysctls or processes left.
# Environment: TEC_NODE_ABANDONED_DIR (A; B is A with a "-b" suffix); TEC_NODE_CONTROLLER_BINARY
# (optional: the Deployment runs this host-built binary, as with the node fixture).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
cluster="$here/../../deploy/local/cluster.sh"
A=${TEC_NODE_ABANDONED_DIR:?TEC_NODE_ABANDONED_DIR is not set}
A=${A%/}
B="$A-b"
name=abandoned_node

fail() {
  echo "FAIL: $name: $*" >&2
  exit 1
}
log() { echo "$name: $(date +%T.%3N) $*"; }

[ "$(id -u)" -eq 0 ] || fail "the real node needs root"
work=$(mktemp -d "${TMPDIR:-/tmp}/tec-abandoned.XXXXXX")
cleanup() {
  local rc=$?
  set +e
  TEC_CLUSTER_DIR=$A "$cluster" down --wipe >/dev/null 2>&1
  rm -rf "$B" "$work"
  exit "$rc"
}
trap cleanup EXIT

# A state dir left by an interrupted run of this test.
if [ -d "$A" ]; then TEC_CLUSTER_DIR=$A "$cluster" down --wipe; fi
rm -rf "$B"
TEC_CLUSTER_DIR=$A "$cluster" node-preflight >/dev/null
"$here/host_state.sh" "$A" >"$work/before"

log "starting a real-node cluster in $A"
up_args=(--node)
if [ -n "${TEC_NODE_CONTROLLER_BINARY:-}" ]; then
  up_args+=(--controller-binary "$TEC_NODE_CONTROLLER_BINARY")
fi
TEC_CLUSTER_DIR=$A "$cluster" up "${up_args[@]}" >"$work/up.log" 2>&1 || { cat "$work/up.log" >&2; fail "up --node in $A failed"; }

log "1. while it runs, another state dir's preflight refuses"
if TEC_CLUSTER_DIR=$B "$cluster" node-preflight >"$work/refused.log" 2>&1; then
  cat "$work/refused.log" >&2
  fail "node-preflight for $B succeeded while the node of $A runs"
fi
grep -q "another real-node cluster runs on this machine ($A;" "$work/refused.log" \
  || { cat "$work/refused.log" >&2; fail "the refusal does not name $A"; }
ip link show tec0 >/dev/null 2>&1 || fail "the refused preflight removed the bridge of a running node"

log "2. killing every process naming $A with SIGKILL"
pids_of_a() {
  local d cmd
  for d in /proc/[0-9]*; do
    [ "${d#/proc/}" = "$$" ] && continue
    cmd=$({ tr '\0' ' ' <"$d/cmdline"; } 2>/dev/null) || continue
    case "$cmd" in *"$A/"*) echo "${d#/proc/}" ;; esac
  done
}
pods=$(find /sys/fs/cgroup/pids/kubepods -name cgroup.procs -exec cat {} + 2>/dev/null | wc -l)
[ "$pods" -gt 0 ] || fail "no process in the kubepods cgroups: the node ran no pod"
killed=0
for pid in $(pids_of_a); do
  kill -KILL "$pid" 2>/dev/null && killed=$((killed + 1))
done
deadline=$((SECONDS + 60))
while [ -n "$(pids_of_a)" ]; do
  [ "$SECONDS" -lt "$deadline" ] || fail "processes naming $A outlived SIGKILL for 60 s: $(pids_of_a)"
  sleep 0.2
done
log "killed $killed processes; $pods pod processes left running; the bridge, mounts and chains stay"
ip link show tec0 >/dev/null 2>&1 || fail "the bridge went with the processes: nothing left to reclaim"

log "3. the next preflight takes the abandoned node down"
TEC_CLUSTER_DIR=$B "$cluster" node-preflight >"$work/reclaim.log" 2>&1 \
  || { cat "$work/reclaim.log" >&2; fail "node-preflight for $B refused an abandoned node"; }
grep -q "belongs to a real-node cluster in $A that nothing runs any more" "$work/reclaim.log" \
  || { cat "$work/reclaim.log" >&2; fail "the preflight did not say it took down the node of $A"; }
[ ! -e "$B" ] || fail "node-preflight created $B"

log "4. the host is as it was before the abandoned node's 'up'"
"$here/host_state.sh" "$A" >"$work/after"
if ! diff -u "$work/before" "$work/after" >"$work/diff"; then
  echo "FAIL: the host is not as it was before $A's 'up' (- before, + after the reclaim):" >&2
  cat "$work/diff" >&2
  exit 1
fi
echo "PASS: a node abandoned by a killed run (all $killed of its processes SIGKILLed) is refused while it runs and taken down by the next preflight, leaving the host as before it"
