#!/usr/bin/env bash
# End to end: the monitoring kit (charts/taint-eviction-controller/files/) against a real Prometheus (Debian's
# `prometheus`, run from a temp dir on a free loopback port, 1 s scrape and rule evaluation) that
# scrapes the controller over HTTPS with the token of a ServiceAccount bound only to the
# metrics-reader ClusterRole, verifying the controller's self-signed certificate (fetched from
# its port) for the name localhost. Prometheus loads the rules extracted from
# prometheusrule.yaml (tests/monitoring/extract_rules.py), job "taint-eviction-controller" as
# servicemonitor.yaml names it. The controller runs with a policy (Evict mode, fallbackAfter, a
# rate limit, a storm breaker that stays closed) and leader election; a second replica runs
# with --shadow (which implies dry-run, so it cannot be the one that evicts) and
# --leader-elect=false, so every family the kit uses is exported, and the alerts' aggregations
# see two instances of the job. A small scenario moves the metrics: a NoExecute taint, one pod
# evicted at once, one with a long toleration left scheduled, then a policy change that is
# rejected.
#
# Then, through Prometheus' HTTP API:
# - the target is up, every rule group is loaded and every rule's health is "ok" (evaluated
#   without error);
# - every alert expression returns data, or, when it is empty because the alert is not firing,
#   its operand does: for `absent(X)` X returns series (the inverse: someone is up), for
#   `LHS <op> NUMBER` the LHS returns series (e.g. max(stuck_evictions) at 0). So each series an
#   alert needs is scraped under the name and labels the expression selects;
# - the rejected policy puts TaintEvictionPolicyReloadRejected in state pending (its `for` is 5m)
#   with instance and job labels, and TaintEvictionControllerDown is not pending or firing;
# - every dashboard panel expression (check_dashboard.py --exprs, $__rate_interval as 1m)
#   returns at least one sample;
# - pod_deletions_total, scheduled_evictions_total and tainted_nodes moved as the scenario did.
source "$(dirname "$0")/lib.sh"
command -v prometheus >/dev/null 2>&1 || fail "prometheus not found: scripts/install-deps.sh installs Debian's"
command -v python3 >/dev/null 2>&1 || fail "python3 not found"
command -v openssl >/dev/null 2>&1 || fail "openssl not found"

PROM_DIR="$WORK/prometheus"
PROM_PID=""
on_cleanup() {
  if [ -n "$PROM_PID" ]; then
    terminate_pid "$PROM_PID"
    if [ "${TEST_FAILED:-1}" -ne 0 ] && [ -f "$PROM_DIR/prometheus.log" ]; then
      echo "---- last lines of $PROM_DIR/prometheus.log" >&2
      tail -n 20 "$PROM_DIR/prometheus.log" >&2
    fi
  fi
}

NODE="tec-e2e-prom-$SUFFIX"
setup_rbac
publish_policy "$POLICY_HEADER
evictionMode: Evict
fallbackAfter: 10m
rateLimit:
  evictionsPerSecond: 50
  burst: 100
stormBreaker:
  maxTaintedNodesPercent: 50
  minTaintedNodes: 1000"
start_controller prom --policy "$POLICY_FILE"
wait_acting "$CONTROLLER_LOG"
hostport=${METRICS_URL#https://}
start_controller shadow --shadow --shadow-window=3s --leader-elect=false
shadow_hostport=${METRICS_URL#https://}
for hp in "$hostport" "$shadow_hostport"; do
  case "$hp" in https:* | http:* | "") fail "a metrics port is not HTTPS: $hp" ;; esac
done

mkdir -p "$PROM_DIR/data"
# The token of the metrics reader (setup_rbac: bound to the metrics-reader ClusterRole only).
token=${METRICS_CURL[2]#Authorization: Bearer }
[ -n "$token" ] || fail "no metrics reader token"
(umask 077 && printf '%s' "$token" >"$PROM_DIR/token")
# The replicas' self-signed certificates, the CAs Prometheus verifies them against.
for hp in "$hostport" "$shadow_hostport"; do
  openssl s_client -connect "$hp" -servername localhost </dev/null 2>/dev/null \
    | openssl x509 >>"$PROM_DIR/ca.crt" || fail "cannot read the certificate of $hp"
done
python3 "$REPO_ROOT/tests/monitoring/extract_rules.py" \
  "$REPO_ROOT/charts/taint-eviction-controller/files/prometheusrule.yaml" "$PROM_DIR/rules.yaml" || fail "cannot extract the rules"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$PROM_DIR/prometheus.yml" <<EOT
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: [rules.yaml]
scrape_configs:
  - job_name: taint-eviction-controller
    scheme: https
    authorization:
      credentials_file: token
    tls_config:
      ca_file: ca.crt
      server_name: localhost
    static_configs:
      - targets: ["$hostport", "$shadow_hostport"]
EOT
promtool check config "$PROM_DIR/prometheus.yml" >/dev/null || fail "promtool rejects the test's prometheus.yml"
prometheus --config.file="$PROM_DIR/prometheus.yml" --storage.tsdb.path="$PROM_DIR/data" \
  --web.listen-address="127.0.0.1:$port" --storage.tsdb.retention.time=1h \
  >"$PROM_DIR/prometheus.log" 2>&1 &
PROM_PID=$!
PROM="http://127.0.0.1:$port"
deadline=$((SECONDS + 60))
until curl -fsS --max-time 2 "$PROM/-/ready" >/dev/null 2>&1; do
  kill -0 "$PROM_PID" 2>/dev/null || fail "prometheus exited: $(tail -3 "$PROM_DIR/prometheus.log")"
  [ "$SECONDS" -lt "$deadline" ] || fail "prometheus not ready within 60 s"
  sleep 0.5
done
log "prometheus on $PROM scrapes https://$hostport (acting) and https://$shadow_hostport (shadow)"

# query EXPR: the number of samples (or series) Prometheus returns for an instant query.
query() {
  curl -fsS --max-time 10 -G "$PROM/api/v1/query" --data-urlencode "query=$1" | python3 -c '
import json, sys
d = json.load(sys.stdin)
if d.get("status") != "success":
    sys.exit("query failed: " + json.dumps(d)[:300])
r = d["data"]["result"]
print(len(r) if isinstance(r, list) else 1)'
}
# value EXPR: the value of the single sample an instant query returns ("none" if empty).
value() {
  curl -fsS --max-time 10 -G "$PROM/api/v1/query" --data-urlencode "query=$1" \
    | python3 -c 'import json, sys; r = json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "none")'
}
wait_query() {  # wait_query EXPR SECONDS: until EXPR returns at least one sample
  local deadline=$((SECONDS + $2)) n
  while :; do
    n=$(query "$1") || n=0
    [ "$n" -ge 1 ] && return 0
    [ "$SECONDS" -lt "$deadline" ] || fail "'$1' returned no data through Prometheus within $2 s"
    sleep 1
  done
}
wait_query 'count(up{job="taint-eviction-controller"} == 1) == 2' 60
log "both targets up (https, reader token, certificates verified)"

# The scenario: a pod without a toleration is evicted at once; one tolerating 1 h stays scheduled.
make_node "$NODE"
make_pod p1 "$NODE"
make_pod p2 "$NODE" "$(toleration tec.test/prom down 3600)"
taint "$NODE" tec.test/prom=down:NoExecute
wait_terminating p1 60
wait_query 'taint_eviction_controller_pod_deletions_total{job="taint-eviction-controller"} >= 1' 60
wait_query 'taint_eviction_controller_scheduled_evictions_total{job="taint-eviction-controller"} >= 1' 60
wait_query "taint_eviction_controller_tainted_nodes{job=\"taint-eviction-controller\",instance=\"$hostport\"} == 1" 60
# A policy change the controller rejects (an unknown field): the reload alert's expression fires.
publish_policy "$POLICY_HEADER
evictionMode: Evict
noSuchField: 1"
wait_query 'taint_eviction_controller_policy_last_reload_successful{job="taint-eviction-controller"} == 0' 60
log "scenario done: p1 evicted, p2 scheduled, the node tainted, a policy change rejected"
# rate() and increase() need two samples in their window; the dashboard's windows are 1m.
sleep 5

# Every rule loaded and evaluated without error; the rejected reload is pending, the controller
# is not reported down.
deadline=$((SECONDS + 60))
until rules=$(curl -fsS --max-time 10 "$PROM/api/v1/rules" | python3 -c '
import json, sys
groups = json.load(sys.stdin)["data"]["groups"]
rules = [r for g in groups for r in g["rules"]]
bad = [r["name"] + ": " + r.get("health", "?") + " " + r.get("lastError", "") for r in rules
       if r.get("health") != "ok"]
if bad:
    sys.exit("; ".join(bad))
print(len(rules))') && [ "$rules" -ge 11 ]; do
  [ "$SECONDS" -lt "$deadline" ] || fail "rules not all loaded and healthy within 60 s: $rules"
  sleep 1
done
log "$rules rules loaded, every one evaluated with health ok"
deadline=$((SECONDS + 60))
until alerts=$(curl -fsS --max-time 10 "$PROM/api/v1/alerts" | python3 -c '
import json, sys
a = json.load(sys.stdin)["data"]["alerts"]
print(" ".join(sorted(x["labels"]["alertname"] + "/" + x["state"] + "/" + x["labels"].get("instance", "-")
                      for x in a)))') && grep -q "TaintEvictionPolicyReloadRejected/pending/$hostport" <<<"$alerts"; do
  [ "$SECONDS" -lt "$deadline" ] || fail "TaintEvictionPolicyReloadRejected not pending within 60 s (alerts: $alerts)"
  sleep 1
done
grep -q TaintEvictionControllerDown <<<"$alerts" && fail "TaintEvictionControllerDown is active: $alerts"
log "alerts: $alerts"

# Every alert expression returns data, or its operand does (see the header).
python3 - "$PROM_DIR/rules.yaml" >"$PROM_DIR/alert-checks.txt" <<'PY' || fail "cannot read the alert expressions"
import re, sys, yaml
for g in yaml.safe_load(open(sys.argv[1]))["groups"]:
    for r in g["rules"]:
        e = " ".join(r["expr"].split())
        m = re.fullmatch(r"absent\((.*)\)", e)
        if m:
            operand = m.group(1)
        else:
            m = re.fullmatch(r"(.*\S)\s*(?:==|!=|>=|<=|>|<)\s*[0-9.]+", e)
            operand = m.group(1) if m else e
        print(r["alert"] + "\t" + e + "\t" + operand)
PY
while IFS=$'\t' read -r alert expr operand; do
  n=$(query "$expr") || fail "$alert: the query failed: $expr"
  if [ "$n" -ge 1 ]; then
    log "alert $alert: its expression returns $n series (firing or pending)"
    continue
  fi
  n=$(query "$operand") || fail "$alert: the query failed: $operand"
  [ "$n" -ge 1 ] || fail "alert $alert: neither '$expr' nor its operand '$operand' returns data"
  log "alert $alert: not firing; its operand returns $n series"
done <"$PROM_DIR/alert-checks.txt"
[ "$(wc -l <"$PROM_DIR/alert-checks.txt")" -ge 11 ] || fail "fewer alert expressions than the kit has"

# Every dashboard panel expression returns data.
panels=0
while IFS= read -r expr; do
  n=$(query "$expr") || fail "dashboard expression failed: $expr"
  [ "$n" -ge 1 ] || fail "dashboard expression returns no data: $expr"
  panels=$((panels + 1))
done < <(python3 "$REPO_ROOT/tests/monitoring/check_dashboard.py" "$REPO_ROOT/charts/taint-eviction-controller/files" --exprs)
[ "$panels" -ge 30 ] || fail "only $panels dashboard expressions checked"
log "$panels dashboard expressions, each with data"

[ "$(value 'max(taint_eviction_controller_tainted_nodes{job="taint-eviction-controller"})')" = 1 ] \
  || fail "tainted_nodes through Prometheus is not 1"
TEST_FAILED=0
log "PASS"
