#!/usr/bin/env bash
# End to end: the policy's scoping and per-taint rules (issue 15 items 1-2) against the real API
# server. With `exclude.podSelector` and a `taints` list (an Ignore prefix rule, a floor of 15 s
# and a cap of 25 s for testTaint1), on a node tainted testTaint1:NoExecute:
# - a pod without a toleration waits the floor (not before ~15 s) instead of going at once;
# - a pod tolerating 600 s goes at the cap (~25 s), and the log names the override;
# - a pod the selector matches, and a pod annotated taint-eviction-controller/exclude=true, stay;
# on a node with only an ignored vendor taint an untolerating pod stays. Then the annotation is
# removed (that pod goes after the floor) and a reload drops the selector (the labelled pod goes).
# The skip counters and the override counter are checked on /metrics. Last, a policy file with
# bad taint rules (key syntax, negative seconds, floor above cap) is refused at start-up with
# exit status 2 and one line naming every problem.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

setup_rbac
N1="tec-e2e-scope-$SUFFIX"
N2="tec-e2e-scope-vendor-$SUFFIX"
make_node "$N1"
make_node "$N2"

dir="$WORK/policy"
publish() { publish_policy "$1"; }
header=$POLICY_HEADER
rules='taints:
  - key: tec.e2e/vendor-*
    action: Ignore
  - key: testTaint1
    minTolerationSeconds: 15
    maxTolerationSeconds: 25'
publish "$header
exclude:
  podSelector:
    matchLabels:
      tec.e2e/protected: \"true\"
$rules"

start_controller scope --policy "$dir/policy.yaml"
wait_acting "$CONTROLLER_LOG"

make_pod plain "$N1"
make_pod long "$N1" "$(toleration testTaint1 test1 600)"
make_pod labelled "$N1"
k -n "$NS" label pod labelled tec.e2e/protected=true >/dev/null || fail "cannot label labelled"
make_pod annotated "$N1"
k -n "$NS" annotate pod annotated taint-eviction-controller/exclude=true >/dev/null \
  || fail "cannot annotate annotated"
make_pod vendor "$N2"

taint "$N2" tec.e2e/vendor-maintenance=1:NoExecute
T0=$(now_ms)
taint "$N1" testTaint1=test1:NoExecute

# Nothing goes before the floor: 12 s leaves 3 s for a slow start of the countdown.
assert_not_terminating_for 12 plain long labelled annotated vendor
wait_terminating plain 40
plain_ms=$(($(now_ms) - T0))
[ "$plain_ms" -ge 14000 ] || fail "plain was evicted after ${plain_ms} ms, before the 15 s floor"
log "the untolerating pod waited the floor: evicted at $((plain_ms / 1000)) s (floor 15 s)"
wait_terminating long 40
long_ms=$(($(now_ms) - T0))
[ "$long_ms" -ge 24000 ] || fail "long was evicted after ${long_ms} ms, before the 25 s cap"
[ "$long_ms" -le 60000 ] || fail "long was evicted after ${long_ms} ms, long after the 25 s cap"
log "the pod tolerating 600 s went at the cap: $((long_ms / 1000)) s (cap 25 s)"
grep -q "eviction time set by policy.*pod=\"$NS/long\".*toleration=600s.*maxTolerationSeconds=25" \
  "$CONTROLLER_LOG" || fail "no log line naming the override for long: $(grep 'set by policy' "$CONTROLLER_LOG" | tail -2)"

# Excluded pods stay over a meaningful interval (well past the cap).
assert_not_terminating_for 10 labelled annotated vendor
log "the selected, the annotated and the vendor-tainted pods stay past the cap"
wait_metric 'taint_eviction_controller_pods_skipped_total{reason="pod_selector"}' 'v >= 1' 10
wait_metric 'taint_eviction_controller_pods_skipped_total{reason="annotation"}' 'v >= 1' 10
wait_metric 'taint_eviction_controller_pods_skipped_total{reason="taint_ignored"}' 'v >= 1' 10
wait_metric taint_eviction_controller_toleration_overrides_total 'v >= 2' 10

# The annotation removed: the pod is decided afresh and waits the floor.
k -n "$NS" annotate pod annotated taint-eviction-controller/exclude- >/dev/null \
  || fail "cannot remove the annotation"
t1=$(now_ms)
wait_terminating annotated 45
ann_ms=$(($(now_ms) - t1))
[ "$ann_ms" -ge 13000 ] || fail "annotated was evicted ${ann_ms} ms after losing its annotation, before the floor"
log "the annotation removed: evicted $((ann_ms / 1000)) s later (floor 15 s)"

# A reload without the selector: the labelled pod is decided again at once.
publish "$header
$rules"
deadline=$((SECONDS + 30))
until grep -q "eviction policy reloaded from $dir/policy.yaml" "$CONTROLLER_LOG"; do
  [ "$SECONDS" -lt "$deadline" ] || fail "the reload was not applied within 30 s"
  sleep 0.3
done
wait_terminating labelled 45
assert_not_terminating_for 3 vendor
log "a reload without the selector: labelled evicted; the vendor taint still evicts nothing"
stop_controller "$CONTROLLER_PID"

# Bad rules: refused before anything starts, one line naming every problem.
bad="$WORK/bad.yaml"
printf '%s\n' "$header" 'taints:' '  - {key: "example.com/*x"}' \
  '  - {key: a, minTolerationSeconds: -5}' \
  '  - {key: b, minTolerationSeconds: 900, maxTolerationSeconds: 120}' >"$bad"
rc=0
out=$("$TEC_BIN" --kubeconfig "$SA_KUBECONFIG" --policy "$bad" 2>&1) || rc=$?
[ "$rc" -eq 2 ] || fail "a bad policy file: exit status $rc, expected 2 ($out)"
for want in 'taints\[0\].key: not a valid taint key or prefix' \
  'taints\[1\].minTolerationSeconds: must not be negative' \
  'taints\[2\].minTolerationSeconds: must not exceed maxTolerationSeconds'; do
  grep -q "$want" <<<"$out" || fail "the error does not say '$want': $out"
done
[ "$(grep -c 'taints\[' <<<"$out")" -eq 1 ] || fail "the error is not one line: $out"
log "bad rules refused with exit 2: $(head -c 300 <<<"$out")"
echo "PASS: $TEST_NAME"
