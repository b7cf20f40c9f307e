#!/usr/bin/env bash
# The controller as the Deployment from deploy/ on the real node:
#   - two replicas Running and Ready, never restarted (the liveness and readiness probes on
#     :8081 pass), one of them holding the Lease;
#   - each runs with the in-cluster configuration (the `kubernetes` Service's ClusterIP, the
#     ServiceAccount token and CA mounted by the kubelet);
#   - the restricted Pod Security settings hold in the running processes: uid and gid 65532, no
#     capabilities, no privilege escalation, a read-only root filesystem (checked in /proc of
#     the container's process on the host); kubectl exec reaches the container, which has no
#     shell (deploy/Dockerfile's runtime stage holds the binaries and their libraries only);
#   - /healthz and /readyz answer on the pod address (plain HTTP), /metrics through the metrics
#     Service's ClusterIP (kube-proxy), over HTTPS with the token of a ServiceAccount bound to
#     deploy/'s metrics-reader ClusterRole (401 without a token, 403 with one lacking the role).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

wait_until 60 "the controller Deployment available with 2 replicas" controller_available 2
pods=$(controller_pods)
[ "$(wc -w <<<"$pods")" -eq 2 ] || fail "expected 2 running controller pods, got: $(tr '\n' ' ' <<<"$pods")"

wait_until 90 "a Lease holder among the running controller pods" current_leader
holder=$(current_leader)
grep -qxF "$holder" <<<"$pods" || fail "the Lease holder '$holder' is not one of the controller pods ($(tr '\n' ' ' <<<"$pods"))"
log "controller pods: $(tr '\n' ' ' <<<"$pods"); leader: $holder"

image=$(k -n "$CONTROLLER_NS" get deployment taint-eviction-controller -o jsonpath='{.spec.template.spec.containers[0].image}')
[ "$image" = "$TEC_CLUSTER_CONTROLLER_IMAGE" ] || fail "the Deployment runs '$image', expected $TEC_CLUSTER_CONTROLLER_IMAGE"

for p in $pods; do
  st=$(k -n "$CONTROLLER_NS" get pod "$p" \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status} {.status.containerStatuses[0].restartCount} {.spec.nodeName} {.status.podIP}')
  read -r ready restarts node ip <<<"$st"
  [ "$ready" = True ] || fail "pod $p is not Ready (readiness probe on /readyz)"
  [ "$restarts" = 0 ] || fail "pod $p restarted $restarts times (liveness probe on /healthz, or a crash)"
  [ "$node" = "$NODE" ] || fail "pod $p runs on '$node', expected $NODE"

  # In-cluster configuration: the daemon says where its API server and credentials came from.
  logs=$(k -n "$CONTROLLER_NS" logs "$p") || fail "kubectl logs $p failed"
  grep -q "API server https://10\.0\.0\.1:443 (in-cluster config (/var/run/secrets/kubernetes.io/serviceaccount))" <<<"$logs" \
    || fail "pod $p does not log the in-cluster configuration: $(head -3 <<<"$logs")"
  grep -q "leader election: lease $CONTROLLER_NS/$LEASE_NAME as $p" <<<"$logs" \
    || fail "pod $p does not log its leader election identity"

  # The container's main process, seen from the host.
  cid=$(k -n "$CONTROLLER_NS" get pod "$p" -o jsonpath='{.status.containerStatuses[0].containerID}')
  cid=${cid#containerd://}
  pid=$(task_pid "$cid")
  [ -n "$pid" ] || fail "no running containerd task for the controller container $cid of $p"
  grep -q 'taint-eviction-controller' "/proc/$pid/cmdline" || fail "pid $pid of $p is not the controller"
  uids=$(awk '/^Uid:/ { print $2, $3, $4, $5 }' "/proc/$pid/status")
  gids=$(awk '/^Gid:/ { print $2, $3, $4, $5 }' "/proc/$pid/status")
  [ "$uids" = "65532 65532 65532 65532" ] || fail "pod $p runs with uids '$uids', expected 65532"
  [ "$gids" = "65532 65532 65532 65532" ] || fail "pod $p runs with gids '$gids', expected 65532"
  capeff=$(awk '/^CapEff:/ { print $2 }' "/proc/$pid/status")
  capbnd=$(awk '/^CapBnd:/ { print $2 }' "/proc/$pid/status")
  [ "$capeff" = 0000000000000000 ] && [ "$capbnd" = 0000000000000000 ] \
    || fail "pod $p has capabilities (CapEff $capeff, CapBnd $capbnd), expected none (drop ALL)"
  grep -q '^NoNewPrivs:[[:space:]]*1' "/proc/$pid/status" || fail "pod $p may gain privileges (NoNewPrivs is not 1)"
  grep -q '^Seccomp:[[:space:]]*2' "/proc/$pid/status" || fail "pod $p runs without a seccomp filter (RuntimeDefault)"
  root_opts=$(awk '$5 == "/" { print $6 }' "/proc/$pid/mountinfo")
  [[ ",$root_opts," == *,ro,* ]] || fail "pod $p's root filesystem is mounted '$root_opts', expected ro"
  # The kubelet mounted the ServiceAccount token the in-cluster configuration reads.
  grep -Eq ' (/var)?/run/secrets/kubernetes.io/serviceaccount ' "/proc/$pid/mountinfo" \
    || fail "pod $p has no ServiceAccount token mount"

  # From inside, through the API server and the kubelet: the binary answers; a shell is not
  # there to run (the image holds no /bin/sh: what an intruder would exec first).
  out=$(k -n "$CONTROLLER_NS" exec "$p" -- /usr/local/bin/taint-eviction-controller --version) \
    || fail "kubectl exec into $p failed: $out"
  grep -q '^taint-eviction-controller v' <<<"$out" || fail "kubectl exec in $p: --version says '$out'"
  if out=$(k -n "$CONTROLLER_NS" exec "$p" -- /bin/sh -c true 2>&1); then
    fail "kubectl exec in $p: /bin/sh ran; the image should hold no shell"
  fi
  grep -Eqi 'no such file|not found' <<<"$out" \
    || fail "kubectl exec /bin/sh in $p failed, but not for a missing shell: $out"

  # The probe port, from the host on the pod network.
  curl -fsS --max-time 5 "http://$ip:8081/healthz" >/dev/null || fail "http://$ip:8081/healthz ($p) does not answer 200"
  curl -fsS --max-time 5 "http://$ip:8081/readyz" >/dev/null || fail "http://$ip:8081/readyz ($p) does not answer 200"
  log "pod $p ($ip): Ready, 0 restarts, in-cluster config, uid/gid 65532, no capabilities, NoNewPrivs, seccomp, read-only /, no shell"
done

# /metrics through the Service's ClusterIP: kube-proxy's rules from the host. HTTPS (the
# self-signed certificate, hence -k) with a reader's ServiceAccount token.
reader=tec-e2e-node-metrics-reader
nobody=tec-e2e-node-no-metrics
k -n "$CONTROLLER_NS" create serviceaccount "$reader" --dry-run=client -o yaml | k apply -f - >/dev/null \
  || fail "cannot create the metrics reader"
k -n "$CONTROLLER_NS" create serviceaccount "$nobody" --dry-run=client -o yaml | k apply -f - >/dev/null \
  || fail "cannot create the ServiceAccount without the role"
k create clusterrolebinding "$reader" --clusterrole=taint-eviction-controller-metrics-reader \
  --serviceaccount="$CONTROLLER_NS:$reader" --dry-run=client -o yaml | k apply -f - >/dev/null \
  || fail "cannot bind the metrics reader"
token=$(k -n "$CONTROLLER_NS" create token "$reader") || fail "no token for $reader"
no_role_token=$(k -n "$CONTROLLER_NS" create token "$nobody") || fail "no token for $nobody"
svc_ip=$(k -n "$CONTROLLER_NS" get service taint-eviction-controller-metrics -o jsonpath='{.spec.clusterIP}')
url="https://$svc_ip:8443/metrics"
metrics_ok() { curl -kfsS --max-time 5 -H "Authorization: Bearer $token" "$url" | matches '^taint_eviction_controller_is_leader '; }
wait_until 30 "/metrics through the Service ClusterIP $svc_ip" metrics_ok
code=$(curl -ks -o /dev/null -w '%{http_code}' --max-time 5 "$url") || true
[ "$code" = 401 ] || fail "$url without a token answered $code, expected 401"
code=$(curl -ks -o /dev/null -w '%{http_code}' --max-time 5 -H "Authorization: Bearer $no_role_token" "$url") || true
[ "$code" = 403 ] || fail "$url with a token lacking the metrics-reader role answered $code, expected 403"
log "/metrics answers through the Service ClusterIP $svc_ip:8443 over HTTPS: 200 for a reader, 401 without a token, 403 without the role"

echo "PASS: $TEST_NAME"
