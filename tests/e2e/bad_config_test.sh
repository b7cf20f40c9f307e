#!/usr/bin/env bash
# End to end, broken TLS material: a kubeconfig whose CA is corrupt, or whose client key does not
# belong to its certificate, makes the controller exit 1 at once with one error line naming the
# field (instead of logging a failure on every request while /healthz says 200). Insecure
# settings (insecure-skip-tls-verify, a token over plain http) are one warning each at start.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TESTDATA="$REPO_ROOT/tests/k8sclient/testdata/kubeconfig"
SERVER=$(k config view --raw --minify -o jsonpath='{.clusters[0].cluster.server}')
[ -n "$SERVER" ] || fail "no server in $KUBECONFIG"
CA_DATA=$(k config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
if [ -z "$CA_DATA" ]; then
  ca_file=$(k config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority}')
  [ -r "$ca_file" ] || fail "no CA in $KUBECONFIG"
  CA_DATA=$(base64 -w0 <"$ca_file")
fi

# kubeconfig FILE SERVER CLUSTER_YAML USER_YAML: a one-context kubeconfig.
kubeconfig() {
  cat >"$1" <<EOT
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "$2", $3}}]
users: [{name: u, user: {$4}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
EOT
}

# expect_fatal KUBECONFIG NEEDLE...: exits 1 within 20 s, one error line, mentioning each NEEDLE.
expect_fatal() {
  local config=$1 rc=0 out errors
  shift
  out=$(timeout 20 env -u KUBERNETES_SERVICE_HOST "$TEC_BIN" --kubeconfig "$config" \
    --health-probe-bind-address=127.0.0.1:0 --metrics-bind-address=0 2>&1) || rc=$?
  [ "$rc" -ne 124 ] || fail "$config: still running after 20 s (expected exit 1 at start): $out"
  [ "$rc" -eq 1 ] || fail "$config: exited $rc, expected 1: $out"
  errors=$(grep -c ' error ' <<<"$out" || true)
  [ "$errors" -eq 1 ] || fail "$config: $errors error lines, expected exactly one: $out"
  for needle in "$@"; do
    grep ' error ' <<<"$out" | grep -qF -- "$needle" || fail "$config: the error does not say '$needle': $out"
  done
  if grep -q 'serving /healthz' <<<"$out"; then
    fail "$config: the probe server started with broken TLS material: $out"
  fi
  log "$(basename "$config"): exit 1: $(grep ' error ' <<<"$out" | sed 's/.* error *daemon *//')"
}

corrupt_ca=$(printf -- '-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n' | base64 -w0)
kubeconfig "$WORK/corrupt-ca.kubeconfig" "$SERVER" "certificate-authority-data: $corrupt_ca" "token: t"
expect_fatal "$WORK/corrupt-ca.kubeconfig" "corrupt-ca.kubeconfig" "CA bundle" "certificate-authority"

kubeconfig "$WORK/wrong-key.kubeconfig" "$SERVER" "certificate-authority-data: $CA_DATA" \
  "client-certificate: $TESTDATA/client.crt, client-key: $TESTDATA/other.key"
expect_fatal "$WORK/wrong-key.kubeconfig" "wrong-key.kubeconfig" "client-key" \
  "does not belong to the client certificate"

# Insecure settings: the controller runs (here against a port nobody listens on, so it touches
# no cluster) and says so once at start.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
expect_warning() {  # expect_warning KUBECONFIG NEEDLE
  local pid deadline
  "$TEC_BIN" --kubeconfig "$1" --health-probe-bind-address 127.0.0.1:0 --metrics-bind-address 0 \
    >"$1.log" 2>&1 &
  pid=$!
  CONTROLLER_PIDS+=("$pid")
  CONTROLLER_LOGS+=("$1.log")
  deadline=$((SECONDS + 20))
  until grep -q 'serving /healthz' "$1.log"; do
    [ "$SECONDS" -lt "$deadline" ] || fail "$1: the controller did not start"
    kill -0 "$pid" 2>/dev/null || fail "$1: the controller exited: $(cat "$1.log")"
    sleep 0.1
  done
  # The start-up warnings come from the daemon (the informers' own about the dead server follow).
  [ "$(grep -c ' warning daemon ' "$1.log")" -eq 1 ] || fail "$1: expected one warning: $(cat "$1.log")"
  grep ' warning daemon ' "$1.log" | matches -F -- "$2" \
    || fail "$1: the warning does not say '$2': $(cat "$1.log")"
  stop_controller "$pid"
  log "$(basename "$1"): $(grep ' warning daemon ' "$1.log" | sed 's/.* warning *daemon *//')"
}
kubeconfig "$WORK/insecure.kubeconfig" "https://127.0.0.1:$port" "insecure-skip-tls-verify: true" "token: t"
expect_warning "$WORK/insecure.kubeconfig" "insecure-skip-tls-verify"
kubeconfig "$WORK/plain.kubeconfig" "http://127.0.0.1:$port" "" "token: t"
expect_warning "$WORK/plain.kubeconfig" "plain http"

echo "PASS: $TEST_NAME"
