#!/usr/bin/env bash
# End to end, bad input: bad flags exit 2 with the flag named; a broken kubeconfig or a missing
# in-cluster configuration exit 1 with a clear message; an API server that does not answer
# leaves the controller up and not ready (no crash, no hang) and SIGTERM still exits 0 quickly,
# logging at -v 4 (debug) in --logging-format json, Kubernetes components' names; settings from
# TEC_* variables, and the JSON log with fields, against the real API server.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

expect_exit() {  # expect_exit CODE NEEDLE ARGS...
  local want=$1 needle=$2 rc=0 out
  shift 2
  out=$(timeout 10 env -u POD_NAMESPACE -u KUBERNETES_SERVICE_HOST "$TEC_BIN" "$@" 2>&1) || rc=$?
  [ "$rc" -eq "$want" ] || fail "'$*' exited $rc, expected $want: $out"
  grep -qF -- "$needle" <<<"$out" || fail "'$*' did not mention '$needle': $out"
}

expect_exit 0 "taint-eviction-controller" --version
expect_exit 0 "--leader-elect-renew-deadline" --help
expect_exit 2 "--bogus" --bogus
expect_exit 2 "--leader-elect-lease-duration" --leader-elect-lease-duration=15
expect_exit 2 "--workers" --workers=-1
expect_exit 2 "--log-format" --log-format=yaml
expect_exit 2 "--logging-format" --logging-format=yaml
expect_exit 2 "-v/--v 4 means the debug level, --log-level says info: give one of them" \
  --v=4 --log-level=info
expect_exit 2 "disagree: give one of them" --logging-format=json --log-format=text
expect_exit 0 "--logging-format" --help
expect_exit 1 "in-cluster" --health-probe-bind-address=0 --metrics-bind-address=0
printf 'apiVersion: v1\nkind: Config\nclusters: [' >"$WORK/broken.kubeconfig"
expect_exit 1 "broken.kubeconfig" --kubeconfig "$WORK/broken.kubeconfig" \
  --health-probe-bind-address=0 --metrics-bind-address=0
expect_exit 1 "no-such-file" --kubeconfig "$WORK/no-such-file" \
  --health-probe-bind-address=0 --metrics-bind-address=0
log "bad flags exit 2, bad configuration exits 1, each with the culprit named"

# Settings from the environment (--foo-bar from TEC_FOO_BAR): a bad value is exit 2 naming the
# variable; against the real API server, a controller configured by variables alone (but one
# flag, which wins over its variable's bad value) evicts a pod and logs it as JSON with fields.
TEC_WORKERS=0 expect_exit 2 "--workers (from TEC_WORKERS) must be between" \
  --health-probe-bind-address=0 --metrics-bind-address=0
TEC_LEADER_ELECT=maybe expect_exit 2 "TEC_LEADER_ELECT" --metrics-bind-address=0
expect_exit 0 "(Env:TEC_KUBE_API_QPS)" --help
setup_rbac
node="tec-e2e-env-$SUFFIX"
make_node "$node"
make_pod victim "$node"
uid=$(pod_uid victim)
ENV_LOG="$WORK/env.log"
: >"$ENV_LOG"
env -u POD_NAMESPACE TEC_KUBECONFIG="$SA_KUBECONFIG" TEC_LEADER_ELECT=false \
  TEC_LEADER_ELECT_RESOURCE_NAMESPACE="$DEPLOY_NS" TEC_METRICS_BIND_ADDRESS=0 \
  TEC_HEALTH_PROBE_BIND_ADDRESS=127.0.0.1:0 TEC_LOG_FORMAT=json TEC_LOG_LEVEL=debug \
  TEC_WORKERS=not-a-number "$TEC_BIN" --workers=2 >"$ENV_LOG" 2>&1 &
pid=$!
CONTROLLER_PIDS+=("$pid")
CONTROLLER_LOGS+=("$ENV_LOG")
deadline=$((SECONDS + 60))
url=""
until [ -n "$url" ] && curl -fsS --max-time 2 "$url/readyz" >/dev/null 2>&1; do
  kill -0 "$pid" 2>/dev/null || fail "the controller configured from TEC_* variables exited: $(tail -5 "$ENV_LOG")"
  [ "$SECONDS" -lt "$deadline" ] || fail "the controller configured from TEC_* variables was not ready within 60 s"
  url=$(sed -n 's|.*serving /healthz and /readyz on \(http://[^ "]*\).*|\1|p' "$ENV_LOG" | head -1) || true
  sleep 0.2
done
taint "$node" "tec-e2e-env=x:NoExecute"
wait_terminating victim 60
deadline=$((SECONDS + 30))
until grep -q '"pod":"'"$NS"'/victim"' "$ENV_LOG"; do
  [ "$SECONDS" -lt "$deadline" ] || fail "no JSON log line with the pod as a field within 30 s"
  sleep 0.2
done
verdict=$(python3 -c "
import json, sys
lines = [l for l in open(sys.argv[1]) if l.strip()]
try:
    docs = [json.loads(l) for l in lines]
except ValueError as e:
    print('a line is not JSON: %s' % e); sys.exit()
pod = sys.argv[2] + '/victim'
mine = [d for d in docs if d.get('pod') == pod and d.get('namespace') == sys.argv[2] and d.get('uid') == sys.argv[3]]
if not all(isinstance(d, dict) and isinstance(d.get('msg'), str) for d in docs): print('a line without msg')
elif not mine: print('no line with pod=%s and uid=%s as fields' % (pod, sys.argv[3]))
elif not any('pod=\"%s\"' % pod in d['msg'] for d in mine): print('msg lost its text')
else: print('ok')" "$ENV_LOG" "$NS" "$uid")
[ "$verdict" = ok ] || fail "JSON log from TEC_LOG_FORMAT=json: $verdict"
stop_controller "$pid"
log "TEC_* variables configure the controller (the command line wins); its JSON log has the pod as fields"

# An API server that accepts nothing: a port nobody listens on.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$WORK/dead.kubeconfig" <<EOT
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:$port"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
EOT
SA_KUBECONFIG="$WORK/dead.kubeconfig"
: >"$WORK/dead.log"
"$TEC_BIN" --kubeconfig "$SA_KUBECONFIG" --health-probe-bind-address 127.0.0.1:0 \
  --metrics-bind-address 0 --v=4 --logging-format=json >"$WORK/dead.log" 2>&1 &
pid=$!
CONTROLLER_PIDS+=("$pid")
CONTROLLER_LOGS+=("$WORK/dead.log")
deadline=$((SECONDS + 10))
until url=$(sed -n 's|.*serving /healthz and /readyz on \(http://[^ "]*\).*|\1|p' "$WORK/dead.log" | head -1) && [ -n "$url" ]; do
  [ "$SECONDS" -lt "$deadline" ] || fail "no health server with a dead API server"
  sleep 0.1
done
sleep 3
kill -0 "$pid" || fail "the controller exited while the API server is unreachable"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$url/readyz")
[ "$code" = 500 ] || fail "/readyz answered $code with an unreachable API server (expected 500)"
curl -fsS --max-time 2 "$url/healthz" >/dev/null || fail "/healthz failed while only the API server is down"
stop_controller "$pid"
verdict=$(python3 -c "
import json, sys
try:
    docs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
except ValueError as e:
    print('a line is not JSON: %s' % e); sys.exit()
levels = {d.get('level') for d in docs}
print('ok' if 'debug' in levels and 'trace' not in levels else 'levels %s' % sorted(levels))" "$WORK/dead.log")
[ "$verdict" = ok ] || fail "--v=4 --logging-format=json: $verdict"
log "unreachable API server: running, not ready, SIGTERM exit 0 in $STOP_MS ms; --v=4 --logging-format=json logged JSON with debug lines"
echo "PASS: $TEST_NAME"
