#!/usr/bin/env bash
# End to end: time-boxed holds (issue 32 item 3) on the real API server.
#   - A node annotated taint-eviction-controller/hold-until: <now + 60 s>, then tainted: its pod
#     is not evicted while the hold lasts (/debug/evictions: waiting, why hold; a Normal
#     TaintEvictionHeld event; the held_evictions gauge), and is evicted once it ends; its
#     /debug/history record says "waited Ns: hold".
#   - A malformed value: a Warning TaintEvictionHoldIgnored event on the Node, and the pod goes
#     as scheduled (at once).
#   - With `maxHold: 20s` in the policy, a hold an hour ahead ends 20 s after the eviction was
#     due.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
readonly HOLD_S=60 MAX_HOLD_S=20
readonly ANNOTATION=taint-eviction-controller/hold-until

setup_rbac
node() { echo "tec-e2e-hold-$1-$SUFFIX"; }
at() { date -u -d "+$1 seconds" +%Y-%m-%dT%H:%M:%SZ; }
annotate() { k annotate --overwrite node "$1" "$ANNOTATION=$2" >/dev/null || fail "cannot annotate $1"; }
for n in bad held capped; do make_node "$(node "$n")"; done
make_pod bad1 "$(node bad)"
make_pod held1 "$(node held)"
make_pod capped1 "$(node capped)"

# node_events NODE REASON: "type|message" of the Events with REASON about the Node.
node_events() {
  k -n default get events \
    --field-selector "reason=$2,involvedObject.kind=Node,involvedObject.name=$1" \
    -o jsonpath='{range .items[*]}{.type}|{.message}{"\n"}{end}'
}

start_controller hold
wait_acting "$CONTROLLER_LOG"

# --- a malformed value: ignored with a Warning on the node, the pod goes at once ---
annotate "$(node bad)" tomorrow
taint "$(node bad)" testTaint1=test1:NoExecute
wait_terminating bad1 30
deadline=$((SECONDS + 30))
until [ -n "$(node_events "$(node bad)" TaintEvictionHoldIgnored)" ]; do
  [ "$SECONDS" -lt "$deadline" ] || fail "no TaintEvictionHoldIgnored event on node $(node bad) within 30 s"
  sleep 0.5
done
ev=$(node_events "$(node bad)" TaintEvictionHoldIgnored)
[ "$ev" = "Warning|Ignoring the hold-until annotation of $(node bad): \"tomorrow\" is not an RFC 3339 time; evictions go as scheduled" ] \
  || fail "unexpected event: $ev"
grep -q "ignoring the hold-until annotation node=\"$(node bad)\"" "$CONTROLLER_LOG" \
  || fail "the ignored annotation is not logged"
log "malformed: $ev; pod evicted at once"

# --- a hold 60 s ahead: the pod waits, then goes ---
annotate "$(node held)" "$(at "$HOLD_S")"
t_hold=$(($(date +%s) + HOLD_S))
taint "$(node held)" testTaint1=test1:NoExecute
deadline=$((SECONDS + 30))
until [ "$(eviction_state held1)" = waiting/hold ]; do
  [ "$SECONDS" -lt "$deadline" ] || fail "held1 is $(eviction_state held1) in /debug/evictions, expected waiting/hold"
  sleep 0.5
done
wait_metric taint_eviction_controller_held_evictions 'v == 1' 30
deadline=$((SECONDS + 30))
until [ -n "$(events_with_reason held1 TaintEvictionHeld)" ]; do
  [ "$SECONDS" -lt "$deadline" ] || fail "no TaintEvictionHeld event for $NS/held1 within 30 s"
  sleep 0.5
done
ev=$(events_with_reason held1 TaintEvictionHeld)
[[ "$ev" == "Normal|Eviction of Pod $NS/held1 held: due at "*", waits until "*" for the hold-until annotation of node $(node held) ("* ]] \
  || fail "unexpected event: $ev"
log "held: /debug/evictions waiting/hold; $ev"
left=$((t_hold - $(date +%s) - 5))
[ "$left" -gt 10 ] || fail "the hold has only $left s left: the machine is too slow to check it"
assert_not_terminating_for "$left" held1
wait_terminating held1 40
log "held1 not evicted during the hold, evicted after it"
# The history record's policy lines name the wait (the hold's part of it, in whole seconds or
# with a tenth: "waited 58.2s: hold").
deadline=$((SECONDS + 30))
until waited=$(curl "${METRICS_CURL[@]}" -fsS --max-time 10 "$METRICS_URL/debug/history?pod=$NS%2Fheld1" |
  python3 -c 'import json, re, sys
recs = json.load(sys.stdin)["records"]
lines = [l for r in recs for l in r["policy"] if re.fullmatch(r"waited [0-9.]+s: hold", l)]
print(lines[0] if lines else "")') && [ -n "$waited" ]; do
  [ "$SECONDS" -lt "$deadline" ] || fail "no \"waited ...: hold\" line in /debug/history for $NS/held1 within 30 s"
  sleep 0.5
done
secs=${waited#waited }
secs=${secs%%s:*}
python3 -c "import sys; sys.exit(0 if float('$secs') >= $HOLD_S - 20 else 1)" \
  || fail "the history says \"$waited\": less than the hold's $HOLD_S s - 20 s"
log "history: $waited"
wait_metric taint_eviction_controller_held_evictions 'v == 0' 30

# --- maxHold: a hold an hour ahead ends 20 s after the eviction was due ---
stop_controller "$CONTROLLER_PID"
policy="$WORK/policy.yaml"
printf '%s\nmaxHold: %ss\n' "$POLICY_HEADER" "$MAX_HOLD_S" >"$policy"
start_controller capped --policy "$policy"
wait_acting "$CONTROLLER_LOG"
annotate "$(node capped)" "$(at 3600)"
t_due=$SECONDS
taint "$(node capped)" testTaint1=test1:NoExecute
assert_not_terminating_for $((MAX_HOLD_S - 8)) capped1
wait_terminating capped1 40
log "maxHold ${MAX_HOLD_S}s: a hold an hour ahead ended, pod evicted $((SECONDS - t_due)) s after its taint"
ev=$(events_with_reason capped1 TaintEvictionHeld)
[[ "$ev" == *"cut at maxHold ${MAX_HOLD_S}s)|"* ]] || fail "the Held event does not say maxHold cut it: $ev"

stop_controller "$CONTROLLER_PID"
echo "PASS: $TEST_NAME"
