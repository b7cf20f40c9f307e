#!/usr/bin/env bash
# The side-by-side benchmark (bench/eviction_compare, issue 7) at its --quick scale against the
# test cluster: kube-controller-manager v1.20.2 (built and cached by cluster.sh) and ours run
# every scenario, and every scenario must produce a figure for both. Checks that `make bench`
# works; the figures themselves are not judged here (BENCHMARKS.md has the real run).
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

[ -n "${TEC_COMPARE_BIN:-}" ] && [ -x "$TEC_COMPARE_BIN" ] \
  || fail "TEC_COMPARE_BIN (bench/eviction_compare) is not set or not executable"

kcm=$("$REPO_ROOT/deploy/local/cluster.sh" build kube-controller-manager | tail -n 1)
[ -x "$kcm" ] || fail "no kube-controller-manager binary ('$kcm')"

out="$WORK/out"
log "running eviction_compare --quick (a few minutes)"
rc=0
timeout 1200 "$TEC_COMPARE_BIN" --kubeconfig "$KUBECONFIG" --cluster-dir "$TEC_CLUSTER_DIR" --kcm "$kcm" --tec "$TEC_BIN" \
  --namespace "$NS" --out-dir "$out" --quick \
  --restart-apiserver "$(printf '%q' "$REPO_ROOT/deploy/local/cluster.sh") down >&2 && $(printf '%q' "$REPO_ROOT/deploy/local/cluster.sh") up >&2" \
  >"$WORK/compare.out" 2>&1 || rc=$?
# What a failed run says about itself: its error lines (a scenario's may be further up than the
# tail) and the end of each controller's log (the work directory goes away with the test).
explain_failure() {
  tail -n 60 "$WORK/compare.out" >&2
  echo "---- error lines of the run:" >&2
  grep -E '^(error|FAILED|\[timer\]|\[mass\])' "$WORK/compare.out" | tail -n 20 >&2 || true
  for f in "$out"/*.log; do
    [ -f "$f" ] || continue
    echo "---- last lines of $f:" >&2
    tail -n 15 "$f" | cut -c1-400 >&2
  done
}
if [ "$rc" -ne 0 ]; then
  explain_failure
  fail "eviction_compare exited $rc"
fi
table="$out/eviction_compare.md"
[ -s "$table" ] || fail "no $table"
if grep -q 'FAILED' "$table"; then
  cat "$table" >&2
  explain_failure
  fail "a scenario failed"
fi
# Every scenario row has a figure for both controllers (the ratio may be n/a at this scale; a
# timer error may be negative: it is measured from the moment the bench's own watch saw the
# taint, which on a loaded machine can be later than the controller saw it).
for row in 'latency p50' 'limits lifted: throughput' 'QPS 20/30: throughput' 'timer error p99' \
  'due at once: first deletion' 'due at once: error p99' \
  'RSS, 1000 pods' 'scale: synced and acting, 200 pods' 'scale: synced and acting, 400 pods' \
  'scale: CPU during sync, 400 pods' 'scale: RSS steady, 400 pods' 'scale: RSS peak, 400 pods' \
  'scale: outage error p50' 'scale: outage error p99' 'scale: outage error max' \
  'scale: outage issue rate' 'scale: CPU per pod update'; do
  grep -E "^\| [0-9] \| [^|]*$row[^|]* \| -?[0-9.]+ [^|]+ \| -?[0-9.]+ [^|]+ \|" "$table" >/dev/null \
    || { cat "$table" >&2; fail "no figures for both controllers in the row '$row'"; }
done
grep -q '^Floor (6)' "$table" || fail "no floor line in $table"
# The scale scenario restarted the API server after seeding each size and went on.
[ "$(grep -c '^\[scale\] API server restarted' "$WORK/compare.out")" -eq 2 ] \
  || { tail -n 60 "$WORK/compare.out" >&2; fail "the scale scenario did not restart the API server twice"; }
cat "$table"
log "ok"
