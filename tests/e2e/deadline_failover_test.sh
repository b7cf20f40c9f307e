#!/usr/bin/env bash
# End to end, deadlines that survive a failover (issue 15, item 4): two controllers share the
# Lease (15 s); a pod tolerates key=value:NoExecute for 40 s; the taint is written with
# timeAdded = T0 (kubectl taint cannot set it, so the node's spec.taints is patched); the leader
# is killed (-9) at T0 + 8 s and the follower takes over at about T0 + 23 s.
#  1. --deadlines-from-taint-time (the default): the follower counts the toleration from the
#     taint's timeAdded when it replays the caches, so the pod is evicted at T0 + 40 s +- 2 s
#     (not before T0 + 38 s, by T0 + 42 s), and its log says "deadline from taint time" for the
#     pod. Without the feature the follower restarts the countdown and this part fails.
#  2. --deadlines-from-taint-time=false on both, a fresh node and pod: the follower restarts the
#     countdown when it takes over, so the pod is not terminating at T0 + 45 s and is evicted
#     about 40 s after the takeover (by T0 + 23 + 40 + 15 s).
# Measured on 2 cores at a load of 3.6 to 7 (a build beside it), 2 runs: part 1 evicted at
# T0 + 40.4 s and 40.3 s (the apiserver recorded the delete at T0 + 40 s both times; b acting
# at T0 + 26 to 29 s); part 2 not terminating at T0 + 45 s, evicted at T0 + 65.8 s and 64.5 s,
# 40.2 s and 40.0 s after b acted. About 2 minutes.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
readonly LEASE_SECONDS=15
readonly TOLERATION_SECONDS=40
readonly KILL_AFTER_S=8
readonly TAINT_KEY=deadlineTaint TAINT_VALUE=failover

# A leader killed with -9 leaves the Lease held; hand it back so the next test does not wait.
on_cleanup() {
  k -n "$DEPLOY_NS" patch lease "$LEASE_NAME" --type merge \
    -p '{"spec":{"holderIdentity":"","leaseDurationSeconds":1}}' >/dev/null 2>&1 || true
}

# forget_pid PID: a controller that has exited is no longer cleanup's to signal (its PID may
# be reused).
forget_pid() {
  local p kept=()
  for p in "${CONTROLLER_PIDS[@]}"; do [ "$p" = "$1" ] || kept+=("$p"); done
  CONTROLLER_PIDS=("${kept[@]}")
}

# taint_at NODE: sets the NoExecute taint with timeAdded = now (whole seconds, UTC); sets
# T0_MS to that time in epoch ms.
taint_at() {
  local node=$1 t0_s added stored
  t0_s=$(date -u +%s)
  added=$(date -u -d "@$t0_s" +%Y-%m-%dT%H:%M:%SZ)
  k patch node "$node" --type merge -p "{\"spec\":{\"taints\":[{\"key\":\"$TAINT_KEY\",\"value\":\"$TAINT_VALUE\",\"effect\":\"NoExecute\",\"timeAdded\":\"$added\"}]}}" \
    >/dev/null || fail "cannot taint node $node"
  stored=$(k get node "$node" -o jsonpath='{.spec.taints[0].timeAdded}') || fail "cannot read node $node"
  [ "$stored" = "$added" ] || fail "node $node has taint timeAdded '$stored', expected '$added'"
  T0_MS=$((t0_s * 1000))
}

# failover NODE POD [FLAGS...]: controller a leads, b follows (both with FLAGS); taints NODE
# (T0_MS) and kills a at T0 + KILL_AFTER_S. Sets PID_B, LOG_B, KILL_MS (after T0).
failover() {
  local node=$1 pod=$2 pid_a log_a wait_ms
  shift 2
  make_node "$node"
  make_pod "$pod" "$node" "$(toleration "$TAINT_KEY" "$TAINT_VALUE" "$TOLERATION_SECONDS")"
  start_controller "a-$pod" --leader-elect-lease-duration "${LEASE_SECONDS}s" "$@"
  pid_a=$CONTROLLER_PID log_a=$CONTROLLER_LOG
  wait_acting "$log_a"
  start_controller "b-$pod" --leader-elect-lease-duration "${LEASE_SECONDS}s" "$@"
  PID_B=$CONTROLLER_PID LOG_B=$CONTROLLER_LOG
  grep -q "acting: replayed" "$LOG_B" && fail "controller b acts while a holds the lease"

  taint_at "$node"
  wait_ms=$((T0_MS + KILL_AFTER_S * 1000 - $(now_ms)))
  [ "$wait_ms" -gt 0 ] || fail "tainting took until T0 + $((-wait_ms / 1000 + KILL_AFTER_S)) s, past the kill time"
  sleep "$((wait_ms / 1000)).$(printf '%03d' $((wait_ms % 1000)))"
  kill -KILL "$pid_a"
  KILL_MS=$(($(now_ms) - T0_MS))
  wait "$pid_a" 2>/dev/null || true
  forget_pid "$pid_a"
}

# watch_pod POD END_MS: polls until the pod is terminating or until END_MS (epoch ms). Sets
# EVICT_MS (after T0, when a poll first saw a deletionTimestamp; "" if none) and ACT_MS (after
# T0, when b's log first showed "acting: replayed"; "" if not yet).
watch_pod() {
  local pod=$1 end_ms=$2
  EVICT_MS="" ACT_MS=""
  while [ "$(now_ms)" -lt "$end_ms" ]; do
    if [ -z "$ACT_MS" ] && grep -q "acting: replayed" "$LOG_B"; then
      ACT_MS=$(($(now_ms) - T0_MS))
    fi
    if terminating "$pod"; then
      EVICT_MS=$(($(now_ms) - T0_MS))
      break
    fi
    sleep 0.2
  done
  if [ -z "$ACT_MS" ] && grep -q "acting: replayed" "$LOG_B"; then ACT_MS=$(($(now_ms) - T0_MS)); fi
}

# deleted_after_t0 POD: seconds from T0 to the delete request, as the apiserver recorded it
# (deletionTimestamp - deletionGracePeriodSeconds, whole seconds, truncated): free of the
# polling's kubectl latency.
deleted_after_t0() {
  local ts grace
  ts=$(k -n "$NS" get pod "$1" -o jsonpath='{.metadata.deletionTimestamp}') || fail "cannot read pod $NS/$1"
  grace=$(k -n "$NS" get pod "$1" -o jsonpath='{.metadata.deletionGracePeriodSeconds}') || fail "cannot read pod $NS/$1"
  echo $(($(date -u -d "$ts" +%s) - ${grace:-0} - T0_MS / 1000))
}

setup_rbac

# Part 1: the deadline counts from the taint's timeAdded across the failover.
failover "tec-e2e-deadline-$SUFFIX" counted
watch_pod counted $((T0_MS + 42000))
[ -n "$ACT_MS" ] || fail "b did not log that it started acting by T0 + 42 s"
[ -n "$EVICT_MS" ] || fail "pod $NS/counted not terminating by T0 + 42 s (b acting at T0 + ${ACT_MS} ms): the deadline was not counted from the taint time"
[ "$EVICT_MS" -ge 38000 ] || fail "pod $NS/counted terminating at T0 + ${EVICT_MS} ms, before T0 + 38 s"
server_s=$(deleted_after_t0 counted)
[ "$server_s" -ge 38 ] || fail "the apiserver recorded the delete of $NS/counted at T0 + ${server_s} s, before T0 + 38 s"
grep "deadline from taint time" "$LOG_B" | matches -F "pod=\"$NS/counted\"" \
  || fail "b did not log 'deadline from taint time' for pod=\"$NS/counted\""
log "part 1 (from taint time): a killed at T0 + ${KILL_MS} ms, b acting at T0 + ${ACT_MS} ms, pod evicted (seen) at T0 + ${EVICT_MS} ms, delete at T0 + ${server_s} s by the apiserver's clock (expected T0 + 40 s +- 2 s)"
stop_controller "$PID_B"
forget_pid "$PID_B"

# Part 2: with the feature off, the new leader restarts the countdown when it takes over.
failover "tec-e2e-nodeadline-$SUFFIX" restarted --deadlines-from-taint-time=false
watch_pod restarted $((T0_MS + 45000))
[ -n "$ACT_MS" ] || fail "b did not log that it started acting by T0 + 45 s"
[ -z "$EVICT_MS" ] || fail "pod $NS/restarted terminating at T0 + ${EVICT_MS} ms with --deadlines-from-taint-time=false (b acting at T0 + ${ACT_MS} ms); expected after T0 + 45 s"
act_ms=$ACT_MS
watch_pod restarted $((T0_MS + (LEASE_SECONDS + KILL_AFTER_S + TOLERATION_SECONDS + 15) * 1000))
[ -n "$EVICT_MS" ] || fail "pod $NS/restarted not evicted by T0 + $((LEASE_SECONDS + KILL_AFTER_S + TOLERATION_SECONDS + 15)) s (b acting at T0 + ${act_ms} ms)"
server_s=$(deleted_after_t0 restarted)
grep "deadline from taint time" "$LOG_B" | matches -F "pod=\"$NS/restarted\"" \
  && fail "b logged 'deadline from taint time' for pod=\"$NS/restarted\" with --deadlines-from-taint-time=false"
log "part 2 (flag off): a killed at T0 + ${KILL_MS} ms, b acting at T0 + ${act_ms} ms, not terminating at T0 + 45 s, pod evicted (seen) at T0 + ${EVICT_MS} ms ($((EVICT_MS - act_ms)) ms after b acted), delete at T0 + ${server_s} s by the apiserver's clock"
stop_controller "$PID_B"
forget_pid "$PID_B"
echo "PASS: $TEST_NAME"
