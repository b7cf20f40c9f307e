#!/usr/bin/env bash
# End to end: the storm breaker's settling time (issue 32 item 4) on the real API server. With
# `stormBreaker: {maxTaintedNodesPercent: 50, settleSeconds: 10}` and no rate limit, 10 nodes
# of ours with a pod each (no tolerations), tainting 6 of them one `kubectl taint` after
# another evicts nothing: each eviction waits (why settling) until its taint is 10 s old, by
# which time the sixth taint has opened the breaker (why storm_breaker). Without the settling
# time the pods of the first nodes would be gone before the breaker opens (README "Storm
# breaker"). The plugin's preview says so before the first taint.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
readonly OURS=10 SETTLE_S=10 WATCH_S=30

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
until [ "$first_why" != none ] || [ $((SECONDS - t0)) -ge $((SETTLE_S - 2)) ]; do
  first_why=$(eviction_state p1) || fail "GET /debug/evictions failed"
  sleep 0.3
done
if [ $((SECONDS - t0)) -lt $((SETTLE_S - 2)) ]; then
  [ "$first_why" = waiting/settling ] || fail "p1 is $first_why right after its taint, expected waiting/settling"
  log "p1 after its taint: $first_why"
else
  log "the machine is slow: p1 was not listed within $((SETTLE_S - 2)) s, its settling not checked"
fi
for i in $(seq 2 "$open_n"); do taint "$(node "$i")" testTaint1=test1:NoExecute; done
log "tainted $open_n nodes one after another in $((SECONDS - t0)) s"
[ $((SECONDS - t0)) -lt "$SETTLE_S" ] \
  || log "tainting took $((SECONDS - t0)) s, longer than the settling time: the test may be moot"
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
