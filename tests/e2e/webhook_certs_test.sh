#!/usr/bin/env bash
# End to end, the admission webhook's certificates without cert-manager (issue 32, item 2):
# the controller runs as the deploy/ ServiceAccount with the deploy/ RBAC (get and update on
# its one Secret, get and patch on its one ValidatingWebhookConfiguration) and
#   1. fills the empty Secret deploy/ ships (a CA and a serving certificate for the Service's
#      DNS names) and the caBundle of both webhooks of a configuration the test creates, and
#      its HTTPS port serves that certificate, which verifies against the caBundle for the
#      Service's DNS name;
#   2. a second start reuses the Secret: the same certificate, no write;
#   3. while it runs, a certificate written to the Secret is served to new connections
#      without a restart; a serving certificate made to expire soon is replaced (by a restart
#      here: a running replica writes back the good one it serves), under the same CA, and
#      the caBundle does not change;
#   4. a missing webhook configuration is a warning, and its caBundle is filled once it is
#      back; the RBAC does not let the ServiceAccount read or write another Secret.
# The configuration the test creates matches nothing (a namespaceSelector no namespace has),
# so it never calls anything, and it is deleted on exit.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
command -v openssl >/dev/null 2>&1 || fail "openssl not found on PATH"

SECRET=taint-eviction-controller-webhook-tls
WEBHOOK=taint-eviction-controller  # the name the deploy/ ClusterRole allows
SERVICE=taint-eviction-controller-metrics  # the Service deploy/ sends the webhook through (port 443)
DNS="$SERVICE.$DEPLOY_NS.svc"
OTHER_SECRET="tec-e2e-other-$SUFFIX"
INTERVAL=10s

setup_rbac
for kind in ClusterRole ClusterRoleBinding; do  # the caBundle's, from deploy/webhook.yaml
  deploy_objects webhook.yaml "$kind" | k apply -f - >/dev/null || fail "cannot apply deploy/webhook.yaml's $kind"
done
on_cleanup() {
  k delete validatingwebhookconfiguration "$WEBHOOK" --ignore-not-found >/dev/null 2>&1
  k -n "$DEPLOY_NS" delete secret "$OTHER_SECRET" --ignore-not-found >/dev/null 2>&1
}

# The Secret as deploy/ ships it (empty), whatever an earlier run left in it.
k -n "$DEPLOY_NS" delete secret "$SECRET" --ignore-not-found >/dev/null
deploy_objects webhook.yaml Secret | k apply -f - >/dev/null || fail "cannot apply deploy/webhook.yaml's Secret"

make_webhook_configuration() {
  k delete validatingwebhookconfiguration "$WEBHOOK" --ignore-not-found >/dev/null
  local hook
  {
    printf 'apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\n'
    printf 'metadata:\n  name: %s\nwebhooks:\n' "$WEBHOOK"
    for hook in nodes.e2e.tec.test other.e2e.tec.test; do
      cat <<EOT
- name: $hook
  clientConfig:
    service: {namespace: $DEPLOY_NS, name: $SERVICE, path: /validate/nodes, port: 443}
  rules:
  - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  namespaceSelector:
    matchLabels: {tec.test/webhook-certs: never}
  failurePolicy: Ignore
  sideEffects: None
  admissionReviewVersions: [v1]
  timeoutSeconds: 2
EOT
    done
  } | k apply -f - >/dev/null || fail "cannot create ValidatingWebhookConfiguration $WEBHOOK"
}
make_webhook_configuration

secret_field() {  # secret_field KEY: the decoded value
  k -n "$DEPLOY_NS" get secret "$SECRET" -o jsonpath="{.data.${1//./\\.}}" | base64 -d
}
secret_rv() { k -n "$DEPLOY_NS" get secret "$SECRET" -o jsonpath='{.metadata.resourceVersion}'; }
ca_bundles() {  # one line per webhook: its caBundle (base64)
  k get validatingwebhookconfiguration "$WEBHOOK" \
    -o jsonpath='{range .webhooks[*]}{.clientConfig.caBundle}{"\n"}{end}'
}
fingerprint() { openssl x509 -noout -fingerprint -sha256 | cut -d= -f2; }

# The certificate the HTTPS port serves to a new connection, for the Service's DNS name.
served_fingerprint() {
  openssl s_client -connect "127.0.0.1:$PORT" -servername "$DNS" </dev/null 2>/dev/null | fingerprint
}

# wait_for SECONDS WHAT COMMAND...: until COMMAND succeeds.
wait_for() {
  local secs=$1 what=$2 deadline
  shift 2
  deadline=$((SECONDS + secs))
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || fail "$what: not within $secs s"
    sleep 0.5
  done
}

secret_filled() { [ -n "$(secret_field tls.crt 2>/dev/null)" ]; }
bundles_are_ca() {
  local want
  want=$(k -n "$DEPLOY_NS" get secret "$SECRET" -o jsonpath='{.data.ca\.crt}')
  [ -n "$want" ] && [ "$(ca_bundles | sort -u)" = "$want" ] && [ "$(ca_bundles | wc -l)" -eq 2 ]
}
serves_secret_cert() { [ "$(served_fingerprint)" = "$(secret_field tls.crt | fingerprint)" ]; }

run_controller() {  # run_controller NAME
  start_controller "$1" --leader-elect=false --webhook-cert-secret="$SECRET" \
    --webhook-cert-check-interval="$INTERVAL"
  PORT=${METRICS_URL##*:}
}

# --- 1. the empty Secret and the caBundle are filled; the port serves the certificate ---------
t0=$(now_ms)
run_controller first
wait_for 60 "the controller fills Secret $DEPLOY_NS/$SECRET" secret_filled
wait_for 60 "both caBundles are the Secret's ca.crt" bundles_are_ca
log "Secret and caBundles filled $(($(now_ms) - t0)) ms after the start"
show_log() { grep -h "webhook certificate" "$CONTROLLER_LOG" | sed 's/^/    /'; }
show_log
grep -q "wrote a new CA and serving certificate to the Secret $DEPLOY_NS/$SECRET (the Secret holds no certificate yet)" \
  "$CONTROLLER_LOG" || fail "no log line for the first write"
[ "$(k -n "$DEPLOY_NS" get secret "$SECRET" -o jsonpath='{.type}')" = kubernetes.io/tls ] \
  || fail "the Secret's type changed"

secret_field ca.crt >"$WORK/ca.crt"
secret_field ca.key >"$WORK/ca.key"
secret_field tls.crt >"$WORK/tls.crt"
# Not `ca_bundles | head -1`: kubectl writes each webhook's caBundle separately, and under
# pipefail a head that has its line and exits fails the pipeline with kubectl's SIGPIPE.
ca_bundles >"$WORK/bundles"
head -1 "$WORK/bundles" | base64 -d >"$WORK/bundle.pem"
openssl verify -CAfile "$WORK/bundle.pem" "$WORK/tls.crt" >/dev/null || fail "tls.crt does not verify against the caBundle"
sans=$(openssl x509 -in "$WORK/tls.crt" -noout -ext subjectAltName | tail -1 | tr -d ' ')
[ "$sans" = "DNS:$DNS,DNS:$DNS.cluster.local" ] || fail "tls.crt names '$sans'"
days=$(( ($(date -d "$(openssl x509 -in "$WORK/tls.crt" -noout -enddate | cut -d= -f2)" +%s) - $(date +%s)) / 86400 ))
[ "$days" -ge 364 ] && [ "$days" -le 365 ] || fail "the serving certificate is valid for $days days, expected a year"
ca_days=$(( ($(date -d "$(openssl x509 -in "$WORK/ca.crt" -noout -enddate | cut -d= -f2)" +%s) - $(date +%s)) / 86400 ))
[ "$ca_days" -ge 3650 ] || fail "the CA is valid for $ca_days days, expected 10 years"
log "tls.crt: $sans, $days days; CA $ca_days days"

wait_for 30 "the HTTPS port serves the Secret's certificate" serves_secret_cert
# A client that trusts only the caBundle, asking for the Service's name, accepts the port.
token_header=("${METRICS_CURL[@]:1}")
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' --cacert "$WORK/bundle.pem" \
  --resolve "$DNS:$PORT:127.0.0.1" "${token_header[@]}" "https://$DNS:$PORT/metrics") \
  || fail "curl --cacert <caBundle> https://$DNS:$PORT/metrics failed (TLS verification?)"
[ "$code" = 200 ] || fail "https://$DNS:$PORT/metrics answered $code"
log "the HTTPS port's certificate verifies against the caBundle for $DNS (HTTP $code)"
first_fp=$(fingerprint <"$WORK/tls.crt")
first_rv=$(secret_rv)
stop_controller "$CONTROLLER_PID"

# --- 2. a second start reuses the Secret ------------------------------------------------------
run_controller second
wait_for 30 "the second start serves the Secret's certificate" serves_secret_cert
[ "$(served_fingerprint)" = "$first_fp" ] || fail "the second start serves another certificate"
assert_unchanged() {
  [ "$(secret_rv)" = "$first_rv" ] || fail "the second start wrote the Secret"
}
sleep 12  # more than one check interval
assert_unchanged
bundles_are_ca || fail "the caBundles changed"
grep -q "webhook certificate: wrote" "$CONTROLLER_LOG" && fail "the second start wrote: $(grep 'certificate: wrote' "$CONTROLLER_LOG")"
log "the second start reuses the Secret (resourceVersion $first_rv, same certificate)"

# --- 3. a new certificate in the Secret is served without a restart; a due one is replaced ----
# issue_leaf DAYS OUT: a serving certificate for the Service's names under the Secret's CA.
issue_leaf() {
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$2.key" \
    -subj "/CN=$DNS" -out "$2.csr" 2>/dev/null || fail "openssl req failed"
  printf 'subjectAltName=DNS:%s,DNS:%s.cluster.local\nbasicConstraints=critical,CA:FALSE\nextendedKeyUsage=serverAuth\n' \
    "$DNS" "$DNS" >"$2.ext"
  openssl x509 -req -in "$2.csr" -CA "$WORK/ca.crt" -CAkey "$WORK/ca.key" -set_serial "0x$(openssl rand -hex 8)" \
    -days "$1" -extfile "$2.ext" -out "$2.crt" 2>/dev/null || fail "openssl x509 -req failed"
}
put_leaf() {  # put_leaf BASE: its .crt and .key into the Secret
  k -n "$DEPLOY_NS" patch secret "$SECRET" --type merge -p \
    "{\"data\":{\"tls.crt\":\"$(base64 -w0 <"$1.crt")\",\"tls.key\":\"$(base64 -w0 <"$1.key")\"}}" >/dev/null \
    || fail "cannot patch the Secret"
}
issue_leaf 200 "$WORK/operator"
put_leaf "$WORK/operator"
operator_fp=$(fingerprint <"$WORK/operator.crt")
t1=$(now_ms)
wait_for 60 "the running controller serves the certificate written to the Secret" \
  bash -c "[ \"\$(openssl s_client -connect 127.0.0.1:$PORT -servername $DNS </dev/null 2>/dev/null | openssl x509 -noout -fingerprint -sha256 | cut -d= -f2)\" = $operator_fp ]"
log "a certificate written to the Secret is served $(($(now_ms) - t1)) ms later, no restart"

issue_leaf 2 "$WORK/due"
put_leaf "$WORK/due"
due_fp=$(fingerprint <"$WORK/due.crt")
wait_for 60 "the running replica writes back the good certificate it serves" \
  bash -c "[ \"\$(kubectl -n $DEPLOY_NS get secret $SECRET -o jsonpath='{.data.tls\.crt}' | base64 -d | openssl x509 -noout -fingerprint -sha256 | cut -d= -f2)\" = $operator_fp ]"
log "a due certificate written under a running replica: it wrote back the one it serves"
stop_controller "$CONTROLLER_PID"

put_leaf "$WORK/due"
run_controller third
wait_for 60 "the due certificate is replaced" \
  bash -c "fp=\$(kubectl -n $DEPLOY_NS get secret $SECRET -o jsonpath='{.data.tls\.crt}' | base64 -d | openssl x509 -noout -fingerprint -sha256 | cut -d= -f2); [ -n \"\$fp\" ] && [ \"\$fp\" != $due_fp ] && [ \"\$fp\" != $operator_fp ]"
grep -q "wrote a new serving certificate to the Secret $DEPLOY_NS/$SECRET (tls.crt expires at" "$CONTROLLER_LOG" \
  || fail "no log line for the renewal: $(grep 'webhook certificate' "$CONTROLLER_LOG")"
wait_for 30 "the HTTPS port serves the renewed certificate" serves_secret_cert
secret_field ca.crt | cmp -s - "$WORK/ca.crt" || fail "the renewal changed the CA"
bundles_are_ca || fail "the caBundles are not the CA after the renewal"
secret_field tls.crt >"$WORK/renewed.crt"
openssl verify -CAfile "$WORK/bundle.pem" "$WORK/renewed.crt" >/dev/null || fail "the renewed certificate does not verify against the caBundle"
log "a serving certificate due in 2 days was replaced under the same CA; the caBundle stayed"
show_log

# --- 4. a missing configuration is a warning; the RBAC stops at the one Secret ----------------
k delete validatingwebhookconfiguration "$WEBHOOK" >/dev/null
wait_for 60 "a warning for the missing configuration" \
  grep -q "ValidatingWebhookConfiguration $WEBHOOK not found: nothing to put the caBundle in" "$CONTROLLER_LOG"
kill -0 "$CONTROLLER_PID" || fail "the controller exited without its webhook configuration"
make_webhook_configuration
wait_for 60 "the recreated configuration's caBundles are filled" bundles_are_ca
log "a missing configuration was a warning; recreated, its caBundles were filled"

k -n "$DEPLOY_NS" create secret generic "$OTHER_SECRET" --from-literal=x=y >/dev/null || fail "cannot create $OTHER_SECRET"
sa() { kubectl --kubeconfig "$SA_KUBECONFIG" --request-timeout="$REQ_TIMEOUT" -n "$DEPLOY_NS" "$@"; }
out=$(sa get secret "$OTHER_SECRET" 2>&1) && fail "the ServiceAccount may read Secret $OTHER_SECRET"
grep -q Forbidden <<<"$out" || fail "reading $OTHER_SECRET: $out"
out=$(sa label secret "$OTHER_SECRET" x=y 2>&1) && fail "the ServiceAccount may change Secret $OTHER_SECRET"
out=$(sa create secret generic "tec-e2e-new-$SUFFIX" --from-literal=x=y 2>&1) && fail "the ServiceAccount may create Secrets"
out=$(sa get secrets 2>&1) && fail "the ServiceAccount may list Secrets"
sa get secret "$SECRET" -o name >/dev/null || fail "the ServiceAccount cannot read its own Secret"
log "the ServiceAccount reads its own Secret only: no other Secret, no list, no create"
stop_controller "$CONTROLLER_PID"
log "PASS"
