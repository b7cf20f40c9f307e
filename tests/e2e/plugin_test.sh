#!/usr/bin/env bash
# End to end, the kubectl plugin (issue 32 item 1), against the local kube-apiserver with the
# controller running as the deploy/ ServiceAccount:
#   - `kubectl taint-eviction` finds the plugin on PATH (kubectl-taint_eviction);
#   - `preview` on a node with a mix of pods (no toleration, tolerationSeconds 15, 3600 capped
#     to 25 by a taint rule, tolerated forever, the exclude annotation) and on a node whose
#     taint a rule ignores: golden tables (table and wide; the namespace's suffix, the "at"
#     clock times and the padding normalised), the summary, breaker, rate and policy lines,
#     JSON and YAML; the policy read from the ConfigMap taint-eviction-controller-policy; in
#     Evict mode (--policy FILE) the PodDisruptionBudget covering a pod and its allowance;
#   - bad arguments: one "error: ..." line, exit 2 (a taint that is not NoExecute, an empty
#     key, no effect, an unknown output format) or 1 (an unknown node or pod);
#   - `preview` agrees with the controller once the taint is on: every pod it says "now" is
#     evicted within 5 s, every "in Ns" at N s (+-5 s) after the taint, every "never" is still
#     there 10 s after the last of them;
#   - `pending` through --controller-url (the admin's token): the two scheduled evictions,
#     pending, due at their times; `pending` through the Lease (whose holder is no pod here, so
#     the port-forward fails): the fallback line on stderr and the TaintEvictionScheduled
#     Events; `explain`: the fresh decision and the pending entry.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PLUGIN_BIN=${TEC_PLUGIN_BIN:-$(dirname "$TEC_BIN")/kubectl-taint_eviction}
[ -x "$PLUGIN_BIN" ] || fail "the plugin $PLUGIN_BIN is not built"
mkdir -p "$WORK/bin"
ln -s "$(readlink -f "$PLUGIN_BIN")" "$WORK/bin/kubectl-taint_eviction"
export PATH="$WORK/bin:$PATH"
GOLDEN="$E2E_DIR/plugin_golden"
TAINT_KEY=tec-e2e-plugin
CONFIGMAP=taint-eviction-controller-policy

on_cleanup() {
  k -n "$DEPLOY_NS" delete configmap "$CONFIGMAP" --ignore-not-found >/dev/null 2>&1
}

setup_rbac
N1="tec-e2e-plugin-a-$SUFFIX"
N2="tec-e2e-plugin-b-$SUFFIX"
N3="tec-e2e-plugin-c-$SUFFIX"
for n in "$N1" "$N2" "$N3"; do make_node "$n"; done
make_pod plain "$N1"
make_pod tol15 "$N1" "$(toleration $TAINT_KEY x 15)"
make_pod capped "$N1" "$(toleration $TAINT_KEY x 3600)"
make_pod forever "$N1" "$(toleration $TAINT_KEY x)"
k apply -f - >/dev/null <<EOT || fail "cannot create pod $NS/excluded"
apiVersion: v1
kind: Pod
metadata:
  name: excluded
  namespace: $NS
  annotations: {taint-eviction-controller/exclude: "true"}
spec:
  nodeName: $N1
  automountServiceAccountToken: false
  containers: [{name: pause, image: registry.k8s.io/pause:3.9}]
EOT
make_pod ignored "$N2"

POLICY="$POLICY_HEADER
stormBreaker:
  maxTaintedNodesPercent: 90
taints:
  - key: ignored.e2e.example.com/*
    action: Ignore
  - key: $TAINT_KEY
    maxTolerationSeconds: 25"
publish_policy "$POLICY"
k -n "$DEPLOY_NS" create configmap "$CONFIGMAP" --from-file=policy.yaml="$POLICY_FILE" >/dev/null \
  || fail "cannot create the policy ConfigMap"

# plugin ARGS...: runs `kubectl taint-eviction ARGS`; sets OUT, ERR, RC.
plugin() {
  RC=0
  OUT=$(timeout 60 kubectl taint-eviction "$@" 2>"$WORK/stderr") || RC=$?
  ERR=$(cat "$WORK/stderr")
}
# The table as the golden files hold it: the suffix and the clock times out, the columns
# aligned again (cells hold single spaces; columns are 3 or more apart).
normalise() {
  sed -e "s/$SUFFIX/S/g" -e 's/(at [0-9:]*Z)/(at T)/g' -e 's/   */|/g' | column -t -s '|' -o '   '
}
check_golden() {  # check_golden NAME TEXT
  local want="$GOLDEN/$1.txt"
  if [ -n "${TEC_UPDATE_GOLDEN:-}" ]; then printf '%s\n' "$2" >"$want"; fi
  diff -u "$want" <(printf '%s\n' "$2") >&2 || fail "output differs from $want (above)"
}

# --- preview: golden tables ---
TAINTS_BEFORE=$(k get node "$N1" -o jsonpath='{.spec.taints}')
plugin preview "$N1" --taint "$TAINT_KEY=x:NoExecute"
[ "$RC" -eq 0 ] || fail "preview exited $RC: $ERR"
[ -z "$ERR" ] || fail "preview wrote to stderr: $ERR"
log "preview $N1:"$'\n'"$OUT"
table=$(sed -n '1,/^$/p' <<<"$OUT" | sed '/^$/d' | normalise)
check_golden preview "$table"
grep -qx "tainting $N1 with $TAINT_KEY=x:NoExecute .*" <<<"$OUT" || fail "no summary line: $OUT"
grep -qE "^storm breaker: [0-9]+ of [0-9]+ nodes carry NoExecute taints it counts now, [0-9]+ would \([0-9]+%\); it opens above 90%: it would stay closed$" <<<"$OUT" \
  || fail "no storm breaker line: $OUT"
grep -qx "rate limit: none: 1 immediate eviction starts at once" <<<"$OUT" || fail "no rate line: $OUT"
grep -qx "policy: ConfigMap $DEPLOY_NS/$CONFIGMAP: .*" <<<"$OUT" || fail "no policy line: $OUT"

plugin preview "$N1" --taint "$TAINT_KEY=x:NoExecute" -o wide
[ "$RC" -eq 0 ] || fail "preview -o wide exited $RC: $ERR"
check_golden preview-wide "$(sed -n '1,/^$/p' <<<"$OUT" | sed '/^$/d' | normalise)"

plugin preview -l tec.test/e2e=true --taint "ignored.e2e.example.com/x:NoExecute" --policy "$POLICY_FILE"
[ "$RC" -eq 0 ] || fail "preview -l exited $RC: $ERR"
grep -q "^$NS   *ignored   *$N2   *never" <<<"$OUT" || fail "preview -l does not list $N2's pod: $OUT"
plugin preview "$N2" --taint "ignored.e2e.example.com/x:NoExecute"
[ "$RC" -eq 0 ] || fail "preview $N2 exited $RC: $ERR"
check_golden preview-ignored "$(sed -n '1,/^$/p' <<<"$OUT" | sed '/^$/d' | normalise)"

# Evict mode (--policy FILE, tried before it goes in the ConfigMap): the PodDisruptionBudget
# covering a pod evicted now, and its allowance (0: no controller-manager computes one here).
k -n "$NS" label pod plain tec.test/app=plain >/dev/null || fail "cannot label $NS/plain"
pdb_version=policy/v1beta1
k api-versions | matches -x policy/v1 && pdb_version=policy/v1
k apply -f - >/dev/null <<EOT || fail "cannot create the PodDisruptionBudget"
apiVersion: $pdb_version
kind: PodDisruptionBudget
metadata: {name: plain-budget, namespace: $NS}
spec:
  maxUnavailable: 0
  selector: {matchLabels: {tec.test/app: plain}}
EOT
printf '%s\nevictionMode: Evict\n' "$POLICY_HEADER" >"$WORK/evict.yaml"
plugin preview "$N1" --taint "$TAINT_KEY=x:NoExecute" --policy "$WORK/evict.yaml"
[ "$RC" -eq 0 ] || fail "preview --policy exited $RC: $ERR"
grep -qE "^$NS +plain +$N1 +now +no toleration for $TAINT_KEY=x:NoExecute; PDB $NS/plain-budget allows 0 now\$" <<<"$OUT" \
  || fail "preview in Evict mode does not name the budget: $OUT"
grep -qx "policy: $WORK/evict.yaml: .*" <<<"$OUT" || fail "preview --policy does not say it used the file: $OUT"
log "Evict mode: $(grep "^$NS *plain " <<<"$OUT")"

plugin preview "$N1" --taint "$TAINT_KEY=x:NoExecute" -o yaml
[ "$RC" -eq 0 ] && grep -qx "taint: \"$TAINT_KEY=x:NoExecute\"" <<<"$OUT" || fail "preview -o yaml: $RC $OUT $ERR"
plugin preview "$N1" --taint "$TAINT_KEY=x:NoExecute" -o json
[ "$RC" -eq 0 ] || fail "preview -o json exited $RC: $ERR"
PREVIEW_JSON=$OUT
# pod outcome seconds, one line each
expected=$(python3 -c "
import json, sys
doc = json.load(sys.stdin)
for p in doc['pods']:
    print(p['name'], p['outcome'], p['seconds'] if p['seconds'] is not None else '-')" <<<"$PREVIEW_JSON")
log "preview says:"$'\n'"$expected"
[ "$(wc -l <<<"$expected")" -eq 5 ] || fail "preview lists $(wc -l <<<"$expected") pods, expected 5"
expected+=$'\nignored never -'  # $N2's, previewed above with the taint its rule ignores
# Read-only: the node's taints are as they were (the API server's not-ready:NoSchedule).
[ "$(k get node "$N1" -o jsonpath='{.spec.taints}')" = "$TAINTS_BEFORE" ] || fail "preview changed $N1's taints"

# --- bad arguments: one line, exit 2 or 1 ---
expect_error() {  # expect_error RC PATTERN ARGS...
  local want=$1 pattern=$2
  shift 2
  plugin "$@"
  [ "$RC" -eq "$want" ] || fail "'$*' exited $RC, expected $want (stderr: $ERR)"
  [ "$(wc -l <<<"$ERR")" -eq 1 ] || fail "'$*' wrote more than one line: $ERR"
  grep -q "^error: $pattern" <<<"$ERR" || fail "'$*' wrote '$ERR', expected 'error: $pattern'"
  [ -z "$OUT" ] || fail "'$*' wrote to stdout: $OUT"
}
expect_error 2 'invalid taint spec "a=b:NoSchedule"' preview "$N1" --taint a=b:NoSchedule
expect_error 2 'invalid taint spec "=x:NoExecute"' preview "$N1" --taint =x:NoExecute
expect_error 2 'invalid taint spec "a=b"' preview "$N1" --taint a=b
expect_error 2 'unable to match a printer' preview "$N1" --taint a:NoExecute -o xml
expect_error 2 '' preview "$N1"
expect_error 1 "nodes \"nope-$SUFFIX\" not found" preview "nope-$SUFFIX" --taint a:NoExecute
expect_error 1 'pods "nope" not found' explain nope -n "$NS"
log "bad arguments: one line each, exit 2 (usage) or 1 (not found)"

# --- the controller, then the taint ---
start_controller main --policy "$POLICY_FILE"
wait_acting "$CONTROLLER_LOG"
t0=$(now_ms)
taint "$N1" "$TAINT_KEY=x:NoExecute"
t1=$(now_ms)
# From now on, a poller beside the checks below notes when each pod is first seen terminating
# ("name ms-after-t0" lines), so the pending and explain checks do not delay the measurement.
EVICTED="$WORK/evicted"
: >"$EVICTED"
(
  set +e
  seen=" "
  while :; do
    states=$(pod_states 2>/dev/null)
    now=$(now_ms)
    while IFS='=' read -r name ts; do
      if [ -n "$name" ] && [ -n "$ts" ] && [[ $seen != *" $name "* ]]; then
        seen+="$name "
        echo "$name $((now - t0))" >>"$EVICTED"
      fi
    done <<<"$states"
    sleep 0.25
  done
) &
POLLER=$!
on_cleanup() {
  kill "$POLLER" 2>/dev/null
  k -n "$DEPLOY_NS" delete configmap "$CONFIGMAP" --ignore-not-found >/dev/null 2>&1
}
taint "$N2" "ignored.e2e.example.com/x:NoExecute"
log "tainted $N1 (the call took $((t1 - t0)) ms) and $N2"

# pending through --controller-url, with the admin's token
wait_scheduled "$CONTROLLER_LOG" capped 30
plugin pending -n "$NS" --controller-url "$METRICS_URL"
[ "$RC" -eq 0 ] || fail "pending --controller-url exited $RC: $ERR"
log "pending --controller-url:"$'\n'"$OUT"
for p in tol15 capped; do
  grep -qE "^$p +$N1 +$TAINT_KEY=x:NoExecute +[0-9T:.-]+Z \(in [0-9]+s\) +pending +<none>$" <<<"$OUT" \
    || fail "pending does not list $p as pending: $OUT"
done
[ "$(sed 1d <<<"$OUT" | wc -l)" -eq 2 ] || fail "pending lists more than tol15 and capped: $OUT"
plugin explain tol15 -n "$NS" --controller-url "$METRICS_URL"
[ "$RC" -eq 0 ] || fail "explain exited $RC: $ERR"
log "explain tol15:"$'\n'"$OUT"
grep -q "^Decision now: evicted 15s after the taint: " <<<"$OUT" || fail "explain: no decision: $OUT"
grep -q "^Pending on the acting replica ($METRICS_URL): pending, due " <<<"$OUT" || fail "explain: no pending entry: $OUT"

# pending through the Lease: its holder is this host, no pod, so the fallback
plugin pending -n "$NS"
[ "$RC" -eq 0 ] || fail "pending (fallback) exited $RC: $ERR"
grep -q "^could not reach the acting replica (.*): showing TaintEvictionScheduled events instead$" <<<"$ERR" \
  || fail "pending did not say it fell back: $ERR"
log "pending through the Lease: $ERR"$'\n'"$OUT"
for p in tol15 capped; do
  grep -qE "^$p +$N1 +$TAINT_KEY=x:NoExecute +[0-9T:-]+Z \(in [0-9]+s\) +scheduled +Event: tolerationSeconds [0-9]+$" <<<"$OUT" \
    || fail "the fallback does not list $p: $OUT"
done

# --- agreement: every pod evicted when preview said ---
last=0
while read -r name what secs; do
  case $what in after) [ "$secs" -gt "$last" ] && last=$secs ;; esac
done <<<"$expected"
deadline=$((t0 + (last + 10) * 1000))
while [ "$(now_ms)" -lt "$deadline" ]; do sleep 0.5; done
kill "$POLLER" 2>/dev/null
wait "$POLLER" 2>/dev/null || true
declare -A evicted_ms
while read -r name ms; do evicted_ms[$name]=$ms; done <"$EVICTED"
tolerance=5000
while read -r name what secs; do
  got=${evicted_ms[$name]:-}
  case $what in
    now)
      [ -n "$got" ] && [ "$got" -le "$tolerance" ] || fail "$name: preview said now, evicted at ${got:-never} ms"
      ;;
    after)
      [ -n "$got" ] && [ "$got" -ge $((secs * 1000 - tolerance)) ] && [ "$got" -le $((secs * 1000 + tolerance)) ] \
        || fail "$name: preview said in ${secs}s, evicted at ${got:-never} ms"
      ;;
    never)
      [ -z "$got" ] || fail "$name: preview said never, evicted at $got ms"
      ;;
  esac
  said=$what
  [ "$what" = after ] && said="in ${secs}s"
  if [ -n "$got" ]; then
    log "$name: preview said $said, evicted $got ms after the taint"
  else
    log "$name: preview said $said, not evicted in $((last + 10)) s"
  fi
done <<<"$expected"

# explain after the eviction: the replica's /debug/history has its record (the pod, terminating,
# is still there to explain: no kubelet finishes it).
plugin explain tol15 -n "$NS" --controller-url "$METRICS_URL"
[ "$RC" -eq 0 ] || fail "explain after the eviction exited $RC: $ERR"
log "explain tol15 after its eviction:"$'\n'"$OUT"
grep -q "^History (oldest first):$" <<<"$OUT" || fail "explain: no history: $OUT"
grep -qE "^ +[0-9T:.-]+Z deleted: scheduled [0-9T:.-]+Z, due [0-9T:.-]+Z, 1 attempt; node $N1, taints $TAINT_KEY=x:NoExecute" <<<"$OUT" \
  || fail "explain: no history line for the deletion: $OUT"
# ... and once the pod is gone (no kubelet here: force it), from the history alone.
k -n "$NS" delete pod tol15 --grace-period=0 --force >/dev/null 2>&1 || fail "cannot force-delete tol15"
plugin explain tol15 -n "$NS" --controller-url "$METRICS_URL"
[ "$RC" -eq 0 ] || fail "explain of the deleted pod exited $RC: $ERR"
grep -q "^Pod $NS/tol15 no longer exists; the acting replica ($METRICS_URL) remembers it.$" <<<"$OUT" \
  || fail "explain of the deleted pod: $OUT"
grep -qE "^ +[0-9T:.-]+Z deleted: " <<<"$OUT" || fail "explain of the deleted pod: no history line: $OUT"

stop_controller "$CONTROLLER_PID"
echo "PASS: $TEST_NAME"
