#!/usr/bin/env bash
# End to end, bad input: bad flags exit 2 with the flag named; a broken kubeconfig or a missing
# in-cluster configuration exit 1 with a clear message; an API server that does not answer
# leaves the controller up and not ready (no crash, no hang) and SIGTERM still exits 0 quickly.
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
expect_exit 1 "in-cluster" --health-probe-bind-address=0 --metrics-bind-address=0
printf 'apiVersion: v1\nkind: Config\nclusters: [' >"$WORK/broken.kubeconfig"
expect_exit 1 "broken.kubeconfig" --kubeconfig "$WORK/broken.kubeconfig" \
  --health-probe-bind-address=0 --metrics-bind-address=0
expect_exit 1 "no-such-file" --kubeconfig "$WORK/no-such-file" \
  --health-probe-bind-address=0 --metrics-bind-address=0
log "bad flags exit 2, bad configuration exits 1, each with the culprit named"

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
  --metrics-bind-address 0 >"$WORK/dead.log" 2>&1 &
pid=$!
CONTROLLER_PIDS+=("$pid")
CONTROLLER_LOGS+=("$WORK/dead.log")
deadline=$((SECONDS + 10))
until url=$(sed -n 's|.*serving /healthz and /readyz on \(http://[^ ]*\).*|\1|p' "$WORK/dead.log" | head -1) && [ -n "$url" ]; do
  [ "$SECONDS" -lt "$deadline" ] || fail "no health server with a dead API server"
  sleep 0.1
done
sleep 3
kill -0 "$pid" || fail "the controller exited while the API server is unreachable"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$url/readyz")
[ "$code" = 500 ] || fail "/readyz answered $code with an unreachable API server (expected 500)"
curl -fsS --max-time 2 "$url/healthz" >/dev/null || fail "/healthz failed while only the API server is down"
stop_controller "$pid"
log "unreachable API server: running, not ready, SIGTERM exit 0 in $STOP_MS ms"
echo "PASS: $TEST_NAME"
