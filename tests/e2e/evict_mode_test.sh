#!/usr/bin/env bash
# End to end: `evictionMode: Evict` (issue 15 item 3) against kube-apiserver v1.20.2, with
# kube-controller-manager v1.20.2 running only its disruption controller, so PodDisruptionBudget
# status is the real one. The pods have no owner and no kubelet runs: they are made Running and
# Ready by patching pods/status (a Pending pod is evicted without a look at its budget, 1.20's
# canIgnorePDB). Node N1 holds a1, a2 (budget A, minAvailable 2) and `free` (no budget); node N2
# holds b1, b2 (budget B, minAvailable 2). The policy: evictionMode Evict, fallbackAfter 0s
# (never), and fallbackAfter 20s for node.kubernetes.io/out-of-service. N1 is tainted
# tec.e2e/maintenance=1:NoExecute and N2 node.kubernetes.io/out-of-service:NoExecute at T:
# - `free` is evicted at once, through the Eviction API (policy/v1beta1 on 1.20, log line);
# - a1, a2, b1, b2 are refused (429): not terminating, the evictions_blocked gauge is 4,
#   /debug/evictions lists them blocked/pdb, a1 has one TaintEvictionBlocked Warning whose count
#   grows, and the upstream "Marking for deletion" event of the first attempt;
# - b1, b2 are deleted anyway after the rule's 20 s (not before T+18 s, by T+35 s), each with a
#   TaintEvictionFallback Warning and the DisruptionTarget condition; eviction_fallbacks_total 2;
# - a1, a2 are still there at T+45 s (no fallback for that taint), the gauge 2;
# - budget A lowered to minAvailable 1: exactly one of a1/a2 is evicted within 60 s (retries are
#   at most 30 s apart), the other stays blocked 20 s more (gauge 1);
# - N1 untainted: the last eviction is cancelled (gauge 0, "Cancelling deletion").
# Last, evictionMode Foo, fallbackAfter -5s and fallbackAfter abc are each refused at start-up
# with exit status 2 and one line naming the file, line and field. About 3 minutes.
#
# Needs the kube-controller-manager binary (deploy/local/cluster.sh build kube-controller-manager,
# cached after the first build) and python3.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
readonly KCM_START_S=180  # bound on kube-controller-manager's start on a loaded machine
readonly FALLBACK_S=20    # the out-of-service rule's fallbackAfter

command -v python3 >/dev/null 2>&1 || fail "python3 not found on PATH"
# The controller runs with exactly the deploy/ RBAC: Evict mode POSTs pods/NAME/eviction.
grep -q 'pods/eviction' "$REPO_ROOT/deploy/rbac.yaml" \
  || fail "deploy/rbac.yaml grants nothing on pods/eviction (Evict mode needs create)"
kcm=$("$REPO_ROOT/deploy/local/cluster.sh" build kube-controller-manager 2>"$WORK/kcm-build.err" | tail -n 1) || true
if [ -z "$kcm" ] || [ ! -x "$kcm" ]; then
  fail "no kube-controller-manager v1.20.2 binary (deploy/local/cluster.sh build kube-controller-manager: $(tail -n 3 "$WORK/kcm-build.err" | tr '\n' ' '))"
fi

KCM_PID=""
on_cleanup() {
  if [ -n "$KCM_PID" ]; then
    kill -TERM "$KCM_PID" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$KCM_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$KCM_PID" 2>/dev/null
    wait "$KCM_PID" 2>/dev/null
  fi
  # The namespace is finalized by hand (no namespace controller): its budgets would outlive it.
  k -n "$NS" delete poddisruptionbudgets --all --wait=false >/dev/null 2>&1
}

# ms_to_s MS: "12.3".
ms_to_s() {
  local ms=$1 sign=""
  if [ "$ms" -lt 0 ]; then sign=- ms=$((-ms)); fi
  printf '%s%d.%d' "$sign" $((ms / 1000)) $(((ms % 1000) / 100))
}
since_t() { echo $(($(now_ms) - T)); }

# pdb_status NAME: "observedGeneration/generation currentHealthy desiredHealthy disruptionsAllowed".
pdb_status() {
  k -n "$NS" get poddisruptionbudget "$1" \
    -o jsonpath='{.status.observedGeneration}/{.metadata.generation} {.status.currentHealthy} {.status.desiredHealthy} {.status.disruptionsAllowed}'
}
# wait_pdb NAME HEALTHY DESIRED ALLOWED SECONDS: until the disruption controller reports that.
wait_pdb() {
  local deadline=$((SECONDS + $5)) s gen healthy desired allowed
  while :; do
    s=$(pdb_status "$1") || s=""
    read -r gen healthy desired allowed <<<"$s"
    if [ -n "$gen" ] && [ "${gen%/*}" = "${gen#*/}" ] && [ "$healthy" = "$2" ] \
      && [ "$desired" = "$3" ] && [ "$allowed" = "$4" ]; then
      return 0
    fi
    [ "$SECONDS" -lt "$deadline" ] \
      || fail "budget $1: status '$s' (observed/generation healthy desired allowed), expected healthy $2 desired $3 allowed $4 within $5 s"
    sleep 0.5
  done
}

# evictions_json: the /debug/evictions document.
evictions_json() { curl "${METRICS_CURL[@]}" -fsS --max-time 10 "$METRICS_URL/debug/evictions"; }
# listed_as: "pod state why attempts" for each of this test's pods /debug/evictions lists.
listed_as() {
  evictions_json | python3 -c '
import json, sys
for e in json.load(sys.stdin)["evictions"]:
    if e["pod"].startswith(sys.argv[1] + "/"):
        print(e["pod"].split("/", 1)[1], e["state"], e["why"] or "-", e["attempts"])' "$NS"
}

# events_counted POD REASON: "type|count|message" of the pod's events with that reason.
events_counted() {
  k -n "$NS" get events --field-selector "reason=$2,involvedObject.name=$1" \
    -o jsonpath='{range .items[*]}{.type}|{.count}|{.message}{"\n"}{end}'
}

# ---- kube-controller-manager: the disruption controller only ------------------------------------
setup_rbac
KCM_LOG="$WORK/kcm.log"
"$kcm" --kubeconfig="$KUBECONFIG" --controllers=disruption --leader-elect=false \
  --use-service-account-credentials=false --port=0 --secure-port=0 >"$KCM_LOG" 2>&1 &
KCM_PID=$!
CONTROLLER_LOGS+=("$KCM_LOG")

# ---- nodes, pods, budgets ------------------------------------------------------------------------
N1="tec-e2e-evict-maint-$SUFFIX"
N2="tec-e2e-evict-oos-$SUFFIX"
make_node "$N1"
make_node "$N2"
APP_A="a-$SUFFIX"
APP_B="b-$SUFFIX"
pod_yaml() {  # pod_yaml NAME NODE [APP]
  local labels=""
  [ -z "${3:-}" ] || labels="  labels: {app: $3}"
  cat <<EOT
---
apiVersion: v1
kind: Pod
metadata:
  name: $1
  namespace: $NS
$labels
spec:
  nodeName: $2
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 30
  containers:
  - name: pause
    image: registry.k8s.io/pause:3.9
EOT
}
pdb_yaml() {  # pdb_yaml NAME APP (apiserver 1.20 serves policy/v1beta1 only)
  cat <<EOT
---
apiVersion: policy/v1beta1
kind: PodDisruptionBudget
metadata:
  name: $1
  namespace: $NS
spec:
  minAvailable: 2
  selector:
    matchLabels: {app: $2}
EOT
}
{
  pdb_yaml pdb-a "$APP_A"
  pdb_yaml pdb-b "$APP_B"
  pod_yaml a1 "$N1" "$APP_A"
  pod_yaml a2 "$N1" "$APP_A"
  pod_yaml b1 "$N2" "$APP_B"
  pod_yaml b2 "$N2" "$APP_B"
  pod_yaml free "$N1"
} | k apply -f - >/dev/null || fail "cannot create the pods and budgets"
# No kubelet: Running and Ready by hand, as the disruption controller and the Eviction API see them.
for p in a1 a2 b1 b2 free; do
  k -n "$NS" patch pod "$p" --subresource status --type merge \
    -p '{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}' >/dev/null \
    || fail "cannot make $NS/$p Running and Ready"
done
FREE_UID=$(pod_uid free)

deadline=$((SECONDS + KCM_START_S))
until grep -q 'Caches are synced for disruption' "$KCM_LOG"; do
  kill -0 "$KCM_PID" 2>/dev/null || fail "kube-controller-manager exited: $(tail -n 5 "$KCM_LOG")"
  [ "$SECONDS" -lt "$deadline" ] || fail "kube-controller-manager's disruption controller did not sync within $KCM_START_S s"
  sleep 0.3
done
wait_pdb pdb-a 2 2 0 60
wait_pdb pdb-b 2 2 0 60
log "kube-controller-manager (disruption only) runs; both budgets: 2 healthy, 2 desired, 0 disruptions allowed (${SECONDS} s)"

# ---- the controller in Evict mode ---------------------------------------------------------------
policy="$WORK/policy.yaml"
cat >"$policy" <<EOT
apiVersion: taint-eviction-controller/v1alpha1
kind: EvictionPolicy
evictionMode: Evict
fallbackAfter: 0s
taints:
  - key: node.kubernetes.io/out-of-service
    fallbackAfter: ${FALLBACK_S}s
EOT
start_controller evict --policy "$policy"
wait_acting "$CONTROLLER_LOG"

taint "$N1" tec.e2e/maintenance=1:NoExecute
taint "$N2" node.kubernetes.io/out-of-service=nodeshutdown:NoExecute
T=$(now_ms)

# `free` (no budget) goes at once, through the Eviction API.
until terminating free; do
  [ "$(since_t)" -lt 15000 ] || fail "$NS/free (no budget) was not evicted within 15 s of the taint"
  sleep 0.2
done
free_ms=$(since_t)
until grep -qF "evicted pod=\"$NS/free\" uid=$FREE_UID (Eviction API policy/v1beta1)" "$CONTROLLER_LOG"; do
  [ "$(since_t)" -lt 20000 ] \
    || fail "no 'evicted pod=\"$NS/free\" uid=$FREE_UID (Eviction API policy/v1beta1)' log line: $(grep -F "pod=\"$NS/free\"" "$CONTROLLER_LOG" | tail -n 3)"
  sleep 0.2
done
log "free (no budget) evicted through the Eviction API $(ms_to_s "$free_ms") s after the taint (bound 15 s)"

# The four budgeted pods: refused, listed as blocked. (Looked at before b1, b2 fall back at 20 s.)
wait_metric taint_eviction_controller_evictions_blocked 'v == 4' 12
blocked_ms=$(since_t)
[ "$blocked_ms" -lt $(((FALLBACK_S - 2) * 1000)) ] \
  || fail "the blocked gauge reached 4 only $(ms_to_s "$blocked_ms") s after the taint (the fallback is due at ${FALLBACK_S} s)"
listed=$(listed_as) || fail "cannot read /debug/evictions: $(evictions_json)"
for p in a1 a2 b1 b2; do
  grep -qE "^$p blocked pdb [0-9]+\$" <<<"$listed" \
    || fail "/debug/evictions does not list $NS/$p as blocked/pdb: $(tr '\n' ';' <<<"$listed")"
done
[ "$(wc -l <<<"$listed")" -eq 4 ] || fail "/debug/evictions lists more than a1, a2, b1, b2: $(tr '\n' ';' <<<"$listed")"
wait_metric taint_eviction_controller_pod_evictions_total 'v == 1' 5
log "at $(ms_to_s "$blocked_ms") s: evictions_blocked 4; /debug/evictions: $(tr '\n' ';' <<<"$listed")"
assert_not_terminating_for $(((15000 - $(since_t) + 999) / 1000)) a1 a2 b1 b2
log "a1, a2, b1, b2 not terminating at $(ms_to_s "$(since_t)") s"

wait_event a1 "Marking for deletion" 20
deadline=$((SECONDS + 30))
while :; do
  blocked_ev=$(events_counted a1 TaintEvictionBlocked) || blocked_ev=""
  IFS='|' read -r ev_type ev_count ev_message <<<"$blocked_ev"
  [ -n "$blocked_ev" ] && [ "${ev_count:-0}" -ge 2 ] && break
  [ "$SECONDS" -lt "$deadline" ] || fail "no TaintEvictionBlocked event with count >= 2 for $NS/a1 within 30 s: $blocked_ev"
  sleep 0.5
done
[ "$(wc -l <<<"$blocked_ev")" -eq 1 ] || fail "more than one TaintEvictionBlocked Event for $NS/a1: $blocked_ev"
[ "$ev_type" = Warning ] || fail "TaintEvictionBlocked is $ev_type, expected Warning"
[[ "$ev_message" == "Pod $NS/a1 not evicted yet: "* ]] || fail "TaintEvictionBlocked message: $ev_message"
grep -qF "disruption budget" <<<"$ev_message" || fail "TaintEvictionBlocked does not carry the API's message: $ev_message"
log "a1: TaintEvictionBlocked Warning, count $ev_count at $(ms_to_s "$(since_t)") s: $ev_message"

# ---- b1, b2: the out-of-service rule's fallback ---------------------------------------------------
# When each DELETE was accepted, by the apiserver's clock (this machine's): its deletionTimestamp
# less the grace period, to the second (metav1.Time has no fraction). Not when a poll saw it:
# the event wait above may end late on a loaded machine.
deleted_at() {  # deleted_at POD: milliseconds after T ("" while not terminating)
  local ts grace
  IFS='|' read -r ts grace <<<"$(k -n "$NS" get pod "$1" \
    -o jsonpath='{.metadata.deletionTimestamp}|{.metadata.deletionGracePeriodSeconds}')"
  [ -n "$ts" ] || return 0
  echo $((($(date -d "$ts" +%s) - grace) * 1000 - T))
}
until terminating b1 && terminating b2; do
  [ "$(since_t)" -lt $(((FALLBACK_S + 20) * 1000)) ] \
    || fail "b1/b2 not deleted by T+$((FALLBACK_S + 20)) s (fallbackAfter ${FALLBACK_S}s): $(pod_states | tr '\n' ' ')"
  sleep 0.3
done
seen_ms=$(since_t)
b1_ms=$(deleted_at b1)
b2_ms=$(deleted_at b2)
log "fallback: b1 deleted at $(ms_to_s "$b1_ms") s, b2 at $(ms_to_s "$b2_ms") s after the taint, by the apiserver's clock (fallbackAfter ${FALLBACK_S} s, bounds 18..$((FALLBACK_S + 15)) s; both seen at $(ms_to_s "$seen_ms") s)"
for p in b1 b2; do
  ms=${p}_ms
  [ "${!ms}" -ge 18000 ] || fail "$NS/$p deleted at $(ms_to_s "${!ms}") s, before its ${FALLBACK_S} s fallback"
  [ "${!ms}" -le $(((FALLBACK_S + 15) * 1000)) ] || fail "$NS/$p deleted at $(ms_to_s "${!ms}") s, long after its ${FALLBACK_S} s fallback"
  assert_disruption_condition "$p"
done
for p in b1 b2; do
  deadline=$((SECONDS + 20))
  until ev=$(events_with_reason "$p" TaintEvictionFallback) && [ -n "$ev" ]; do
    [ "$SECONDS" -lt "$deadline" ] || fail "no TaintEvictionFallback event for $NS/$p within 20 s"
    sleep 0.5
  done
  IFS='|' read -r ev_type ev_message _ <<<"$ev"
  [ "$ev_type" = Warning ] || fail "TaintEvictionFallback for $p is $ev_type, expected Warning"
  [[ "$ev_message" == "Deleting Pod $NS/$p"* ]] || fail "TaintEvictionFallback message for $p: $ev_message"
done
log "b1, b2: TaintEvictionFallback Warning: $ev_message"
wait_metric taint_eviction_controller_eviction_fallbacks_total 'v == 2' 10
wait_metric taint_eviction_controller_evictions_blocked 'v == 2' 10

# ---- a1, a2: no fallback for the maintenance taint -------------------------------------------------
rest=$(((45000 - $(since_t) + 999) / 1000))
[ "$rest" -le 0 ] || assert_not_terminating_for "$rest" a1 a2
wait_metric taint_eviction_controller_evictions_blocked 'v == 2' 5
listed=$(listed_as) || fail "cannot read /debug/evictions"
[ "$(tr '\n' ';' <<<"$listed" | sed -E 's/ [0-9]+;/;/g')" = "a1 blocked pdb;a2 blocked pdb;" ] \
  || fail "at $(ms_to_s "$(since_t)") s /debug/evictions lists: $(tr '\n' ';' <<<"$listed") (expected a1, a2 blocked/pdb)"
log "a1, a2 still not terminating at $(ms_to_s "$(since_t)") s (fallbackAfter 0s: never); blocked 2: $(tr '\n' ';' <<<"$listed")"

# ---- budget A allows one disruption ---------------------------------------------------------------
k -n "$NS" patch poddisruptionbudget pdb-a --type merge -p '{"spec":{"minAvailable":1}}' >/dev/null \
  || fail "cannot patch budget A"
P=$(now_ms)
gone="" stays=""
while [ -z "$gone" ]; do
  states=$(pod_states) || fail "cannot list pods"
  for p in a1 a2; do
    grep -qxF "$p=" <<<"$states" || gone="$gone $p"
  done
  [ $(($(now_ms) - P)) -lt 60000 ] || fail "neither a1 nor a2 evicted within 60 s of budget A allowing one: $(evictions_json)"
  sleep 0.3
done
evicted_ms=$(($(now_ms) - P))
gone=${gone# }
case "$gone" in
  a1) stays=a2 ;;
  a2) stays=a1 ;;
  *) fail "budget A allows one disruption, but both a1 and a2 were evicted" ;;
esac
wait_metric taint_eviction_controller_pod_evictions_total 'v == 2' 10
log "budget A at minAvailable 1: $gone evicted $(ms_to_s "$evicted_ms") s later (bound 60 s), $stays stays"
assert_not_terminating_for 20 "$stays"
wait_metric taint_eviction_controller_evictions_blocked 'v == 1' 5
listed=$(listed_as) || fail "cannot read /debug/evictions"
if ! grep -qE "^$stays blocked pdb [0-9]+\$" <<<"$listed" || [ "$(wc -l <<<"$listed")" -ne 1 ]; then
  fail "/debug/evictions lists: $(tr '\n' ';' <<<"$listed") (expected $stays blocked/pdb only)"
fi
log "$stays still blocked 20 s later: $(tr '\n' ';' <<<"$listed")"

# ---- the taint goes: the last eviction is cancelled ------------------------------------------------
k taint nodes "$N1" tec.e2e/maintenance:NoExecute- >/dev/null || fail "cannot untaint $N1"
wait_metric taint_eviction_controller_evictions_blocked 'v == 0' 20
wait_event "$stays" "Cancelling deletion" 30
[ -z "$(listed_as)" ] || fail "/debug/evictions still lists: $(listed_as | tr '\n' ';')"
terminating "$stays" && fail "$NS/$stays was evicted after all"
log "N1 untainted: $stays's eviction cancelled (blocked 0, \"Cancelling deletion\"), total $((($(now_ms) - T) / 1000)) s after the taint"
stop_controller "$CONTROLLER_PID"

# ---- bad policies: refused at start-up --------------------------------------------------------------
# expect_refused NAME FIELD VALUE: exit status 2 and one line naming the file, line 3, the field.
expect_refused() {
  local bad="$WORK/$1.yaml" rc=0 out named
  printf '%s\n' 'apiVersion: taint-eviction-controller/v1alpha1' 'kind: EvictionPolicy' "$2: $3" >"$bad"
  out=$(timeout 20 "$TEC_BIN" --kubeconfig "$SA_KUBECONFIG" --policy "$bad" \
    --health-probe-bind-address 127.0.0.1:0 --metrics-bind-address 0 2>&1) || rc=$?
  [ "$rc" -eq 2 ] || fail "$2: $3: exit status $rc, expected 2: $out"
  named=$(grep -F "$bad" <<<"$out") || fail "$2: $3: the output does not name $bad: $out"
  [ "$(wc -l <<<"$named")" -eq 1 ] || fail "$2: $3: more than one line names the file: $out"
  grep -qF "$bad:3:" <<<"$named" || fail "$2: $3: the error does not name line 3: $out"
  grep -qF "$2" <<<"$named" || fail "$2: $3: the error does not name the field: $out"
  log "$2: $3 refused with exit 2: $named"
}
expect_refused bad-mode evictionMode Foo
expect_refused bad-negative fallbackAfter -5s
expect_refused bad-syntax fallbackAfter abc
echo "PASS: $TEST_NAME"
