#!/usr/bin/env bash
# End to end, pending evictions you can see (issue 15 item 5), against the local kube-apiserver
# with the controller running as the deploy/ ServiceAccount:
#   - a pod tolerating a taint for 300 s gets one Normal TaintEvictionScheduled event naming the
#     taint, the 300 s and a due time 300 s after the taint (+-10 s);
#   - GET /debug/evictions on the metrics port (HTTPS, the metrics reader's token) lists it:
#     pending, its uid, node, the node's taint and the same due time (ms precision);
#   - with a policy of one eviction per 100 s, untolerated pods on a second node wait: listed
#     as "waiting", why "rate_limit";
#   - through the apiserver's service proxy (the deploy/ Service, its "metrics" port), even as
#     the admin: the controller's 401, as the README says (the apiserver forwards no token;
#     skipped when this host has no non-loopback IPv4 address, which the apiserver would proxy
#     to);
#   - a standby replica answers too: "acting": false and nothing listed;
#   - a controller run with --scheduled-events=false records no such event (a pod scheduled for
#     eviction then gets only the upstream "Cancelling deletion" when its taint goes).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

setup_rbac
N_DELAY="tec-e2e-pend-delay-$SUFFIX"
N_RATE="tec-e2e-pend-rate-$SUFFIX"
N_QUIET="tec-e2e-pend-quiet-$SUFFIX"
for n in "$N_DELAY" "$N_RATE" "$N_QUIET"; do make_node "$n"; done
make_pod delayed "$N_DELAY" "$(toleration testTaint1 test1 300)"
for i in 1 2 3 4; do make_pod "rated-$i" "$N_RATE"; done
make_pod quiet "$N_QUIET" "$(toleration testTaint1 test1 300)"
DELAYED_UID=$(pod_uid delayed)

policy="$WORK/policy.yaml"
cat >"$policy" <<EOT
apiVersion: taint-eviction-controller/v1alpha1
kind: EvictionPolicy
rateLimit:
  evictionsPerSecond: 0.01
  burst: 1
EOT

# The apiserver proxies to an endpoint address, never to a loopback one: the metrics port
# listens on this host's first IPv4 address when it has one (not the bridge of a real-node
# cluster, 10.244.0.1, which the node tests running beside the e2e lanes add and remove).
HOST_IP=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -E '^[0-9]+(\.[0-9]+){3}$' | grep -v -e '^127\.' -e '^10\.244\.' | head -1) || true
METRICS_BIND_ADDRESS="${HOST_IP:-127.0.0.1}:0" start_controller main --policy "$policy"
MAIN_PID=$CONTROLLER_PID MAIN_LOG=$CONTROLLER_LOG MAIN_URL=$METRICS_URL
wait_acting "$MAIN_LOG"
log "controller acting; metrics at $MAIN_URL"

# evictions_json URL: the /debug/evictions document.
evictions_json() { curl "${METRICS_CURL[@]}" -fsS --max-time 10 "$1/debug/evictions"; }
# jq-less checks: python3 QUERY_SCRIPT < document; the script sees `doc` and prints a verdict.
py() { python3 -c "import json, sys, datetime; doc = json.load(sys.stdin); $1"; }
# epoch RFC3339: seconds since the epoch (fractions kept).
epoch() { python3 -c "import datetime, sys; print(datetime.datetime.fromisoformat(sys.argv[1].replace('Z', '+00:00')).timestamp())" "$1"; }

# --- the event ---
t_before=$(date +%s)
taint "$N_DELAY" testTaint1=test1:NoExecute
t_after=$(date +%s)
deadline=$((SECONDS + 60))
until [ -n "$(events_with_reason delayed TaintEvictionScheduled)" ]; do
  [ "$SECONDS" -lt "$deadline" ] || fail "no TaintEvictionScheduled event for $NS/delayed within 60 s"
  sleep 0.5
done
ev=$(events_with_reason delayed TaintEvictionScheduled)
[ "$(wc -l <<<"$ev")" -eq 1 ] || fail "more than one TaintEvictionScheduled event: $ev"
IFS='|' read -r ev_type ev_message ev_uid <<<"$ev"
[ "$ev_type" = Normal ] || fail "event type $ev_type, expected Normal"
[ "$ev_uid" = "$DELAYED_UID" ] || fail "event names uid $ev_uid, expected $DELAYED_UID"
re="^Pod $NS/delayed will be evicted at ([0-9T:-]+Z): taint testTaint1=test1:NoExecute, tolerationSeconds 300\$"
[[ "$ev_message" =~ $re ]] || fail "unexpected message: $ev_message"
ev_due=$(epoch "${BASH_REMATCH[1]}")
awk -v d="$ev_due" -v a="$t_before" -v b="$t_after" 'BEGIN { exit !(d >= a + 290 && d <= b + 310) }' \
  || fail "due time ${BASH_REMATCH[1]} is not 300 s (+-10 s) after the taint ($t_before..$t_after)"
log "event: $ev_message"

# --- /debug/evictions: the pending one ---
doc=$(evictions_json "$MAIN_URL") || fail "GET /debug/evictions failed"
verdict=$(py "
e = [x for x in doc['evictions'] if x['pod'] == '$NS/delayed']
due = datetime.datetime.fromisoformat(e[0]['due'].replace('Z', '+00:00')).timestamp() if e else 0
want = {'uid': '$DELAYED_UID', 'node': '$N_DELAY', 'taints': ['testTaint1=test1:NoExecute'],
        'state': 'pending', 'why': '', 'attempts': 0, 'lastError': ''}
bad = [k for k, v in want.items() if not e or e[0][k] != v]
if not doc['acting'] or doc['truncated'] or doc['total'] != len(doc['evictions']): print('bad header')
elif len(e) != 1: print('listed %d times' % len(e))
elif bad: print('wrong ' + ', '.join(bad) + ': ' + json.dumps(e[0]))
elif abs(due - $ev_due) >= 2: print('due %s is not the event\'s' % e[0]['due'])
else: print('ok')" <<<"$doc")
[ "$verdict" = ok ] || fail "/debug/evictions: $verdict: $doc"
log "/debug/evictions lists $NS/delayed: pending, due $(py "print([x['due'] for x in doc['evictions'] if x['pod'] == '$NS/delayed'][0])" <<<"$doc")"

# --- waiting: the rate limit ---
taint "$N_RATE" testTaint1=test1:NoExecute
waiting() {
  evictions_json "$MAIN_URL" | py "
print(sum(1 for x in doc['evictions'] if x['pod'].startswith('$NS/rated-') and x['state'] == 'waiting' and x['why'] == 'rate_limit'))"
}
deadline=$((SECONDS + 60))
until [ "$(waiting)" -eq 3 ]; do
  [ "$SECONDS" -lt "$deadline" ] || fail "not 3 evictions waiting for the rate limit within 60 s: $(evictions_json "$MAIN_URL")"
  sleep 0.5
done
log "one rated pod evicted at once, 3 listed as waiting (why rate_limit)"

# --- the apiserver's service proxy forwards no token: 401 (README "Pending evictions") ---
SVC=taint-eviction-controller-metrics
SVC_PORT=8443
STANDIN="tec-e2e-metrics-$SUFFIX"
on_cleanup() {
  k -n "$DEPLOY_NS" delete pod "$STANDIN" --grace-period=0 --force --ignore-not-found >/dev/null 2>&1
  k -n "$DEPLOY_NS" delete service "$SVC" --ignore-not-found >/dev/null 2>&1
  k -n "$DEPLOY_NS" delete endpoints "$SVC" --ignore-not-found >/dev/null 2>&1
}
if [ -z "$HOST_IP" ]; then
  log "SKIP the service proxy: this host has no non-loopback IPv4 address"
else
  metrics_port=${MAIN_URL##*:}
  k apply -f "$REPO_ROOT/deploy/service.yaml" >/dev/null || fail "cannot apply deploy/service.yaml"
  grep -q "name: metrics" "$REPO_ROOT/deploy/service.yaml" || fail "deploy/service.yaml names no metrics port"
  # No kubelet runs our pods here: the Service's endpoint is this process, by hand (and no
  # selector, so no endpoints controller rewrites it). The apiserver proxies only to an
  # address some pod of the namespace has as its IP: a stand-in pod gets ours.
  k -n "$DEPLOY_NS" patch service "$SVC" --type json -p '[{"op": "remove", "path": "/spec/selector"}]' >/dev/null \
    || fail "cannot drop the Service's selector"
  k apply -f - >/dev/null <<EOT || fail "cannot create the stand-in pod"
apiVersion: v1
kind: Pod
metadata:
  name: $STANDIN
  namespace: $DEPLOY_NS
spec:
  automountServiceAccountToken: false
  containers: [{name: pause, image: registry.k8s.io/pause:3.9}]
EOT
  k -n "$DEPLOY_NS" patch pod "$STANDIN" --subresource status --type merge \
    -p "{\"status\": {\"podIP\": \"$HOST_IP\", \"podIPs\": [{\"ip\": \"$HOST_IP\"}]}}" >/dev/null \
    || fail "cannot set the stand-in pod's IP"
  k apply -f - >/dev/null <<EOT || fail "cannot create the Endpoints"
apiVersion: v1
kind: Endpoints
metadata:
  name: $SVC
  namespace: $DEPLOY_NS
subsets:
- addresses: [{ip: $HOST_IP, targetRef: {kind: Pod, namespace: $DEPLOY_NS, name: $STANDIN}}]
  ports: [{name: metrics, port: $metrics_port, protocol: TCP}]
EOT
  # The apiserver drops the caller's Authorization header before it proxies: even the admin
  # gets the controller's 401.
  path="/api/v1/namespaces/$DEPLOY_NS/services/https:$SVC:$SVC_PORT/proxy/debug/evictions"
  out=$(k get --raw "$path" 2>&1) && fail "the proxy read $path without a token: $out"
  # kubectl prints a 401 as "Unauthorized" or (1.2x+) "You must be logged in to the server".
  grep -qiE 'unauthorized|must be logged in' <<<"$out" \
    || fail "expected 401 Unauthorized through the proxy, got: $out"
  log "kubectl get --raw $path: 401 (no token reaches the controller); the document needs a reader's token"
fi

# --- a standby answers with nothing ---
start_controller standby
doc=$(evictions_json "$METRICS_URL") || fail "the standby does not serve /debug/evictions"
verdict=$(py "print('ok' if not doc['acting'] and doc['total'] == 0 and doc['evictions'] == [] else 'listed')" <<<"$doc")
[ "$verdict" = ok ] || fail "the standby's /debug/evictions: $doc"
grep -q "acting: replayed" "$CONTROLLER_LOG" && fail "the standby acted although main holds the lease"
stop_controller "$CONTROLLER_PID"
log "a standby answers: acting false, nothing listed"

# --- --scheduled-events=false ---
stop_controller "$MAIN_PID"
start_controller quiet --scheduled-events=false
wait_acting "$CONTROLLER_LOG" 60
taint "$N_QUIET" testTaint1=test1:NoExecute
wait_scheduled "$CONTROLLER_LOG" quiet 60
evictions_json "$METRICS_URL" | py "sys.exit(0 if any(x['pod'] == '$NS/quiet' and x['state'] == 'pending' for x in doc['evictions']) else 1)" \
  || fail "/debug/evictions does not list $NS/quiet with --scheduled-events=false"
# Untainting cancels it with upstream's event: once that is recorded, any event of ours for the
# pod would have been too.
k taint nodes "$N_QUIET" testTaint1- >/dev/null || fail "cannot untaint $N_QUIET"
wait_event quiet "Cancelling deletion of Pod $NS/quiet" 60
sleep 3
[ -z "$(events_with_reason quiet TaintEvictionScheduled)" ] \
  || fail "--scheduled-events=false recorded: $(events_with_reason quiet TaintEvictionScheduled)"
[ "$(events_with_reason delayed TaintEvictionScheduled)" = "$ev" ] \
  || fail "the replay added a TaintEvictionScheduled event for $NS/delayed: $(events_with_reason delayed TaintEvictionScheduled)"
log "--scheduled-events=false: no TaintEvictionScheduled event (the cancel event came)"

stop_controller "$CONTROLLER_PID"
echo "PASS: $TEST_NAME"
