#!/usr/bin/env bash
# End to end: the policy's eviction rate on the real API server. 2,000 pods on 20 nodes, every
# node tainted at once, `rateLimit: {evictionsPerSecond: 50, burst: 1}` and the API client's
# own QPS limit lifted: the evictions start at no more than 50/s + 10% and no less than 60% of
# it (from the controller's "deleting pod" lines, millisecond timestamps), nothing is lost, and
# untainting half the nodes mid-run cancels their waiting evictions: those pods stay, and every
# pod on the other nodes is evicted.
#
# A round whose own untaint landed after every eviction had started (kubectl took over 30 s on
# a loaded machine: make test at d0a472e) tested no cancellation: it is not a failure of the
# controller, so the test runs a fresh round (new nodes, new pods, same controller), up to 3.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
readonly NODE_COUNT=20 PER_NODE=100 RATE=50 ROUNDS=3

setup_rbac
policy="$WORK/policy.yaml"
cat >"$policy" <<EOT
apiVersion: taint-eviction-controller/v1alpha1
kind: EvictionPolicy
rateLimit:
  evictionsPerSecond: $RATE
  burst: 1
EOT
start_controller rate --policy "$policy" --kube-api-qps 0
wait_acting "$CONTROLLER_LOG" 120

total=$((NODE_COUNT * PER_NODE))
kept_half=$((NODE_COUNT * PER_NODE / 2))
upper="$(seq -s '|' $((NODE_COUNT / 2 + 1)) "$NODE_COUNT")"

# round R: nodes tec-e2e-rate-R-I-SUFFIX, pods rR-pI-J. Sets ROUND_RESULT to "tested" when it
# tested what it claims, "again" when the untaint came too late to cancel anything (the caller
# runs another round); fails the test otherwise. (Never called as `round || ...`: that would
# switch errexit off inside it.)
round() {
  local r=$1 i j
  node() { echo "tec-e2e-rate-$r-$1-$SUFFIX"; }
  started() { grep -c "deleting pod pod=\"$NS/r$r-" "$CONTROLLER_LOG" || true; }
  for i in $(seq 1 "$NODE_COUNT"); do make_node "$(node "$i")"; done
  # One kubectl call for all pods (a call per pod would take minutes on a loaded machine).
  for i in $(seq 1 "$NODE_COUNT"); do
    for j in $(seq 1 "$PER_NODE"); do
      printf -- '---\napiVersion: v1\nkind: Pod\nmetadata: {name: r%s-p%s-%s, namespace: %s}\nspec:\n  nodeName: %s\n  automountServiceAccountToken: false\n  containers: [{name: pause, image: registry.k8s.io/pause:3.9}]\n' \
        "$r" "$i" "$j" "$NS" "$(node "$i")"
    done
  done >"$WORK/pods.yaml"
  timeout 600 kubectl --request-timeout=60s create -f "$WORK/pods.yaml" >/dev/null || fail "cannot create the pods"
  log "round $r: created $total pods on $NODE_COUNT nodes"

  # One kubectl call for every node, so that they are tainted together.
  local all=() untaint=()
  for i in $(seq 1 "$NODE_COUNT"); do all+=("$(node "$i")"); done
  k taint nodes "${all[@]}" testTaint1=test1:NoExecute >/dev/null || fail "cannot taint nodes ${all[*]}"
  log "round $r: tainted $NODE_COUNT nodes"

  # Early in the run (a tenth of the pods started): untaint the second half of the nodes.
  local deadline=$((SECONDS + 300))
  until [ "$(started)" -ge $((total / 10)) ]; do
    [ "$SECONDS" -lt "$deadline" ] || fail "only $(started) evictions started within 300 s"
    sleep 0.2
  done
  # One kubectl call for the ten nodes: ten calls took over 30 s on a loaded machine.
  for i in $(seq $((NODE_COUNT / 2 + 1)) "$NODE_COUNT"); do untaint+=("$(node "$i")"); done
  local t0=$SECONDS
  k taint nodes "${untaint[@]}" testTaint1- >/dev/null || fail "cannot untaint nodes ${untaint[*]}"
  local at_untaint
  at_untaint=$(started)
  log "round $r: untainted nodes $((NODE_COUNT / 2 + 1))-$NODE_COUNT after $at_untaint starts (kubectl took $((SECONDS - t0)) s)"

  # Every pod on the nodes still tainted goes (nothing lost).
  evicted_on() {  # evicted_on FIRST LAST: pods with a deletionTimestamp on this round's nodes FIRST..LAST
    k -n "$NS" get pods -o jsonpath='{range .items[*]}{.spec.nodeName} {.metadata.deletionTimestamp}{"\n"}{end}' \
      | awk -v r="$r" -v a="$1" -v b="$2" '$2 != "" { split($1, f, "-"); if (f[4] == r && f[5] >= a && f[5] <= b) n++ } END { print n + 0 }'
  }
  deadline=$((SECONDS + 300))
  until [ "$(evicted_on 1 $((NODE_COUNT / 2)))" -eq "$kept_half" ]; do
    [ "$SECONDS" -lt "$deadline" ] || fail "only $(evicted_on 1 $((NODE_COUNT / 2)))/$kept_half pods on the tainted nodes evicted within 300 s"
    sleep 1
  done
  wait_metric taint_eviction_controller_evictions_waiting 'v == 0' 60

  # The untainted half: what had been sent before the untaint went, the rest was cancelled. An
  # eviction that had started (its "deleting pod" line) but whose DELETE still waited for a
  # connection when the untaint came is cancelled without a request ("cancelled means no
  # request"): the DELETEs the API server accepted (the sink's "deleted" lines) are what must
  # match the deletionTimestamps, and any started-but-not-deleted pod must be on an untainted node.
  local n_start on_untainted n_deleted
  n_start=$(started)
  on_untainted=$(evicted_on $((NODE_COUNT / 2 + 1)) "$NODE_COUNT")
  if [ "$on_untainted" -ge "$kept_half" ]; then
    if [ "$at_untaint" -ge "$total" ]; then
      log "round $r: the untaint landed after all $total evictions had started: nothing left to cancel, another round"
      ROUND_RESULT=again
      return 0
    fi
    fail "every pod on the untainted nodes was evicted, although only $at_untaint of $total had started when the untaint returned: nothing was cancelled"
  fi
  pods_of() { sed -n "s/.*$1 *pod=\"$NS\/\(r$r-p[0-9]*-[0-9]*\)\".*/\1/p" "$CONTROLLER_LOG" | sort -u; }
  sed -n "s/.*pod=\"$NS\/\(r$r-p[0-9]*-[0-9]*\)\" uid=[^ ]* deleted\$/\1/p" "$CONTROLLER_LOG" | sort -u >"$WORK/deleted"
  pods_of 'deleting pod' >"$WORK/started"
  n_deleted=$(wc -l <"$WORK/deleted")
  [ $((kept_half + on_untainted)) -eq "$n_deleted" ] \
    || fail "$n_deleted DELETEs accepted, but $kept_half + $on_untainted pods have a deletionTimestamp"
  comm -23 "$WORK/started" "$WORK/deleted" >"$WORK/withdrawn"
  if grep -qvE "^r$r-p($upper)-" "$WORK/withdrawn"; then
    fail "started but not deleted on a node still tainted: $(grep -vE "^r$r-p($upper)-" "$WORK/withdrawn" | head -5 | tr '\n' ' ')"
  fi
  log "round $r: $n_start evictions started, $n_deleted DELETEs accepted, $(wc -l <"$WORK/withdrawn") withdrawn in flight by the untaint"
  local sleep_s=5
  deadline=$((SECONDS + sleep_s))
  while [ "$SECONDS" -lt "$deadline" ]; do
    [ "$(started)" -eq "$n_start" ] || fail "evictions kept starting after every due one was done"
    sleep 1
  done
  log "round $r: $kept_half pods on tainted nodes evicted; on the untainted ones $on_untainted started before the untaint, $((kept_half - on_untainted)) cancelled"

  # The rate: starts per second between the first and the last start of this round.
  local rate
  rate=$(grep "deleting pod pod=\"$NS/r$r-" "$CONTROLLER_LOG" | python3 -c '
import sys, datetime
ts = []
for line in sys.stdin:
    stamp = line.split()[0]
    ts.append(datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp())
print(f"{(len(ts) - 1) / (ts[-1] - ts[0]):.1f}")')
  log "round $r: measured start rate: $rate/s over $n_start evictions (limit $RATE/s)"
  # The limit is a ceiling: over it by more than 10% fails. The floor only catches a limiter that
  # throttles far below its setting: on a loaded 2-core machine the API server, not the limiter,
  # held a correct build at 42.7/s (make test at 2c0588b, beside two compilers). The exact pacing
  # is the token bucket's unit tests', on a manual clock.
  awk -v r="$rate" -v l="$RATE" 'BEGIN { exit !(r >= l * 0.6 && r <= l * 1.1) }' \
    || fail "the eviction rate was $rate/s, not between 60% and 110% of $RATE/s"
  ROUND_RESULT=tested
}

for r in $(seq 1 "$ROUNDS"); do
  ROUND_RESULT=
  round "$r"
  [ "$ROUND_RESULT" = tested ] && break
  [ "$ROUND_RESULT" = again ] || fail "round $r ended without a result"
  [ "$r" -lt "$ROUNDS" ] || fail "in $ROUNDS rounds the untaint never landed before every eviction had started (the machine is too slow to test cancellation)"
done

stop_controller "$CONTROLLER_PID"
echo "PASS: $TEST_NAME"
