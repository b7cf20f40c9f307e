#!/usr/bin/env bash
# End to end, the eviction history (issue 32 item 5), against the local kube-apiserver with the
# controller running as the deploy/ ServiceAccount:
#   - three pods on three nodes tainted testTaint1=test1:NoExecute: "delayed" tolerates it for
#     10 s (evicted after 10 s, not before), "now" does not tolerate it (evicted at once),
#     "cancelled" tolerates it for 300 s and its node is untainted before that (not evicted);
#   - GET /debug/history on the metrics port (HTTPS, the metrics reader's token) then holds the
#     three records with the right fields (result, toleration, taints, uid, node, times,
#     attempts), filters by pod= and node=, refuses an unknown parameter (400) and a request
#     without a token (401);
#   - the controller's log has one line per record on the "history" logger whose message is
#     that record's JSON.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

setup_rbac
N_DELAY="tec-e2e-hist-delay-$SUFFIX"
N_NOW="tec-e2e-hist-now-$SUFFIX"
N_CANCEL="tec-e2e-hist-cancel-$SUFFIX"
for n in "$N_DELAY" "$N_NOW" "$N_CANCEL"; do make_node "$n"; done
make_pod delayed "$N_DELAY" "$(toleration testTaint1 test1 10)"
make_pod now "$N_NOW"
make_pod cancelled "$N_CANCEL" "$(toleration testTaint1 test1 300)"
DELAYED_UID=$(pod_uid delayed)
NOW_UID=$(pod_uid now)
CANCELLED_UID=$(pod_uid cancelled)

start_controller main
wait_acting "$CONTROLLER_LOG"
log "controller acting; metrics at $METRICS_URL"

history_json() { curl "${METRICS_CURL[@]}" -fsS --max-time 10 "$METRICS_URL/debug/history${1:-}"; }
py() { python3 -c "import json, sys, datetime; doc = json.load(sys.stdin); $1"; }

taint "$N_CANCEL" testTaint1=test1:NoExecute
wait_scheduled "$CONTROLLER_LOG" cancelled 60
taint "$N_NOW" testTaint1=test1:NoExecute
wait_terminating now 60
log "now: evicted at once"
taint "$N_DELAY" testTaint1=test1:NoExecute
wait_scheduled "$CONTROLLER_LOG" delayed 60
assert_not_terminating_for 5 delayed
wait_terminating delayed 90
log "delayed: evicted after its 10 s"
k taint nodes "$N_CANCEL" testTaint1- >/dev/null || fail "cannot untaint $N_CANCEL"
wait_event cancelled "Cancelling deletion of Pod $NS/cancelled" 60
assert_not_terminating_for 5 cancelled
log "cancelled: its eviction was cancelled by the untaint"

# --- /debug/history: the three records ---
deadline=$((SECONDS + 60))
until [ "$(history_json | py "print(sum(1 for r in doc['records'] if r['pod'].startswith('$NS/')))")" -eq 3 ]; do
  [ "$SECONDS" -lt "$deadline" ] || fail "not 3 records of $NS in /debug/history within 60 s: $(history_json)"
  sleep 0.5
done
doc=$(history_json) || fail "GET /debug/history failed"
verdict=$(py "
def t(s): return datetime.datetime.fromisoformat(s.replace('Z', '+00:00')).timestamp()
recs = {r['pod']: r for r in doc['records'] if r['pod'].startswith('$NS/')}
tol = lambda s: {'key': 'testTaint1', 'operator': 'Equal', 'value': 'test1', 'effect': 'NoExecute', 'tolerationSeconds': s}
want = {
  '$NS/delayed': {'uid': '$DELAYED_UID', 'node': '$N_DELAY', 'toleration': tol(10), 'result': 'deleted', 'attempts': 1, 'delay': 10},
  '$NS/now': {'uid': '$NOW_UID', 'node': '$N_NOW', 'toleration': None, 'result': 'deleted', 'attempts': 1, 'delay': 0},
  '$NS/cancelled': {'uid': '$CANCELLED_UID', 'node': '$N_CANCEL', 'toleration': tol(300), 'result': 'cancelled_untainted', 'attempts': 0, 'delay': 300},
}
keys = ['pod', 'uid', 'node', 'taints', 'toleration', 'scheduledAt', 'due', 'done', 'attempts', 'policy', 'result', 'lastError']
problems = []
if list(doc.keys()) != ['generatedAt', 'capacity', 'total', 'records']: problems.append('document keys %s' % list(doc.keys()))
if doc['capacity'] != 1000 or doc['total'] < 3: problems.append('capacity %s total %s' % (doc['capacity'], doc['total']))
for pod, w in want.items():
  r = recs.get(pod)
  if r is None: problems.append(pod + ' missing'); continue
  if list(r.keys()) != keys: problems.append(pod + ' keys %s' % list(r.keys()))
  for k in ('uid', 'node', 'toleration', 'result', 'attempts'):
    if r[k] != w[k]: problems.append('%s %s %r != %r' % (pod, k, r[k], w[k]))
  if r['taints'] != ['testTaint1=test1:NoExecute']: problems.append(pod + ' taints %s' % r['taints'])
  if r['policy'] != [] or r['lastError'] != '': problems.append(pod + ' policy/lastError %s %r' % (r['policy'], r['lastError']))
  if abs(t(r['due']) - t(r['scheduledAt']) - w['delay']) > 0.5: problems.append(pod + ' due %s scheduled %s' % (r['due'], r['scheduledAt']))
  if w['result'] == 'deleted' and not (0 <= t(r['done']) - t(r['due']) < 30): problems.append(pod + ' done %s due %s' % (r['done'], r['due']))
  if w['result'] == 'cancelled_untainted' and not t(r['done']) < t(r['due']): problems.append(pod + ' done after due')
print('; '.join(problems) or 'ok')" <<<"$doc")
[ "$verdict" = ok ] || fail "/debug/history: $verdict: $doc"
log "/debug/history: delayed deleted after 10 s, now deleted at once, cancelled cancelled_untainted"

# --- filters, a bad query, no token ---
n=$(history_json "?pod=$NS%2Fnow" | py "print(len(doc['records']))")
[ "$n" = 1 ] || fail "?pod=$NS/now lists $n records"
n=$(history_json "?node=$N_CANCEL" | py "print(','.join(r['pod'] for r in doc['records']))")
[ "$n" = "$NS/cancelled" ] || fail "?node=$N_CANCEL lists: $n"
n=$(history_json "?pod=$NS/delayed&node=$N_NOW" | py "print(len(doc['records']))")
[ "$n" = 0 ] || fail "?pod=$NS/delayed&node=$N_NOW lists $n records"
code=$(curl "${METRICS_CURL[@]}" -sS -o "$WORK/bad.txt" -w '%{http_code}' --max-time 10 "$METRICS_URL/debug/history?limit=3")
[ "$code" = 400 ] || fail "?limit=3: HTTP $code, expected 400"
grep -q "unknown query parameter" "$WORK/bad.txt" || fail "?limit=3 says: $(cat "$WORK/bad.txt")"
code=$(curl -k -sS -o /dev/null -w '%{http_code}' --max-time 10 "$METRICS_URL/debug/history")
[ "$code" = 401 ] || fail "/debug/history without a token: HTTP $code, expected 401"
log "filters pod= and node= work; ?limit=3 is a 400; no token is a 401"

# --- the log lines: one per record, its message the record's JSON ---
verdict=$(python3 -c "
import json, re, sys
doc = json.loads(sys.argv[1])
recs = {r['pod']: r for r in doc['records'] if r['pod'].startswith('$NS/')}
lines = [m.group(1) for m in (re.match(r'^\S+ info\s+history\s+(\{.*\})$', l.rstrip('\n')) for l in open(sys.argv[2])) if m]
logged = [json.loads(l) for l in lines]
mine = [r for r in logged if r['pod'].startswith('$NS/')]
if len(mine) != 3: print('%d history lines for $NS: %s' % (len(mine), lines))
elif any(recs.get(r['pod']) != r for r in mine): print('a line differs from its record: %s' % lines)
else: print('ok')" "$doc" "$CONTROLLER_LOG")
[ "$verdict" = ok ] || fail "history log lines: $verdict"
log "the log has the three records as JSON lines on the \"history\" logger"

stop_controller "$CONTROLLER_PID"
echo "PASS: $TEST_NAME"
