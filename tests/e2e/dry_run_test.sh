#!/usr/bin/env bash
# End to end: --dry-run over upstream's scenarios on the real API server. The controller decides
# everything and logs each decision ("dry run: would delete"), counts it in
# dry_run_pod_deletions_total, and writes nothing to pods: no deletionTimestamp, no
# DisruptionTarget condition, no TaintManagerEviction or TaintEvictionScheduled event, and not
# one PATCH or DELETE among the requests it sent (api_requests_total, counted by the
# controller's own client), over a meaningful interval after the evictions were due.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

setup_rbac
NODE="tec-e2e-dry-$SUFFIX"
make_node "$NODE"
make_pod untolerated "$NODE"
make_pod forever "$NODE" "$(toleration testTaint1 test1)"
make_pod three "$NODE" "$(toleration testTaint1 test1 3)"
make_pod other-key "$NODE" "$(toleration otherTaint other)"

start_controller dry --dry-run
wait_acting "$CONTROLLER_LOG"
taint "$NODE" testTaint1=test1:NoExecute

# would_delete POD: the decision is in the log.
would_delete() { grep -q "dry run: would delete pod=\"$NS/$1\"" "$CONTROLLER_LOG"; }
deadline=$((SECONDS + 60))
until would_delete untolerated && would_delete three && would_delete other-key; do
  [ "$SECONDS" -lt "$deadline" ] || fail "no 'would delete' for every untolerated pod within 60 s: $(grep 'would delete' "$CONTROLLER_LOG" | tr '\n' ' ')"
  sleep 0.3
done
log "logged: $(grep -c 'dry run: would delete' "$CONTROLLER_LOG") 'would delete' decisions"
would_delete forever && fail "the pod tolerating the taint forever was decided for deletion"

# Nothing happens to any pod for 10 s after the last one was due.
assert_not_terminating_for 10 untolerated forever three other-key
for p in untolerated three other-key; do
  c=$(k -n "$NS" get pod "$p" -o jsonpath='{.status.conditions[?(@.type=="DisruptionTarget")].status}')
  [ -z "$c" ] || fail "pod $NS/$p got a DisruptionTarget condition ($c) in dry-run"
  [ -z "$(events "$p")" ] || fail "pod $NS/$p got TaintManagerEviction events in dry-run: $(events "$p" | tr '\n' ' ')"
  [ -z "$(events_with_reason "$p" TaintEvictionScheduled)" ] \
    || fail "pod $NS/$p got a TaintEvictionScheduled event in dry-run: $(events_with_reason "$p" TaintEvictionScheduled)"
done

wait_metric taint_eviction_controller_dry_run_pod_deletions_total 'v >= 3' 30
[ "$(metric taint_eviction_controller_pod_deletions_total)" = 0 ] \
  || fail "pod_deletions_total is $(metric taint_eviction_controller_pod_deletions_total) in dry-run"
writes=$(curl "${METRICS_CURL[@]}" -fsS --max-time 5 "$METRICS_URL/metrics" \
  | awk '/^taint_eviction_controller_api_requests_total\{/ && /verb="(PATCH|DELETE)"/ { n += $2 } END { print n + 0 }')
[ "$writes" = 0 ] || fail "the controller sent $writes PATCH/DELETE requests in dry-run"
log "no deletion, condition, event, PATCH or DELETE; dry_run_pod_deletions_total $METRIC_VALUE"

stop_controller "$CONTROLLER_PID"
echo "PASS: $TEST_NAME"
