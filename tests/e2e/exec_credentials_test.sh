#!/usr/bin/env bash
# End to end, exec credential plugins (kubeconfig users[].user.exec), against the local
# kube-apiserver (whose token file and ServiceAccount tokens authenticate what the plugins print):
#   - the controller runs with a kubeconfig whose user is an exec plugin
#     (client.authentication.k8s.io/v1) printing the deploy/ ServiceAccount's token: it starts
#     (the plugin ran once at start), syncs, acts and schedules an eviction;
#   - `kubectl taint-eviction pending --controller-url` with a kubeconfig whose user is an exec
#     plugin (v1beta1, env and args passed) printing the admin's token: the pending eviction, read
#     from the acting replica's secure port with the token the plugin gave (the port's
#     TokenReview authenticates it); the same through the Lease falls back as plugin_test's does;
#   - a failing exec plugin: the kubectl plugin exits 1 with one line naming the kubeconfig
#     and the plugin's stderr, and the controller exits 1 at start with that line in its log;
#   - a missing plugin command: the install hint in the one line.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PLUGIN_BIN=${TEC_PLUGIN_BIN:-$(dirname "$TEC_BIN")/kubectl-taint_eviction}
[ -x "$PLUGIN_BIN" ] || fail "the plugin $PLUGIN_BIN is not built"
TAINT_KEY=tec-e2e-exec

setup_rbac
SA_TOKEN=$(kubectl --kubeconfig "$SA_KUBECONFIG" config view --raw -o jsonpath='{.users[0].user.token}')
ADMIN_TOKEN=$(kubectl config view --raw --minify -o jsonpath='{.users[0].user.token}')
SERVER=$(kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.server}')
CA_DATA=$(kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
[ -n "$SA_TOKEN" ] && [ -n "$ADMIN_TOKEN" ] && [ -n "$SERVER" ] || fail "cannot read the tokens or the server"

# exec_kubeconfig NAME API TOKEN [EXTRA_EXEC_YAML]: $WORK/NAME/kubeconfig, whose user runs
# $WORK/NAME/plugin (counting its runs in $WORK/NAME/runs): an ExecCredential of API with
# TOKEN, or exit 1 with a message when $WORK/NAME/fail exists.
exec_kubeconfig() {
  local name=$1 api=$2 token=$3 extra=${4:-} dir="$WORK/$1"
  mkdir -p "$dir"
  printf '%s' "$token" >"$dir/token"
  cat >"$dir/plugin" <<EOT
#!/bin/bash
echo \$(( \$(cat "$dir/runs" 2>/dev/null || echo 0) + 1 )) >"$dir/runs"
echo "\$*|\${TEC_E2E_GREETING:-}|\${KUBERNETES_EXEC_INFO:-}" >"$dir/seen"
if [ -e "$dir/fail" ]; then
  echo "error: the identity provider is down" >&2
  echo "try again later" >&2
  exit 1
fi
printf '{"apiVersion":"$api","kind":"ExecCredential","status":{"token":"%s"}}\n' "\$(cat "$dir/token")"
EOT
  chmod 700 "$dir/plugin"
  cat >"$dir/kubeconfig" <<EOT
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: $SERVER
    certificate-authority-data: $CA_DATA
users:
- name: exec-user
  user:
    exec:
      apiVersion: $api
      command: ./plugin
      interactiveMode: IfAvailable
$extra
contexts:
- name: exec
  context: {cluster: local, user: exec-user, namespace: $NS}
current-context: exec
EOT
}

# The controller, authenticated by the plugin's ServiceAccount token.
exec_kubeconfig controller client.authentication.k8s.io/v1 "$SA_TOKEN"
SA_KUBECONFIG="$WORK/controller/kubeconfig" start_controller main
wait_acting "$CONTROLLER_LOG"
[ "$(cat "$WORK/controller/runs")" = 1 ] || fail "the controller ran its exec plugin $(cat "$WORK/controller/runs") times, expected once"
grep -q 'the exec plugin ".*/plugin" gave a bearer token, with no expiry' "$CONTROLLER_LOG" \
  || fail "the controller did not log the exec plugin's credential: $(grep -m3 exec "$CONTROLLER_LOG")"
grep -q '"interactive":false' "$WORK/controller/seen" || fail "KUBERNETES_EXEC_INFO: $(cat "$WORK/controller/seen")"
log "the controller authenticates with its exec plugin's token"

node="tec-e2e-exec-$SUFFIX"
make_node "$node"
make_pod waits "$node" "$(toleration $TAINT_KEY x 600)"
taint "$node" "$TAINT_KEY=x:NoExecute"
wait_scheduled "$CONTROLLER_LOG" waits 30

# The kubectl plugin, authenticated by its exec plugin (v1beta1, args and env) with the
# admin's token, towards the API server and the acting replica's port.
exec_kubeconfig kubectl client.authentication.k8s.io/v1beta1 "$ADMIN_TOKEN" \
  "      args: [get-token, --cluster, local]
      env:
      - name: TEC_E2E_GREETING
        value: hello
      provideClusterInfo: true
      installHint: not shown"
run_plugin() {  # run_plugin ARGS...: sets OUT, ERR, RC
  RC=0
  OUT=$(timeout 60 "$PLUGIN_BIN" --kubeconfig "$WORK/kubectl/kubeconfig" "$@" 2>"$WORK/stderr") || RC=$?
  ERR=$(cat "$WORK/stderr")
}
run_plugin pending --controller-url "$METRICS_URL"
[ "$RC" -eq 0 ] || fail "pending --controller-url with an exec plugin exited $RC: $ERR"
grep -qE "^waits +$node +$TAINT_KEY=x:NoExecute +[0-9T:.-]+Z \(in [0-9]+s\) +pending +<none>$" <<<"$OUT" \
  || fail "pending does not list waits as pending: $OUT (stderr: $ERR)"
[ "$(cat "$WORK/kubectl/runs")" = 1 ] || fail "the kubectl plugin ran its exec plugin $(cat "$WORK/kubectl/runs") times, expected once"
seen=$(cat "$WORK/kubectl/seen")
[[ "$seen" == "get-token --cluster local|hello|"* ]] || fail "the exec plugin saw args|env '$seen'"
grep -qF "\"server\":\"$SERVER\"" <<<"$seen" || fail "KUBERNETES_EXEC_INFO has no cluster: $seen"
log "pending through --controller-url with the exec plugin's token:"$'\n'"$OUT"
run_plugin pending
[ "$RC" -eq 0 ] || fail "pending (fallback) with an exec plugin exited $RC: $ERR"
grep -qE "^waits +$node +" <<<"$OUT" || fail "the fallback does not list waits: $OUT (stderr: $ERR)"
log "pending through the Lease (fallback to the Events) with the exec plugin"

# A failing exec plugin: one line, exit 1, for the kubectl plugin and for the controller.
: >"$WORK/kubectl/fail"
run_plugin pending --controller-url "$METRICS_URL"
[ "$RC" -eq 1 ] || fail "pending with a failing exec plugin exited $RC, expected 1: $ERR"
[ "$(wc -l <"$WORK/stderr")" -eq 1 ] || fail "a failing exec plugin gave more than one line: $ERR"
grep -qF "error: kubeconfig $WORK/kubectl/kubeconfig: users[0].user.exec: the exec plugin \"$WORK/kubectl/./plugin\" exited with status 1: error: the identity provider is down / try again later" <<<"$ERR" \
  || fail "the failing exec plugin's line: $ERR"
[ -z "$OUT" ] || fail "a failing exec plugin printed on stdout: $OUT"
log "a failing exec plugin: exit 1, $ERR"

: >"$WORK/controller/fail"
rc=0
out=$(timeout 30 "$TEC_BIN" --kubeconfig "$WORK/controller/kubeconfig" --metrics-bind-address=0 \
  --health-probe-bind-address=0 --leader-elect-resource-namespace "$DEPLOY_NS" 2>&1) || rc=$?
[ "$rc" -eq 1 ] || fail "the controller with a failing exec plugin exited $rc, expected 1: $out"
grep -qF "cannot get credentials: kubeconfig $WORK/controller/kubeconfig: users[0].user.exec: the exec plugin \"$WORK/controller/./plugin\" exited with status 1: error: the identity provider is down / try again later" <<<"$out" \
  || fail "the controller's line for a failing exec plugin: $out"
log "the controller with a failing exec plugin exits 1"

# A command that is not there: the install hint.
sed -i 's|command: ./plugin|command: tec-e2e-no-such-credential-plugin|; s|installHint: not shown|installHint: "install it with: apt-get install tec-e2e-plugin"|' \
  "$WORK/kubectl/kubeconfig"
run_plugin pending --controller-url "$METRICS_URL"
[ "$RC" -eq 1 ] || fail "pending with a missing exec plugin exited $RC, expected 1: $ERR"
grep -qF '"tec-e2e-no-such-credential-plugin" was not found on PATH; install hint: install it with: apt-get install tec-e2e-plugin' <<<"$ERR" \
  || fail "the missing exec plugin's line: $ERR"
log "a missing exec plugin: exit 1, $ERR"

stop_controller "$CONTROLLER_PID"
echo "PASS: $TEST_NAME"
