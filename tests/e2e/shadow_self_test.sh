#!/usr/bin/env bash
# End to end: --shadow against the real API server, with no built-in taint manager running:
# the test plays kube-controller-manager 1.20's taint manager by hand (a TaintManagerEviction
# "Marking for deletion" Event from source taint-controller, whose involvedObject has no uid,
# then a graceful DELETE). /debug/shadow and the shadow metrics must report:
# - p1, which we would evict and "they" evict at the same time: agreed;
# - p2, which we would evict and nobody deletes: only_us after the window (3 s);
# - p3, which tolerates the taint forever but "they" evict: only_them;
# - p4, tolerating forever and left alone: nothing.
# Its history of the built-in's evictions (builtinEvictions) holds p1 (agreed) and p3
# (only_them), not p2. The controller writes nothing: no PATCH, PUT, POST or DELETE among its
# requests (api_requests_total; --leader-elect=false, so not even a Lease). The plugin's `shadow`
# verb shows the same report (and `shadow --history` the history), and says so when the
# controller is not in shadow mode.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
command -v jq >/dev/null 2>&1 || fail "jq not found on PATH"

setup_rbac
NODE="tec-e2e-shadow-$SUFFIX"
make_node "$NODE"
make_pod p1 "$NODE"
make_pod p2 "$NODE"
make_pod p3 "$NODE" "$(toleration testTaint1 test1)"
make_pod p4 "$NODE" "$(toleration testTaint1 test1)"

# The "built-in" acts through kubectl proxy (admin), so its event and DELETE follow each other
# within milliseconds instead of a kubectl start-up each.
k proxy --port=0 >"$WORK/proxy.log" 2>&1 &
PROXY_PID=$!
on_cleanup() { kill "$PROXY_PID" 2>/dev/null; }
deadline=$((SECONDS + 30))
until PROXY=$(sed -n 's|^Starting to serve on \(.*\)$|http://\1|p' "$WORK/proxy.log") && [ -n "$PROXY" ]; do
  [ "$SECONDS" -lt "$deadline" ] || fail "kubectl proxy did not start: $(cat "$WORK/proxy.log")"
  sleep 0.1
done

# their_eviction POD: what kube-controller-manager 1.20's taint manager does.
their_eviction() {
  local now
  now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  curl -fsS --max-time 20 -X POST -H 'Content-Type: application/json' \
    "$PROXY/api/v1/namespaces/$NS/events" -d @- >/dev/null <<EOT || fail "cannot write the event for $1"
{"apiVersion":"v1","kind":"Event",
 "metadata":{"name":"$1.shadow-$SUFFIX","namespace":"$NS"},
 "involvedObject":{"kind":"Pod","namespace":"$NS","name":"$1"},
 "reason":"TaintManagerEviction","message":"Marking for deletion Pod $NS/$1",
 "source":{"component":"taint-controller"},"type":"Normal","count":1,
 "firstTimestamp":"$now","lastTimestamp":"$now"}
EOT
  curl -fsS --max-time 20 -X DELETE "$PROXY/api/v1/namespaces/$NS/pods/$1" >/dev/null \
    || fail "cannot delete $1"
}

start_controller shadow --shadow --shadow-window=3s --leader-elect=false
wait_acting "$CONTROLLER_LOG"
[ "$(metric 'taint_eviction_controller_shadow_pending')" = 0 ] \
  || fail "shadow_pending is not exported at 0 with --shadow"
taint "$NODE" testTaint1=test1:NoExecute

would_delete() { grep -q "dry run: would delete pod=\"$NS/$1\"" "$CONTROLLER_LOG"; }
deadline=$((SECONDS + 60))
until would_delete p1; do
  [ "$SECONDS" -lt "$deadline" ] || fail "no 'would delete' for p1 within 60 s"
  sleep 0.05
done
their_eviction p1
their_eviction p3
log "played the built-in taint manager for p1 and p3"

shadow() { curl "${METRICS_CURL[@]}" -fsS --max-time 5 "$METRICS_URL/debug/shadow"; }
deadline=$((SECONDS + 60))
until [ "$(shadow | jq -c '[.counts.agreed, .counts.onlyUs, .counts.onlyThem, .counts.pending]')" = "[1,1,1,0]" ]; do
  [ "$SECONDS" -lt "$deadline" ] || fail "/debug/shadow after 60 s: $(shadow)"
  sleep 0.5
done
doc=$(shadow)
log "/debug/shadow: $doc"
[ "$(jq '.windowSeconds' <<<"$doc")" = 3 ] || fail "windowSeconds is not 3"
[ "$(jq '.counts.cancelledBoth' <<<"$doc")" = 0 ] || fail "cancelledBoth is not 0"
[ "$(jq -r '[.disagreements[] | .outcome + " " + .pod] | sort | join(",")' <<<"$doc")" = \
  "only_them $NS/p3,only_us $NS/p2" ] || fail "the disagreements are not p3 (only_them) and p2 (only_us)"
only_us=$(jq -c '.disagreements[] | select(.outcome == "only_us")' <<<"$doc")
[ "$(jq -r .node <<<"$only_us")" = "$NODE" ] || fail "only_us: node: $only_us"
[ "$(jq -c .taints <<<"$only_us")" = '["testTaint1=test1:NoExecute"]' ] || fail "only_us: taints: $only_us"
[ "$(jq -r .uid <<<"$only_us")" = "$(pod_uid p2)" ] || fail "only_us: uid: $only_us"
[[ "$(jq -r .ours <<<"$only_us")" == "would delete at "* ]] || fail "only_us: ours: $only_us"
[ "$(jq -r .theirs <<<"$only_us")" = none ] || fail "only_us: theirs: $only_us"
only_them=$(jq -c '.disagreements[] | select(.outcome == "only_them")' <<<"$doc")
[ "$(jq -r .ours <<<"$only_them")" = none ] || fail "only_them: ours: $only_them"
[ "$(jq -c .taints <<<"$only_them")" = '["testTaint1=test1:NoExecute"]' ] \
  || fail "only_them: the node's taints: $only_them"
[ "$(jq -r .uid <<<"$only_them")" != "" ] || fail "only_them: uid: $only_them"
[[ "$(jq -r .theirs <<<"$only_them")" == "deleted at "*" (event: Marking for deletion Pod $NS/p3)" ]] \
  || fail "only_them: theirs: $only_them"
# The built-in's history: p1 agreed, p3 only_them (p1 was evicted first, so listed first).
[ "$(jq -r '[.builtinEvictions[] | .verdict + " " + .pod + " " + (.oursAt | sub("^[0-9]{4}-.*Z$"; "T"))] | join(",")' <<<"$doc")" = \
  "agreed $NS/p1 T,only_them $NS/p3 never" ] || fail "builtinEvictions: $(jq -c .builtinEvictions <<<"$doc")"
[ "$(jq -r '.builtinEvictions[0] | .evidence + "|" + .uid' <<<"$doc")" = \
  "event: Marking for deletion Pod $NS/p1|$(pod_uid p1)" ] || fail "builtinEvictions: p1: $(jq -c .builtinEvictions <<<"$doc")"
[ "$(jq '.builtinEvictionsDropped' <<<"$doc")" = 0 ] || fail "builtinEvictionsDropped is not 0"
# The plugin's shadow verb reads the same report (the admin's token, as plugin_test sends it).
plugin_bin="${TEC_PLUGIN_BIN:-$(dirname "$TEC_BIN")/kubectl-taint_eviction}"
out=$(timeout 60 "$plugin_bin" shadow --controller-url "$METRICS_URL" 2>&1) \
  || fail "kubectl taint-eviction shadow failed: $out"
log "kubectl taint-eviction shadow:"$'\n'"$out"
grep -q "^Shadow mode, $METRICS_URL (window 3s): agreed 1, only_them 1 (.*), only_us 1 (.*), cancelled_both 0, ambiguous 0 (.*), deleted_by_others 0, open 0\.\$" <<<"$out" \
  || fail "the plugin's shadow summary is not agreed 1, only_them 1, only_us 1"
grep -q "^only_them  *$NS  *p3  *$NODE  *testTaint1=test1:NoExecute  *none  *deleted at " <<<"$out" \
  || fail "the plugin's shadow table has no only_them row for p3"
grep -q "^only_us  *$NS  *p2  *$NODE  *testTaint1=test1:NoExecute  *would delete at .*  *none  " <<<"$out" \
  || fail "the plugin's shadow table has no only_us row for p2"
out=$(timeout 60 "$plugin_bin" shadow -n "$NS" -o json --controller-url "$METRICS_URL" 2>&1) \
  || fail "kubectl taint-eviction shadow -o json failed: $out"
[ "$(jq -r '[.disagreements[] | .outcome + " " + .pod] | sort | join(",")' <<<"$out")" = \
  "only_them $NS/p3,only_us $NS/p2" ] || fail "the plugin's shadow -o json: $out"
out=$(timeout 60 "$plugin_bin" shadow --history --controller-url "$METRICS_URL" 2>&1) \
  || fail "kubectl taint-eviction shadow --history failed: $out"
log "kubectl taint-eviction shadow --history:"$'\n'"$out"
grep -q "^Shadow mode, $METRICS_URL (window 3s): 2 evictions by the built-in taint manager, newest first\.\$" <<<"$out" \
  || fail "the plugin's shadow --history summary is not 2 evictions"
[ "$(awk 'rows { print $3 " " $7 } /^DELETED / { rows = 1 }' <<<"$out" | paste -sd,)" = "p3 only_them,p1 agreed" ] \
  || fail "the plugin's shadow --history rows are not p3 (only_them) then p1 (agreed)"
out=$(timeout 60 "$plugin_bin" shadow --history -n "$NS" -o json --controller-url "$METRICS_URL" 2>&1) \
  || fail "kubectl taint-eviction shadow --history -o json failed: $out"
[ "$(jq -r '[.builtinEvictions[] | .verdict + " " + .pod] | join(",")' <<<"$out")" = \
  "only_them $NS/p3,agreed $NS/p1" ] || fail "the plugin's shadow --history -o json: $out"
grep -q "shadow: only_us pod=$NS/p2 " "$CONTROLLER_LOG" || fail "no log line for p2's only_us"
grep -q "shadow: only_them pod=$NS/p3 " "$CONTROLLER_LOG" || fail "no log line for p3's only_them"

# Nothing more for p4 (or anyone) over a few windows.
sleep 10
[ "$(shadow | jq -c '[.counts.agreed, .counts.onlyUs, .counts.onlyThem, .counts.pending]')" = "[1,1,1,0]" ] \
  || fail "/debug/shadow changed with nothing happening: $(shadow)"
for o in agreed only_us only_them; do
  [ "$(metric "taint_eviction_controller_shadow_decisions_total{outcome=\"$o\"}")" = 1 ] \
    || fail "shadow_decisions_total{outcome=\"$o\"} is not 1"
done
[ "$(metric 'taint_eviction_controller_shadow_agreement_delay_seconds_count')" = 1 ] \
  || fail "shadow_agreement_delay_seconds has not one observation"
writes=$(curl "${METRICS_CURL[@]}" -fsS --max-time 5 "$METRICS_URL/metrics" \
  | awk '/^taint_eviction_controller_api_requests_total\{/ && /verb="(PATCH|PUT|POST|DELETE)"/ { n += $2 } END { print n + 0 }')
[ "$writes" = 0 ] || fail "the controller sent $writes write requests in shadow mode"
terminating p2 && fail "p2 was deleted in shadow mode"
[ -z "$(events p2)" ] || fail "p2 got TaintManagerEvent events in shadow mode"
stop_controller "$CONTROLLER_PID"

# Without --shadow: no shadow metrics, no /debug/shadow.
start_controller plain --dry-run --leader-elect=false
code=$(curl "${METRICS_CURL[@]}" -s -o /dev/null -w '%{http_code}' --max-time 5 "$METRICS_URL/debug/shadow")
[ "$code" = 404 ] || fail "/debug/shadow without --shadow answered $code"
rc=0
out=$(timeout 60 "$plugin_bin" shadow --controller-url "$METRICS_URL" 2>&1) || rc=$?
[ "$rc" = 1 ] || fail "the plugin's shadow without --shadow exited $rc: $out"
grep -q "^error: $METRICS_URL does not run in shadow mode (--shadow, the chart's shadow: true): " <<<"$out" \
  || fail "the plugin's shadow without --shadow: $out"
[ "$(metric 'taint_eviction_controller_shadow_pending')" = absent ] \
  || fail "shadow metrics exported without --shadow"
stop_controller "$CONTROLLER_PID"
echo "PASS: $TEST_NAME"
