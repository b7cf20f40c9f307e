#!/usr/bin/env bash
# End to end, strangers against the secure port's authentication (issue 45, "Done when"), the
# controller with --metrics-secure (the default: each bearer token reviewed by the API server,
# TokenReview then SubjectAccessReview, an allowed decision cached 10 s):
#   - a flood of GET /metrics with random bearer tokens (32 threads on kept-alive connections,
#     as fast as they go, 40 s: more at once than the controller reviews at once)
#     beside legitimate readers, each read on a fresh TCP connection: a "known" reader that read
#     once before the flood and then reads every 12 s (longer than the decision cache: each of
#     its reads needs its token authenticated again), and a "frequent" reader scraping every
#     2 s (its decision expiring every 10 s under the flood). Every read of both must get 200.
#     A "fresh" reader, whose token the controller never saw before the flood, is printed but
#     not asserted on (a stranger's first request may wait behind the other strangers);
#   - 100 requests whose bearer token holds byte 0xFF (raw, in the Authorization header) each
#     get 401, and the controller's log gets no error line from them;
#   - 20 requests whose path holds byte 0xFF (with a valid token) each get 400 or 404 (an
#     answer, not a dropped connection), again with no error line.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ATTACK=(python3 "$E2E_DIR/attack.py")
FRESH_READER="tec-e2e-fresh-reader-$SUFFIX"

on_cleanup() {
  k delete clusterrolebinding "$FRESH_READER" --ignore-not-found >/dev/null 2>&1
  k -n "$DEPLOY_NS" delete serviceaccount "$FRESH_READER" --ignore-not-found >/dev/null 2>&1
}

# token_of KUBECONFIG OUT: the kubeconfig's bearer token into OUT.
token_of() {
  kubectl --kubeconfig "$1" config view --raw -o jsonpath='{.users[0].user.token}' >"$2" \
    && [ -s "$2" ] || fail "no token in $1"
}

setup_rbac
# The known reader: the metrics reader of setup_rbac (METRICS_CURL's token); the frequent one:
# a second token of the same ServiceAccount (another cache entry); the fresh one: a
# ServiceAccount of its own, bound to the same ClusterRole, its token first sent in the flood.
token_of "$WORK/metrics-reader.kubeconfig" "$WORK/known.token"
# A TokenRequest's token (1.20: no jti) is the same for the same account, audience and
# second: ask again, a second later, until it differs.
for _ in 1 2 3 4 5; do
  "$REPO_ROOT/deploy/local/cluster.sh" sa-kubeconfig "$DEPLOY_NS" "$METRICS_READER" \
    "$WORK/frequent.kubeconfig" >/dev/null || fail "cannot get a second metrics reader token"
  token_of "$WORK/frequent.kubeconfig" "$WORK/frequent.token"
  cmp -s "$WORK/known.token" "$WORK/frequent.token" || break
  sleep 1.1
done
"$REPO_ROOT/deploy/local/cluster.sh" sa-kubeconfig "$DEPLOY_NS" "$FRESH_READER" \
  "$WORK/fresh.kubeconfig" >/dev/null || fail "cannot make the fresh reader"
k create clusterrolebinding "$FRESH_READER" --clusterrole=taint-eviction-controller-metrics-reader \
  --serviceaccount="$DEPLOY_NS:$FRESH_READER" >/dev/null || fail "cannot bind the fresh reader"
token_of "$WORK/fresh.kubeconfig" "$WORK/fresh.token"
cmp -s "$WORK/known.token" "$WORK/frequent.token" && fail "the two metrics reader tokens are one"

start_controller main
wait_acting "$CONTROLLER_LOG"
case "$METRICS_URL" in https://*) ;; *) fail "the metrics port is not HTTPS: $METRICS_URL" ;; esac
log "controller acting; metrics at $METRICS_URL"

# 1. The flood beside the readers.
timeout 150 "${ATTACK[@]}" tokens --url "$METRICS_URL" --known-token-file "$WORK/known.token" \
  --frequent-token-file "$WORK/frequent.token" --fresh-token-file "$WORK/fresh.token" \
  --flood-threads 32 --flood-start 2 --flood-seconds 40 --known-every 12 \
  >"$WORK/tokens.json" 2>"$WORK/tokens.err" \
  || fail "the token flood failed: $(cat "$WORK/tokens.err")"
# For eval: the flood's figures (flood_*), and per reader (known_*, frequent_*, fresh_*) its
# reads as "t=SECONDS:STATUS(TOOK)", how many got 200, the first read's status, the reads
# during the flood and those of them not answered 200.
eval "$(python3 -c "
import json, shlex, sys
d = json.load(open(sys.argv[1]))
out = {'flood_' + k: v for k, v in d['flood'].items()}
out['flood_window'] = '%s-%s' % tuple(d['flood_window'])
for name, reads in d['reads'].items():
    during = [r for r in reads if r['t'] >= d['flood_window'][0]]
    out[name + '_reads'] = '  '.join('t=%ss:%s(%ss)' % (r['t'], r['status'], r['s']) for r in reads)
    out[name + '_ok'] = sum(r['status'] == 200 for r in reads)
    out[name + '_n'] = len(reads)
    out[name + '_first'] = reads[0]['status'] if reads else 'none'
    out[name + '_during'] = len(during)
    out[name + '_refused'] = ' '.join('t=%ss:%s' % (r['t'], r['status'])
                                      for r in during if r['status'] != 200)
for k, v in out.items():
    print('%s=%s' % (k, shlex.quote(v if isinstance(v, str) else json.dumps(v))))
" "$WORK/tokens.json")"
log "1. flood: $flood_sent requests with random tokens in $flood_seconds s ($flood_per_second/s," \
  "$flood_threads threads, t=$flood_window s): statuses $flood_statuses, errors $flood_errors"
problems=()
for reader in known frequent fresh; do
  declare -n reads=${reader}_reads ok=${reader}_ok n=${reader}_n
  log "  $reader reader, $ok of $n reads answered 200: $reads"
done
for reader in known frequent; do
  declare -n first=${reader}_first during=${reader}_during refused=${reader}_refused
  [ "$first" = 200 ] || fail "the $reader reader's read before the flood got $first (not 200)"
  [ "$during" -ge 3 ] || problems+=("the $reader reader read only $during times during the flood")
  [ -z "$refused" ] \
    || problems+=("the $reader reader, authenticated before the flood, was refused in it: $refused")
done
[ "$flood_sent" -ge 100 ] || problems+=("the flood sent only $flood_sent requests: no flood")

# 2. Byte 0xFF in the bearer token, then in the path (the review slots free again first).
# error_lines: the controller log's error-level lines (--log-format text: the level is the
# second field).
error_lines() { awk '$2 == "error"' "$CONTROLLER_LOG" | wc -l; }
# bad_bytes WHAT COUNT WANT ARGS...: COUNT requests of attack.py bad-bytes ARGS; every status
# must be one of WANT (a regex), and the log may gain no error line.
bad_bytes() {
  local what=$1 count=$2 want=$3 before after statuses
  shift 3
  before=$(error_lines)
  timeout 120 "${ATTACK[@]}" bad-bytes --url "$METRICS_URL" --count "$count" "$@" \
    >"$WORK/bad.json" || fail "the requests with $what failed"
  sleep 1
  after=$(error_lines)
  statuses=$(python3 -c "import json, sys; print(' '.join('%s:%d' % i for i in sorted(
    json.load(open(sys.argv[1]))['statuses'].items())))" "$WORK/bad.json")
  log "  $count requests with $what: statuses $statuses (0: no answer); error lines in the" \
    "log $before -> $after"
  # Each status one of WANT, and COUNT of them (bad-bytes stops after 60 s).
  if grep -qvE "^($want):" <<<"${statuses// /$'\n'}" \
    || [ "$(awk -v RS=' ' -F: '{ n += $2 } END { print n }' <<<"$statuses")" -ne "$count" ]; then
    problems+=("$what: statuses $statuses, expected $want to each of $count")
  fi
  [ "$after" -eq "$before" ] \
    || problems+=("$what: $((after - before)) error lines in the controller's log")
}
sleep 3
log "2. byte 0xFF"
bad_bytes "byte 0xFF in the bearer token" 100 401 --mode token
bad_bytes "byte 0xFF in the path (a valid token)" 20 '400|404' --mode path \
  --token-file "$WORK/known.token"
awk '$2 == "error"' "$CONTROLLER_LOG" | tail -n 3 | cut -c1-300 | sed "s/^/  | /"

kill -0 "$CONTROLLER_PID" 2>/dev/null || problems+=("the controller died")
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$HEALTH_URL/healthz") || true
[ "$code" = 200 ] || problems+=("/healthz answered '$code' at the end")
if [ "${#problems[@]}" -gt 0 ]; then
  for p in "${problems[@]}"; do echo "FAIL: $TEST_NAME: $p" >&2; done
  exit 1
fi
stop_controller "$CONTROLLER_PID"
echo "PASS: $TEST_NAME"
