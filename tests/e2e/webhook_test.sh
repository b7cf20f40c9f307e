#!/usr/bin/env bash
# End to end, the validating admission webhook (issue 32 item 2, README "Warnings at kubectl
# taint"), against the local kube-apiserver (1.20), with the controller as a process on
# loopback serving its secure port with a certificate this test makes (a CA and a serving
# certificate for 127.0.0.1), and a ValidatingWebhookConfiguration that calls
# https://127.0.0.1:PORT/validate/nodes with that CA, for this test's nodes only:
#   - `kubectl taint` prints the webhook's warning with the right counts (held pods too);
#   - deny mode (the policy's admission.denyEvictingMoreThan) refuses a taint that evicts too
#     much, lets a smaller one through, and passes the acknowledgement annotation; a removal
#     and the lifecycle taint node.kubernetes.io/not-ready are never refused;
#   - garbage AdmissionReview bodies posted with curl get a 400 with one clear line (an
#     oversized one 413), the path needs no token where /metrics does, and the controller
#     keeps serving;
#   - the controller stopped does not block tainting (failurePolicy Ignore).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
command -v openssl >/dev/null 2>&1 || fail "openssl not found on PATH"

WEBHOOK="tec-e2e-webhook-$SUFFIX"
on_cleanup() {
  k delete validatingwebhookconfiguration "$WEBHOOK" --ignore-not-found >/dev/null 2>&1
}

# A CA and a serving certificate for 127.0.0.1, signed by it.
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=tec-e2e-webhook-ca" \
  -keyout "$WORK/ca.key" -out "$WORK/ca.crt" >/dev/null 2>&1 || fail "cannot make the CA"
openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
  -keyout "$WORK/tls.key" -out "$WORK/tls.csr" >/dev/null 2>&1 || fail "cannot make the CSR"
printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$WORK/ext.cnf"
openssl x509 -req -in "$WORK/tls.csr" -CA "$WORK/ca.crt" -CAkey "$WORK/ca.key" -CAcreateserial \
  -days 1 -extfile "$WORK/ext.cnf" -out "$WORK/tls.crt" >/dev/null 2>&1 \
  || fail "cannot sign the serving certificate"

setup_rbac
LABEL="tec.test/webhook=$SUFFIX"
N1="tec-e2e-wh1-$SUFFIX" N2="tec-e2e-wh2-$SUFFIX" N3="tec-e2e-wh3-$SUFFIX" N4="tec-e2e-wh4-$SUFFIX"
for n in "$N1" "$N2" "$N3" "$N4"; do
  make_node "$n"
  k label node "$n" "$LABEL" >/dev/null || fail "cannot label $n"
done
# N1: two pods evicted at once, one after 300 s, one tolerating the taint forever.
make_pod a1 "$N1"
make_pod a2 "$N1"
make_pod a300 "$N1" "$(toleration tec.test/wh x 300)"
make_pod aforever "$N1" "$(toleration tec.test/wh x)"
make_pod b1 "$N2"
make_pod c1 "$N3"
make_pod c2 "$N3"

publish_policy "$POLICY_HEADER
admission:
  denyEvictingMoreThan: 1"
start_controller main --policy "$POLICY_FILE" --tls-cert-file "$WORK/tls.crt" \
  --tls-private-key-file "$WORK/tls.key"
URL="$METRICS_URL/validate/nodes"
log "controller ready; webhook at $URL"

k apply -f - >/dev/null <<EOT || fail "cannot create the ValidatingWebhookConfiguration"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: $WEBHOOK
webhooks:
  - name: nodes.taint-eviction-controller.io
    admissionReviewVersions: ["v1", "v1beta1"]
    sideEffects: None
    failurePolicy: Ignore
    timeoutSeconds: 3
    objectSelector:
      matchLabels:
        tec.test/webhook: "$SUFFIX"
    rules:
      - apiGroups: [""]
        apiVersions: ["v1"]
        operations: ["CREATE", "UPDATE"]
        resources: ["nodes"]
    clientConfig:
      url: $URL
      caBundle: $(base64 -w0 <"$WORK/ca.crt")
EOT

# kubectl_taint NODE TAINT: runs `kubectl taint`, its stdout and stderr in TAINT_OUT, its
# status in TAINT_RC.
kubectl_taint() {
  TAINT_RC=0
  TAINT_OUT=$(k taint nodes "$1" "$2" 2>&1) || TAINT_RC=$?
  echo "$TAINT_OUT" | sed "s/^/  | /"
}
# taints_of NODE: its NoExecute taints (TaintNodesByCondition puts not-ready:NoSchedule on a
# node without a kubelet).
taints_of() {
  k get node "$1" -o jsonpath='{range .spec.taints[?(@.effect=="NoExecute")]}{.key}={.value}:{.effect} {end}'
}

# The API server starts calling a new webhook configuration a moment after it is created:
# until it does, a taint of N4 (no pods) and its removal.
deadline=$((SECONDS + 30))
while :; do
  TAINT_OUT=$(k taint nodes "$N4" tec.test/probe=x:NoExecute 2>&1) || fail "cannot taint $N4: $TAINT_OUT"
  k taint nodes "$N4" tec.test/probe- >/dev/null || fail "cannot remove the taint of $N4"
  grep -q '^Warning: ' <<<"$TAINT_OUT" && break
  [ "$SECONDS" -lt "$deadline" ] || fail "no warning from the webhook within 30 s: $TAINT_OUT"
  sleep 1
done

# 1. A small taint: allowed, with the preview as a warning.
log "1. kubectl taint $N2 (one pod): allowed, with a warning"
kubectl_taint "$N2" tec.test/wh=x:NoExecute
[ "$TAINT_RC" -eq 0 ] || fail "kubectl taint $N2 failed: $TAINT_OUT"
grep -q "^Warning: tainting $N2 with tec.test/wh=x:NoExecute evicts 1 pod now (1 namespace); [0-9]*% of nodes would carry NoExecute taints\$" \
  <<<"$TAINT_OUT" || fail "unexpected warning for $N2: $TAINT_OUT"
wait_terminating b1 30

# 2. Deny mode: 3 pods (2 now, 1 later) is more than 1: refused, and the node keeps no taint.
log "2. kubectl taint $N1 (3 pods): refused by deny mode"
kubectl_taint "$N1" tec.test/wh=x:NoExecute
[ "$TAINT_RC" -ne 0 ] || fail "deny mode let the taint of $N1 through: $TAINT_OUT"
grep -q "denied the request: tainting $N1 with tec.test/wh=x:NoExecute evicts 3 pods (2 now, 1 later), more than admission.denyEvictingMoreThan 1. To go ahead, annotate the node taint-eviction-controller/acknowledge-eviction=true first" \
  <<<"$TAINT_OUT" || fail "unexpected refusal: $TAINT_OUT"
[ -z "$(taints_of "$N1")" ] || fail "$N1 has taints after the refusal: $(taints_of "$N1")"
assert_not_terminating_for 3 a1 a2 a300 aforever

# 3. The acknowledgement passes, with the warning.
log "3. annotated with the acknowledgement: allowed, with a warning"
k annotate node "$N1" taint-eviction-controller/acknowledge-eviction=true >/dev/null \
  || fail "cannot annotate $N1"
kubectl_taint "$N1" tec.test/wh=x:NoExecute
[ "$TAINT_RC" -eq 0 ] || fail "the acknowledged taint of $N1 was refused: $TAINT_OUT"
grep -q "^Warning: tainting $N1 with tec.test/wh=x:NoExecute evicts 2 pods now (1 namespace), 1 more within 300s; 1 tolerates it forever; [0-9]*% of nodes would carry NoExecute taints\$" \
  <<<"$TAINT_OUT" || fail "unexpected warning for $N1: $TAINT_OUT"
wait_terminating a1 30
wait_terminating a2 30

# 4. A removal is never refused (the acknowledgement is gone first) and says nothing.
log "4. removing the taint: allowed, no warning"
k annotate node "$N1" taint-eviction-controller/acknowledge-eviction- >/dev/null \
  || fail "cannot remove the annotation of $N1"
kubectl_taint "$N1" tec.test/wh-
[ "$TAINT_RC" -eq 0 ] || fail "removing the taint of $N1 failed: $TAINT_OUT"
grep -q '^Warning' <<<"$TAINT_OUT" && fail "a removal got a warning: $TAINT_OUT"

# 4b. A hold put on the node (with the acknowledgement deny mode wants for 2 pods): the
#     warning counts the held pods and says when they would go; the controller holds them.
log "4b. $N3 held for 30 minutes: the warning says so"
hold_until="$(date -u -d '+30 minutes' +%Y-%m-%dT%H:%M:%SZ)"
k annotate node "$N3" "taint-eviction-controller/hold-until=$hold_until" \
  taint-eviction-controller/acknowledge-eviction=true >/dev/null || fail "cannot annotate $N3"
kubectl_taint "$N3" tec.test/wh=x:NoExecute
[ "$TAINT_RC" -eq 0 ] || fail "the acknowledged, held taint of $N3 was refused: $TAINT_OUT"
grep -q "^Warning: tainting $N3 with tec.test/wh=x:NoExecute evicts 0 pods now, 2 more within 1[78][0-9][0-9]s; 2 held by hold-until; [0-9]*% of nodes would carry NoExecute taints\$" \
  <<<"$TAINT_OUT" || fail "unexpected warning for the held $N3: $TAINT_OUT"
assert_not_terminating_for 5 c1 c2
kubectl_taint "$N3" tec.test/wh-
[ "$TAINT_RC" -eq 0 ] || fail "removing the taint of $N3 failed: $TAINT_OUT"
k annotate node "$N3" taint-eviction-controller/hold-until- \
  taint-eviction-controller/acknowledge-eviction- >/dev/null || fail "cannot clear $N3"

# 5. The lifecycle controller's not-ready taint: 2 pods (at once, or after the 300 s of the
#    DefaultTolerationSeconds admission plugin), over the limit, not refused.
log "5. node.kubernetes.io/not-ready on $N3 (2 pods): allowed, with a warning"
kubectl_taint "$N3" node.kubernetes.io/not-ready:NoExecute
[ "$TAINT_RC" -eq 0 ] || fail "deny mode refused node.kubernetes.io/not-ready: $TAINT_OUT"
grep -q "^Warning: tainting $N3 with node.kubernetes.io/not-ready:NoExecute evicts " \
  <<<"$TAINT_OUT" || fail "unexpected warning for $N3: $TAINT_OUT"

# 6. Garbage bodies: 400 with one line, no crash; no token needed where /metrics wants one.
log "6. garbage AdmissionReview bodies"
post() {  # post BODY_FILE -> "STATUS BODY" (the whole body in $WORK/post.out)
  local code
  : >"$WORK/post.out"
  # curl may fail writing the rest of a body the server refused (413) and closed: the status
  # it printed counts.
  code=$(curl -sS --cacert "$WORK/ca.crt" --max-time 10 -o "$WORK/post.out" -w '%{http_code}' \
    -X POST -H 'Content-Type: application/json' --data-binary "@$1" "$URL" 2>/dev/null) || true
  [ -n "$code" ] || code=000
  echo "$code $(head -c 300 "$WORK/post.out")"
}
printf 'garbage' >"$WORK/g1"
printf '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x"}}' >"$WORK/g2"
head -c 200000 /dev/zero | tr '\0' '[' >"$WORK/g3"
head -c 4194304 /dev/zero | tr '\0' ' ' >"$WORK/g4"
printf '\x01\xff"\n' >"$WORK/g5"
for g in g1 g2 g3 g5; do
  out=$(post "$WORK/$g")
  log "  $g -> $out"
  [ "${out%% *}" = 400 ] || fail "$g: expected 400, got: $out"
  lines=$(wc -l <"$WORK/post.out")
  [ "$lines" -eq 1 ] || fail "$g: expected one line, got $lines"
done
grep -q '^400 AdmissionReview: not JSON' <<<"$(post "$WORK/g1")" || fail "g1: unclear error"
grep -q '^400 AdmissionReview: request.kind: missing' <<<"$(post "$WORK/g2")" || fail "g2: unclear error"
grep -q '^400 AdmissionReview: nested more than 64 levels deep' <<<"$(post "$WORK/g3")" || fail "g3: unclear error"
out=$(post "$WORK/g4")
log "  g4 (4 MiB) -> ${out:0:80}"
[ "${out%% *}" = 413 ] || fail "a 4 MiB body: expected 413, got: ${out:0:200}"
code=$(curl -sS --cacert "$WORK/ca.crt" --max-time 10 -o /dev/null -w '%{http_code}' "$URL") || code=000
# Only POST is open: a GET is authenticated as any other request of the secure port.
[ "$code" = 401 ] || fail "GET $URL without a token: expected 401, got $code"
code=$(curl -sS --cacert "$WORK/ca.crt" --max-time 10 -o /dev/null -w '%{http_code}' "$METRICS_URL/metrics") || code=000
[ "$code" = 401 ] || fail "/metrics without a token: expected 401, got $code"
kill -0 "$CONTROLLER_PID" 2>/dev/null || fail "the controller died on garbage"
curl -fsS --max-time 5 "$HEALTH_URL/healthz" >/dev/null || fail "/healthz after garbage"
# A valid review right after: answered, allowed.
printf '{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"u-1","kind":{"group":"","version":"v1","kind":"Node"},"operation":"UPDATE","object":{"metadata":{"name":"%s"},"spec":{"taints":[{"key":"k","effect":"NoExecute"}]}},"oldObject":{"metadata":{"name":"%s"}}}}' \
  "$N4" "$N4" >"$WORK/ok"
out=$(post "$WORK/ok")
log "  valid v1beta1 review -> $out"
grep -q '^200 {"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","response":{"allowed":true,"uid":"u-1","warnings":\["tainting '"$N4"' with k:NoExecute evicts 0 pods now' \
  <<<"$out" || fail "the valid review after the garbage: $out"

# 7. The controller stopped: tainting is not blocked (failurePolicy Ignore), and goes without
#    a warning.
log "7. controller stopped: kubectl taint $N4 goes through"
stop_controller "$CONTROLLER_PID"
t0=$(now_ms)
kubectl_taint "$N4" tec.test/wh=x:NoExecute
[ "$TAINT_RC" -eq 0 ] || fail "with the controller down, kubectl taint failed: $TAINT_OUT"
grep -q '^Warning: tainting' <<<"$TAINT_OUT" && fail "a warning with the controller down: $TAINT_OUT"
log "  taken in $(($(now_ms) - t0)) ms"
[ "$(taints_of "$N4")" = "tec.test/wh=x:NoExecute " ] || fail "$N4 taints: $(taints_of "$N4")"

log "PASS"
