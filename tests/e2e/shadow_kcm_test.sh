#!/usr/bin/env bash
# End to end: --shadow beside kube-controller-manager v1.20.2's taint manager (issue 14, item 5)
# on the real API server. Ours decides but writes nothing and compares its decisions with what
# the built-in one did to the same pods (a deletionTimestamp plus its "Marking for deletion Pod
# ns/name" event), reported at /debug/shadow on the metrics port.
#
# Phase A, upstream's scenarios with kube-controller-manager at its default API rate (20/s,
# burst 30): an untolerated pod on a tainted node, one tolerating 3 s, one forever, a node
# tainted under bound pods, a taint removed before a toleration ends, a NoSchedule taint, a
# second untolerated taint beside a tolerated one. Both controllers agree on every pod: agreed
# 4, cancelled on both 1, no only-them, no only-us, no disagreement listed, agreed evictions at
# most 5 s apart; the history of the built-in's evictions lists those 4, agreed.
#
# Phase B, ROUNDS rounds of the same-name race: kube-controller-manager 1.20 deletes by name
# without a UID precondition. Restarted with --kube-api-qps=1 --kube-api-burst=1, its DELETE
# leaves seconds after its decision (a decoy pod, created just before in the same call, takes
# the tokens first). Each round: pod web-N (untolerated) on a tainted node; once
# kube-controller-manager logged its decision, the test force-deletes web-N (preconditioned on
# the resourceVersion it created, so it fails if the built-in DELETE came first: that round
# did not race, counted, no error) and re-creates web-N (a new uid) on an untainted node in the
# same curl call; the late DELETE, retried by name, lands on the new pod. Every new uid it
# deleted must be listed exactly once, as only_them; ours never reports one as only_us. The
# force-deleted first pods are not compared (deletedByOthers: the one occurrence of each round
# proves the re-created pod's deletion). 20 of 20 rounds raced on a machine with a load of 8 on
# 2 cores.
#
# Phase C, the same race with kube-controller-manager unthrottled (--kube-api-qps=1000) and one
# pod name re-created every round (issue 33 item 7): see the phase. The whole test takes about
# 7 minutes on an idle machine, 11 with a load of 20; SHADOW_PHASES="C" runs one phase.
#
# Needs the kube-controller-manager binary (deploy/local/cluster.sh build kube-controller-manager,
# cached after the first build); without it the test fails with a line saying so.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ROUNDS=${ROUNDS:-20}
# --shadow-window, seconds: kube-controller-manager evicts within a second of us at its default
# rate, and its events trail its DELETEs by a few seconds when throttled (phase B).
readonly WINDOW=20
# tolerationSeconds of the pod whose taint is removed in time: the removal follows two log
# lines and a kubectl call, seconds on a loaded machine.
readonly CANCEL_TOL=30
readonly KCM_START_S=300  # bound on kube-controller-manager's start (discovery is throttled too)

for c in python3 base64; do
  command -v "$c" >/dev/null 2>&1 || fail "$c not found on PATH"
done
kcm=$("$REPO_ROOT/deploy/local/cluster.sh" build kube-controller-manager 2>"$WORK/kcm-build.err" | tail -n 1) || true
[ -n "$kcm" ] && [ -x "$kcm" ] \
  || fail "no kube-controller-manager v1.20.2 binary (deploy/local/cluster.sh build kube-controller-manager: $(tail -n 3 "$WORK/kcm-build.err" | tr '\n' ' '))"

# ---- kube-controller-manager ----------------------------------------------------------------
KCM_PID=""
on_cleanup() { [ -z "$KCM_PID" ] || stop_kcm; }

# start_kcm NAME QPS BURST: the node lifecycle controller only, its taint manager on (the 1.20
# default), node health monitoring out of the way (fake nodes never report). Returns once the
# taint manager runs (its caches synced); sets KCM_PID, KCM_LOG.
start_kcm() {
  KCM_LOG="$WORK/kcm-$1.log"
  "$kcm" --kubeconfig="$KUBECONFIG" --controllers=nodelifecycle --leader-elect=false \
    --node-monitor-grace-period=1h --node-startup-grace-period=1h --port=0 --secure-port=0 \
    --kube-api-qps="$2" --kube-api-burst="$3" >"$KCM_LOG" 2>&1 &
  KCM_PID=$!
  CONTROLLER_LOGS+=("$KCM_LOG")
  local deadline=$((SECONDS + KCM_START_S))
  until grep -q 'Starting NoExecuteTaintManager' "$KCM_LOG"; do
    kill -0 "$KCM_PID" 2>/dev/null || fail "kube-controller-manager ($1) exited: $(tail -n 5 "$KCM_LOG")"
    [ "$SECONDS" -lt "$deadline" ] || fail "kube-controller-manager ($1) did not start its taint manager within $KCM_START_S s"
    sleep 0.2
  done
}

stop_kcm() {  # its exit status after SIGTERM is of no interest
  kill -TERM "$KCM_PID" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$KCM_PID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$KCM_PID" 2>/dev/null || true
  wait "$KCM_PID" 2>/dev/null || true
  KCM_PID=""
}

# wait_for SECONDS WHAT COMMAND...: until COMMAND succeeds (polled every 50 ms: the race
# reacts to what it waits for), or fails the test saying WHAT did not happen.
wait_for() {
  local deadline=$(($(now_ms) + $1 * 1000)) what=$2
  shift 2
  until "$@"; do
    [ "$(now_ms)" -lt "$deadline" ] || fail "$what"
    sleep 0.05
  done
}
# wait_until SECONDS COMMAND...: the same, returning 1 instead of failing the test.
wait_until() {
  local deadline=$(($(now_ms) + $1 * 1000))
  shift
  until "$@"; do
    [ "$(now_ms)" -lt "$deadline" ] || return 1
    sleep 0.05
  done
}

# kcm_decided POD: kube-controller-manager logged its decision to delete $NS/POD.
kcm_decided() { grep -qF "NoExecuteTaintManager is deleting Pod: $NS/$1" "$KCM_LOG"; }
wait_kcm_decided() {  # wait_kcm_decided POD SECONDS
  wait_for "$2" "kube-controller-manager did not decide to delete $NS/$1 within $2 s" kcm_decided "$1"
}

# ---- the report -----------------------------------------------------------------------------
# shadow_get: /debug/shadow into $WORK/shadow.json (fails the test if it is not JSON).
shadow_get() {
  curl "${METRICS_CURL[@]}" -fsS --max-time 5 "$METRICS_URL/debug/shadow" >"$WORK/shadow.json" \
    || fail "GET $METRICS_URL/debug/shadow failed"
  python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$WORK/shadow.json" 2>/dev/null \
    || fail "/debug/shadow is not JSON: $(head -c 300 "$WORK/shadow.json")"
}
# shadow_counts: "agreed onlyThem onlyUs cancelledBoth pending" of the last shadow_get.
shadow_counts() {
  python3 -c 'import json, sys
c = json.load(open(sys.argv[1]))["counts"]
print(*(int(c[k]) for k in ("agreed", "onlyThem", "onlyUs", "cancelledBoth", "pending")))' \
    "$WORK/shadow.json" || fail "/debug/shadow has no counts: $(head -c 300 "$WORK/shadow.json")"
}
# disagreements: "outcome uid pod" lines of the last shadow_get.
disagreements() {
  python3 -c 'import json, sys
for d in json.load(open(sys.argv[1]))["disagreements"]:
    print(d["outcome"], d["uid"], d["pod"])' "$WORK/shadow.json" \
    || fail "/debug/shadow has no disagreements list: $(head -c 300 "$WORK/shadow.json")"
}
# check_only_them FILE: every "uid pod" line of FILE is listed exactly once in the last
# shadow_get, as only_them, with ours "none", on the untainted node, theirs a deletion with
# kube-controller-manager's event for that name; prints the first problem, nothing if none.
check_only_them() {
  python3 - "$WORK/shadow.json" "$1" "$UNTAINTED" <<'EOP'
import json, sys
listed = json.load(open(sys.argv[1]))["disagreements"]
for line in open(sys.argv[2]):
    uid, pod = line.split()
    entries = [d for d in listed if d["uid"] == uid]
    if not entries:
        print(f"{pod} (uid {uid}) is not listed")
        break
    d = entries[0]
    if len(entries) != 1 or d["outcome"] != "only_them" or d["ours"] != "none" \
            or d["node"] != sys.argv[3] or "Marking for deletion Pod " + pod not in d["theirs"]:
        print(f"{pod} (uid {uid}) is listed as {entries}")
        break
EOP
}

# ---- the API server by curl (one process per step: the race is a matter of milliseconds) -----
api_setup() {
  local ca
  raw() { k config view --raw --minify -o jsonpath="$1"; }
  API=$(raw '{.clusters[0].cluster.server}')
  ca=$(raw '{.clusters[0].cluster.certificate-authority-data}')
  if [ -n "$ca" ]; then
    base64 -d <<<"$ca" >"$WORK/ca.crt"
  else
    cp "$(raw '{.clusters[0].cluster.certificate-authority}')" "$WORK/ca.crt" || fail "no CA in $KUBECONFIG"
  fi
  (umask 077 && printf 'Authorization: Bearer %s\n' "$(raw '{.users[0].user.token}')" >"$WORK/auth.h")
  grep -q 'Bearer .' "$WORK/auth.h" || fail "the admin kubeconfig has no token (curl needs one)"
  # (The API server pretty-prints for curl's user agent.)
  CURL=(curl -sS -A tec-e2e --max-time 20 --cacert "$WORK/ca.crt" -H @"$WORK/auth.h" -H 'Content-Type: application/json')
}
pod_json() {  # pod_json NAME NODE
  printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"%s","namespace":"%s"},"spec":{"nodeName":"%s","automountServiceAccountToken":false,"terminationGracePeriodSeconds":30,"containers":[{"name":"pause","image":"registry.k8s.io/pause:3.9"}]}}' \
    "$1" "$NS" "$2"
}
# api_create_pair FIRST SECOND NODE: POSTs both pods, in that order, in one curl process;
# prints "uid resourceVersion" of the second.
api_create_pair() {
  local codes
  codes=$("${CURL[@]}" -o "$WORK/first.json" -w '%{http_code} ' -X POST --data "$(pod_json "$1" "$3")" \
    "$API/api/v1/namespaces/$NS/pods" \
    --next "${CURL[@]:1}" -o "$WORK/second.json" -w '%{http_code} ' -X POST \
    --data "$(pod_json "$2" "$3")" "$API/api/v1/namespaces/$NS/pods") || fail "POST pods $1, $2 failed"
  [ "$codes" = "201 201 " ] \
    || fail "POST pods $1, $2: HTTP $codes: $(head -c 300 "$WORK/first.json") $(head -c 300 "$WORK/second.json")"
  # The first uid and resourceVersion are the metadata's (no python3 start-up: it would cost
  # the race a second on a busy machine).
  echo "$(json_field uid <"$WORK/second.json") $(json_field resourceVersion <"$WORK/second.json")"
}
# json_field NAME: the first "NAME":"value" string of compact JSON on stdin.
json_field() { grep -o "\"$1\": *\"[^\"]*\"" | head -n 1 | cut -d'"' -f4; }
# api_pod NAME: "uid deletionTimestamp" ("" when gone).
api_pod() {
  local body
  body=$("${CURL[@]}" -f "$API/api/v1/namespaces/$NS/pods/$1" 2>/dev/null) || return 0
  echo "$(json_field uid <<<"$body") $(json_field deletionTimestamp <<<"$body")"
}

# api_event_messages NAME: the messages of the pod's TaintManagerEvictions events, one a line.
api_event_messages() {
  "${CURL[@]}" -f "$API/api/v1/namespaces/$NS/events?fieldSelector=involvedObject.name%3D$1,reason%3DTaintManagerEviction" 2>/dev/null \
    | grep -o '"message": *"[^"]*"' | cut -d'"' -f4 || true
}
# wait_kcm_event POD MESSAGE_PREFIX SECONDS: until kube-controller-manager's event is written.
kcm_event() { api_event_messages "$1" | matches "^$2"; }
wait_kcm_event() {
  wait_for "$3" "no '$2' event for $NS/$1 within $3 s" kcm_event "$1" "$2"
}
# recreated_deleted POD: POD (re-created under the same name) has a deletionTimestamp.
recreated_deleted() {
  local ts
  read -r _ ts <<<"$(api_pod "$1")"
  [ -n "$ts" ]
}

setup_rbac
api_setup
# SHADOW_PHASES: the phases to run (all by default; one alone to reproduce it).
phase() { [[ " ${SHADOW_PHASES:-A B C} " == *" $1 "* ]]; }
node() { echo "tec-e2e-shadow-$1-$SUFFIX"; }
start_controller shadow --shadow --shadow-window="${WINDOW}s"
wait_acting "$CONTROLLER_LOG"
log "ours (--shadow --shadow-window=${WINDOW}s) acts (${SECONDS} s)"

# race_setup NAME QPS: nodes $TAINTED (tainted) and $UNTAINTED, kube-controller-manager
# (re)started as NAME with --kube-api-qps=QPS --kube-api-burst=QPS.
race_setup() {
  make_node "$TAINTED"
  make_node "$UNTAINTED"
  taint "$TAINTED" testTaint1=test1:NoExecute
  start_kcm "$1" "$2" "$2"
  log "kube-controller-manager restarted with --kube-api-qps=$2 --kube-api-burst=$2 (${SECONDS} s)"
}

# ---- phase A: upstream's scenarios ---------------------------------------------------------
if phase A; then
for n in a b c d; do make_node "$(node "$n")"; done
taint "$(node a)" testTaint1=test1:NoExecute
taint "$(node c)" testTaint1=test1:NoSchedule
taint "$(node d)" testTaint1=test1:NoExecute

start_kcm default 20 30
log "kube-controller-manager acts (${SECONDS} s)"

# Pods on node b before it is tainted.
make_pod b-bound "$(node b)"
make_pod b-cancel "$(node b)" "$(toleration testTaint1 test1 "$CANCEL_TOL")"
# Pods created on tainted nodes.
make_pod a-untolerated "$(node a)"
make_pod a-three "$(node a)" "$(toleration testTaint1 test1 3)"
make_pod a-forever "$(node a)" "$(toleration testTaint1 test1)"
make_pod c-noschedule "$(node c)"
make_pod d-second "$(node d)" "$(toleration testTaint1 test1)"

# A taint on a node with bound pods; removed once both controllers decided b-bound (so both saw
# it and scheduled b-cancel), well before b-cancel's toleration ends.
tainted_b_at=$SECONDS
taint "$(node b)" testTaint1=test1:NoExecute
we_decided() { grep -q "would delete pod=\"$NS/$1\"" "$CONTROLLER_LOG"; }
wait_kcm_decided b-bound 60
wait_for 60 "ours did not decide to delete $NS/b-bound within 60 s" we_decided b-bound
k taint nodes "$(node b)" testTaint1:NoExecute- >/dev/null || fail "cannot untaint node b"
untainted_at=$SECONDS
[ $((untainted_at - tainted_b_at)) -lt $((CANCEL_TOL - 5)) ] \
  || fail "node b was untainted $((untainted_at - tainted_b_at)) s after its taint, too close to b-cancel's $CANCEL_TOL s toleration for a cancel"
# A second, untolerated taint beside a tolerated one.
taint "$(node d)" testTaint2=test2:NoExecute

for p in a-untolerated a-three b-bound d-second; do wait_terminating "$p" 60; done
wait_event b-cancel "Cancelling deletion" 60

# Settled: b-cancel's cancel a window ago (cancelled_both), past the end of its toleration (the
# built-in one did not evict it late either), nothing pending.
settled_at=$((untainted_at + WINDOW + 2))
[ "$settled_at" -ge $((tainted_b_at + CANCEL_TOL + 5)) ] || settled_at=$((tainted_b_at + CANCEL_TOL + 5))
deadline=$((settled_at + 120))
while :; do
  shadow_get
  read -r agreed only_them only_us cancelled pending <<<"$(shadow_counts)"
  if [ "$SECONDS" -ge "$settled_at" ] && [ "$pending" -eq 0 ]; then
    break
  fi
  [ "$SECONDS" -lt "$deadline" ] || fail "the shadow report did not settle: $(cat "$WORK/shadow.json")"
  sleep 1
done
assert_not_terminating_for 1 a-forever b-cancel c-noschedule
[ "$only_them" -eq 0 ] && [ "$only_us" -eq 0 ] && [ "$agreed" -eq 4 ] && [ "$cancelled" -eq 1 ] \
  || fail "upstream scenarios: expected agreed 4, onlyThem 0, onlyUs 0, cancelledBoth 1: $(cat "$WORK/shadow.json")"
[ -z "$(disagreements)" ] || fail "upstream scenarios: disagreements listed: $(disagreements | tr '\n' ';')"
wait_metric 'taint_eviction_controller_shadow_decisions_total{outcome="agreed"}' 'v == 4' 10
wait_metric 'taint_eviction_controller_shadow_decisions_total{outcome="cancelled_both"}' 'v == 1' 10
wait_metric 'taint_eviction_controller_shadow_decisions_total{outcome="only_them"}' 'v == 0' 10
wait_metric 'taint_eviction_controller_shadow_decisions_total{outcome="only_us"}' 'v == 0' 10
wait_metric taint_eviction_controller_shadow_pending 'v == 0' 10
# Both evicted each pod at about the same time (a-three: both at about 3 s), not merely within
# the window.
delay_max=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["agreedDelaySeconds"]["max"])' "$WORK/shadow.json") \
  || fail "/debug/shadow has no agreedDelaySeconds.max: $(cat "$WORK/shadow.json")"
awk -v d="$delay_max" 'BEGIN { exit !(d >= 0 && d <= 5) }' \
  || fail "upstream scenarios: agreed evictions up to $delay_max s apart (expected within 5 s)"
log "upstream scenarios: agreed $agreed, cancelled on both $cancelled, no disagreement; agreed delay max ${delay_max} s"
# The built-in's history holds its 4 evictions, agreed, each proven by its event.
history=$(python3 -c 'import json, sys
for e in json.load(open(sys.argv[1]))["builtinEvictions"]:
    ok = e["evidence"] == "event: Marking for deletion Pod " + e["pod"] and e["oursAt"] != "never"
    print(e["pod"].split("/")[1], e["verdict"], "ok" if ok else e)' "$WORK/shadow.json" | sort | paste -sd,) \
  || fail "/debug/shadow has no builtinEvictions: $(cat "$WORK/shadow.json")"
[ "$history" = "a-three agreed ok,a-untolerated agreed ok,b-bound agreed ok,d-second agreed ok" ] \
  || fail "upstream scenarios: the built-in's history is $history"

# Out of phase B's way: the restarted kube-controller-manager would evict the Terminating pods
# on still-tainted nodes again.
stop_kcm
k -n "$NS" delete pods --all --grace-period=0 --force --wait=false >/dev/null 2>&1 || fail "cannot delete phase A's pods"
for n in a b c d; do k delete node "$(node "$n")" --wait=false >/dev/null || fail "cannot delete node $n"; done
fi

# ---- phase B: the same-name race -------------------------------------------------------------
if phase B; then
TAINTED=$(node t)
UNTAINTED=$(node u)
race_setup throttled 1

raced=0 not_raced=0 missed=0
: >"$WORK/race_uids"  # "uid ns/name" of each re-created pod kube-controller-manager deleted
for round in $(seq "$ROUNDS"); do
  # Decided together, the decoy's DELETE and event take the client's tokens before web-N's
  # DELETE: that one waits seconds for a token.
  read -r uid1 rv1 <<<"$(api_create_pair "decoy-$round" "web-$round" "$TAINTED")"
  wait_kcm_decided "web-$round" 60
  # Force-delete web-N if unchanged since created (the built-in DELETE would have changed it),
  # and re-create it on the untainted node, in one curl process.
  codes=$("${CURL[@]}" -o /dev/null -w '%{http_code} ' -X DELETE \
    --data "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\",\"gracePeriodSeconds\":0,\"preconditions\":{\"uid\":\"$uid1\",\"resourceVersion\":\"$rv1\"}}" \
    "$API/api/v1/namespaces/$NS/pods/web-$round" \
    --next "${CURL[@]:1}" -o /dev/null -w '%{http_code} ' -X POST \
    --data "$(pod_json "web-$round" "$UNTAINTED")" "$API/api/v1/namespaces/$NS/pods") \
    || fail "round $round: the delete/create curl failed"
  if [ "$codes" != "200 201 " ]; then
    # The built-in DELETE was first: no race this round.
    not_raced=$((not_raced + 1))
    log "round $round: kube-controller-manager's DELETE came first (HTTP $codes)"
    wait_kcm_event "web-$round" "Marking for deletion" 60
    continue
  fi
  # Its events queue behind its DELETEs, one at a time: wait for the last one of this round
  # (the cancel it logged when web-N went away), so that they do not fall further behind
  # every round (an event later than the window would not tell its eviction from another's).
  # It logs no cancel when its worker's DELETE (of the re-created web-N, by name) finished
  # before its watch told it the first web-N was gone (seen on a loaded machine: the worker's
  # queue entry is already spent then); the re-created pod, deleted, ends the round then.
  if ! wait_until 60 kcm_event "web-$round" "Cancelling deletion"; then
    recreated_deleted "web-$round" \
      || fail "no 'Cancelling deletion' event for $NS/web-$round within 60 s, and the re-created web-$round is not deleted"
    log "round $round: no cancel event (kube-controller-manager's worker was done before it saw web-$round go)"
  fi
  uid2=""
  deadline=$((SECONDS + 60))
  while :; do
    read -r uid ts <<<"$(api_pod "web-$round")"
    [ -n "$uid" ] || fail "round $round: the re-created web-$round vanished"
    [ "$uid" != "$uid1" ] || fail "round $round: web-$round still has the first uid"
    if [ -n "$ts" ]; then uid2=$uid; break; fi
    [ "$SECONDS" -lt "$deadline" ] || break
    sleep 0.2
  done
  if [ -z "$uid2" ]; then
    missed=$((missed + 1))
    log "round $round: the re-created web-$round was not deleted within 60 s"
    continue
  fi
  raced=$((raced + 1))
  echo "$uid2 $NS/web-$round" >>"$WORK/race_uids"
done
log "$ROUNDS rounds: $raced re-created pods deleted by kube-controller-manager, $not_raced rounds it was first, $missed re-created pods it left (${SECONDS} s)"
# 20 of 20 raced on an idle machine; a loaded one reacts slower (a round it loses is no error).
min_raced=$(((ROUNDS + 3) / 4))
[ "$raced" -ge "$min_raced" ] || fail "only $raced of $ROUNDS rounds raced (need at least $min_raced)"

# Settled: every new uid it deleted is only_them (and only that), nothing pending.
deadline=$((SECONDS + WINDOW + 120))
while :; do
  shadow_get
  problem=$(check_only_them "$WORK/race_uids") || fail "cannot read /debug/shadow: $(head -c 300 "$WORK/shadow.json")"
  read -r _ _ _ _ pending <<<"$(shadow_counts)"
  [ -n "$problem" ] || [ "$pending" -ne 0 ] || break
  [ "$SECONDS" -lt "$deadline" ] \
    || fail "the same-name race: $problem (pending $pending): $(cat "$WORK/shadow.json")"
  sleep 1
done
wait_metric 'taint_eviction_controller_shadow_decisions_total{outcome="only_them"}' "v >= $raced" 10
read -r agreed only_them only_us cancelled pending <<<"$(shadow_counts)"
log "report: agreed $agreed, onlyThem $only_them, onlyUs $only_us, cancelledBoth $cancelled; all $raced wrong evictions only_them (${SECONDS} s)"
stop_kcm
k -n "$NS" delete pods --all --grace-period=0 --force --wait=false >/dev/null 2>&1 || fail "cannot delete phase B's pods"
fi

# ---- phase C: the same-name race, unthrottled ------------------------------------------------
# kube-controller-manager at --kube-api-qps=1000 (issue 33 item 7): its DELETE follows its
# decision within milliseconds, so the race is rarer, but its DELETE retries a 404 by name
# 10 ms later. shadow_race.py re-creates one name, sts-0, every round (a StatefulSet's pod):
# all of the built-in's "Marking for deletion Pod ns/sts-0" are one Event whose count rises,
# and after 25 of them (Marking and Cancelling alike) client-go's spam filter drops its Events
# for that name (one every 5 minutes). Each round the driver force-deletes the second pod it
# created, so every name-only occurrence is there for a pod someone else deleted. Checked per
# round (ground truth: only the built-in deletes gracefully): every second pod it deleted is
# listed once, only_them in a round where its Marking Event's count rose, ambiguous (naming the
# first pod's uid) in one past the spam filter (before issue 47 those were not listed at all);
# no second pod the driver force-deleted is listed; no first pod is only_us or ambiguous (a pod
# ours would delete and someone else deleted is not compared). Before the fix of issue 33, 40
# rounds listed 25 of the driver's deletions as only_them and 12 of the first pods as only_us.
if phase C; then
C_ROUNDS=${C_ROUNDS:-30}
TAINTED=$(node ct)
UNTAINTED=$(node cu)
race_setup unthrottled 1000
# Then rounds go on until C_BLIND of them had a wrong deletion past the spam filter (the
# ambiguous case), C_MAX_ROUNDS in all at most.
C_BLIND=${C_BLIND:-2}
C_MAX_ROUNDS=${C_MAX_ROUNDS:-$((C_ROUNDS + 90))}
timeout $((C_MAX_ROUNDS * 30)) python3 "$E2E_DIR/shadow_race.py" "$API" "$WORK/ca.crt" "$WORK/auth.h" \
  "$NS" sts-0 "$TAINTED" "$UNTAINTED" "$C_ROUNDS" "$WORK/c_rounds" 2 "$C_BLIND" "$C_MAX_ROUNDS" \
  || fail "the race driver failed: $(tail -n 3 "$WORK/c_rounds" 2>/dev/null)"
c_wrong=$(awk '$6 == 1' "$WORK/c_rounds" | wc -l)
c_blind=$(awk '{ if ($6 == 1 && $7 <= m) n++; if ($7 > m) m = $7 } END { print n + 0 }' "$WORK/c_rounds")
c_marking=$(tail -n 1 "$WORK/c_rounds" | cut -d' ' -f7)
c_done=$(wc -l <"$WORK/c_rounds")
log "$c_done rounds: kube-controller-manager deleted $c_wrong re-created pods, $c_blind of them past its Events' spam filter; its Marking Event's count is $c_marking (${SECONDS} s)"
# The machine decides whether it races: too few races is no failure, but says so.
[ "$c_blind" -gt 0 ] \
  || log "NOTE: no wrong deletion past the spam filter in $c_done rounds: the ambiguous case was not exercised this run"
[ -z "${C_OUT:-}" ] || cp "$WORK/c_rounds" "$C_OUT"
# check_rounds: the first problem of the last shadow_get against the rounds, nothing if none.
check_rounds() {
  python3 - "$WORK/shadow.json" "$WORK/c_rounds" <<'EOP2'
import json, sys
listed = {}
for d in json.load(open(sys.argv[1]))["disagreements"]:
    listed.setdefault(d["uid"], []).append(d)
count = 0
firsts = []
for line in open(sys.argv[2]):
    rnd, _, uid1, _, uid2, theirs, marking = line.split()
    evidence, count = int(marking) > count, max(count, int(marking))
    got = listed.get(uid2, [])
    # Past client-go's spam filter their eviction has no Event: ambiguous, with why. The count
    # read after a round may miss that round's Event (it is written after the DELETE) and the
    # next one count it: a round without a rise may still have had its Event.
    want = [["only_them"]] if evidence else [["only_them"], ["ambiguous"]]
    if theirs == "1" and [d["outcome"] for d in got] not in want:
        print(f"round {rnd}: the re-created pod it deleted (uid {uid2}) is listed as {got}, not one of {want}")
        break
    # It names the latest pod of the name ours was due to evict: this round's first pod, or an
    # earlier round's when ours never decided on this one (created and gone within ms).
    firsts.append(uid1)
    if theirs == "1" and got[0]["outcome"] == "ambiguous" and not any(f"(uid {u})" in got[0]["theirs"] for u in firsts):
        print(f"round {rnd}: the ambiguous re-created pod (uid {uid2}) names none of the first pods: {got}")
        break
    if theirs == "0" and got:
        print(f"round {rnd}: the re-created pod the driver deleted (uid {uid2}) is listed as {got}")
        break
    if any(d["outcome"] in ("only_us", "ambiguous") for d in listed.get(uid1, [])):
        print(f"round {rnd}: the first pod (uid {uid1}) is listed as {listed[uid1]}")
        break
EOP2
}
deadline=$((SECONDS + 2 * WINDOW + 120))
while :; do
  shadow_get
  problem=$(check_rounds) || fail "cannot read /debug/shadow: $(head -c 300 "$WORK/shadow.json")"
  read -r _ _ _ _ pending <<<"$(shadow_counts)"
  [ -n "$problem" ] || [ "$pending" -ne 0 ] || break
  [ "$SECONDS" -lt "$deadline" ] \
    || fail "the unthrottled same-name race: $problem (pending $pending): $(cat "$WORK/shadow.json")"
  sleep 1
done
[ -z "${C_REPORT:-}" ] || cp "$WORK/shadow.json" "$C_REPORT"
read -r agreed only_them only_us cancelled pending <<<"$(shadow_counts)"
c_ambiguous=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["counts"].get("ambiguous", -1))' "$WORK/shadow.json")
log "report: agreed $agreed, onlyThem $only_them, onlyUs $only_us, ambiguous $c_ambiguous; all $c_wrong wrong evictions only_them (with their Event) or ambiguous (past the spam filter), none of the driver's deletions listed (${SECONDS} s)"
stop_kcm
fi

stop_controller "$CONTROLLER_PID"
echo "PASS: $TEST_NAME"
