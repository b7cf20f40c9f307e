#!/usr/bin/env bash
# End to end: the storm breaker's settling time (issue 32 item 4) on the real API server. With
# `stormBreaker: {maxTaintedNodesPercent: 50, settleSeconds: 15}` and no rate limit, 10 nodes
# of ours with a pod each (no tolerations), tainting one of them and then 5 more evicts
# nothing: each eviction waits (why settling) until its taint is 15 s old, by which time the
# sixth taint has opened the breaker (why storm_breaker). Without the settling time the pod of
# the first node would be gone before the breaker opens (README "Storm breaker"). The plugin's
# preview says so before the first taint. When the tainting itself took longer than the
# settling time (11 s for six `kubectl taint` calls on a loaded machine) the run proves
# nothing: it runs again (lib.sh again), never red for that.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
readonly OURS=10 SETTLE_S=15 WATCH_S=30

setup_rbac
others=$(k get nodes -o name | wc -l) || fail "cannot list nodes"
total=$((others + OURS))
open_n=$(((total * 6 + 9) / 10))  # ceil(60%): more than 50%, opens
[ "$open_n" -le "$OURS" ] || fail "$others other nodes in the cluster: $OURS of ours cannot reach 60%"
log "$total nodes ($others not ours): tainting $open_n one after another"

node() { echo "tec-e2e-settle-$1-$SUFFIX"; }
for i in $(seq 1 "$OURS"); do
  make_node "$(node "$i")"
  make_pod "p$i" "$(node "$i")"
done

policy="$WORK/policy.yaml"
cat >"$policy" <<EOT
$POLICY_HEADER
stormBreaker:
  maxTaintedNodesPercent: 50
  settleSeconds: $SETTLE_S
EOT
start_controller settle --policy "$policy"
wait_acting "$CONTROLLER_LOG"

# The plugin's preview of the first taint under this policy says its pod waits for the
# settling time (README "kubectl plugin"), as the controller then makes it wait.
plugin_bin="${TEC_PLUGIN_BIN:-$(dirname "$TEC_BIN")/kubectl-taint_eviction}"
preview=$(timeout 60 "$plugin_bin" preview "$(node 1)" --taint testTaint1=test1:NoExecute \
  --policy "$policy" 2>&1) || fail "preview failed: $preview"
log "preview of $(node 1):"$'\n'"$preview"
grep -q "^$NS  *p1  *$(node 1)  *in ${SETTLE_S}s .*; settling: waits until its taints are ${SETTLE_S}s old (stormBreaker.settleSeconds)\$" \
  <<<"$preview" || fail "preview does not say p1 waits ${SETTLE_S}s for the settling time"
grep -q "; settling time ${SETTLE_S}s: 1 eviction waits for it\$" <<<"$preview" \
  || fail "preview's storm breaker line does not count the settling eviction"

t0=$SECONDS
taint "$(node 1)" testTaint1=test1:NoExecute
# Right after the first taint its pod's eviction is due and waits for the taint to settle.
first_why=none
until [ "$first_why" != none ] || [ $((SECONDS - t0)) -ge 6 ]; do
  first_why=$(eviction_state p1) || fail "GET /debug/evictions failed"
  sleep 0.3
done
if [ "$first_why" != none ]; then
  [ "$first_why" = waiting/settling ] || fail "p1 is $first_why right after its taint, expected waiting/settling"
  log "p1 after its taint: $first_why"
else
  log "the machine is slow: p1 was not listed within 6 s, its settling not checked here"
fi
# The other five in one kubectl call: they open the breaker together.
rest=()
for i in $(seq 2 "$open_n"); do rest+=("$(node "$i")"); done
k taint nodes "${rest[@]}" testTaint1=test1:NoExecute >/dev/null || fail "cannot taint ${rest[*]}"
took=$((SECONDS - t0))
log "tainted $(node 1), then $((open_n - 1)) more, in $took s"
# SECONDS counts whole seconds: 2 s of margin for the breaker to see the last taint.
[ "$took" -lt $((SETTLE_S - 2)) ] \
  || again "tainting took $took s, not less than the settling time ($SETTLE_S s) less 2 s"
wait_metric taint_eviction_controller_storm_breaker_open 'v == 1' 30
mapfile -t all < <(for i in $(seq 1 "$OURS"); do echo "p$i"; done)
assert_not_terminating_for "$WATCH_S" "${all[@]}"
log "nothing evicted over $WATCH_S s; breaker open"
# Every due eviction is now held by the open breaker.
wait_metric taint_eviction_controller_evictions_waiting "v == $open_n" 30
wait_metric taint_eviction_controller_settling_evictions 'v == 0' 30
for i in $(seq 1 "$open_n"); do
  w=$(eviction_state "p$i") || fail "GET /debug/evictions failed"
  [ "$w" = waiting/storm_breaker ] || fail "p$i is $w in /debug/evictions, expected waiting/storm_breaker"
done
log "/debug/evictions: the $open_n evictions wait, why storm_breaker"

stop_controller "$CONTROLLER_PID"
echo "PASS: $TEST_NAME"
