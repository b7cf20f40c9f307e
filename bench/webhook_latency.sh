#!/usr/bin/env bash
# The admission webhook's latency over real HTTPS on a running controller (issue 32 wants well
# under 100 ms for a node with 110 pods): a cluster of NODES nodes (default 1,000), 110 pods on
# one of them, the controller started on it (the admin kubeconfig, its secure port on loopback
# with the self-signed certificate), then REQUESTS AdmissionReviews (default 300) of that node
# gaining a NoExecute taint, posted on one kept-alive connection by curl. Prints the answer's
# warning and the time from the request's first byte to the response's last (time_total -
# time_pretransfer) at the median, p90, p99 and max. Not a test; nothing is asserted.
#
#   KUBECONFIG=... TEC_BIN=build/bin/taint-eviction-controller bash bench/webhook_latency.sh
#
# Creates nodes bench-wh-<i> and a namespace bench-wh-<pid>, and removes them at the end.
set -euo pipefail
: "${KUBECONFIG:?the admin kubeconfig of a local cluster (deploy/local/cluster.sh)}"
: "${TEC_BIN:?the controller binary}"
NODES=${NODES:-1000}
PODS=${PODS:-110}
REQUESTS=${REQUESTS:-300}
NS=bench-wh-$$
WORK=$(mktemp -d)
PID=""
cleanup() {
  set +e
  [ -n "$PID" ] && kill -TERM "$PID" && wait "$PID"
  # No namespace controller on the local control plane: pods forced out, the namespace
  # finalized by hand (as tests/e2e/lib.sh does).
  kubectl -n "$NS" delete pods --all --force --grace-period=0 >/dev/null 2>&1
  kubectl delete namespace "$NS" --wait=false >/dev/null 2>&1
  printf '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"%s"},"spec":{"finalizers":[]}}' "$NS" \
    | kubectl replace --raw "/api/v1/namespaces/$NS/finalize" -f - >/dev/null 2>&1
  kubectl delete nodes -l bench-wh=true --wait=false >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT

echo "creating $NODES nodes and $PODS pods"
{
  echo '{"apiVersion":"v1","kind":"List","items":['
  for i in $(seq 0 $((NODES - 1))); do
    [ "$i" -gt 0 ] && echo ","
    printf '{"apiVersion":"v1","kind":"Node","metadata":{"name":"bench-wh-%d","labels":{"bench-wh":"true"}}}' "$i"
  done
  echo ']}'
} >"$WORK/nodes.json"
kubectl apply -f "$WORK/nodes.json" >/dev/null
kubectl create namespace "$NS" >/dev/null
{
  echo '{"apiVersion":"v1","kind":"List","items":['
  for i in $(seq 0 $((PODS - 1))); do
    [ "$i" -gt 0 ] && echo ","
    tol=""
    [ $((i % 3)) -eq 0 ] && tol=',"tolerations":[{"key":"dedicated","operator":"Equal","value":"x","effect":"NoExecute","tolerationSeconds":300}]'
    printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p%d","namespace":"%s"},"spec":{"nodeName":"bench-wh-7","containers":[{"name":"c","image":"registry.k8s.io/pause:3.9"}]%s}}' "$i" "$NS" "$tol"
  done
  echo ']}'
} >"$WORK/pods.json"
kubectl apply -f "$WORK/pods.json" >/dev/null

"$TEC_BIN" --kubeconfig "$KUBECONFIG" --leader-elect=false --metrics-bind-address 127.0.0.1:0 \
  --health-probe-bind-address 127.0.0.1:0 >"$WORK/controller.log" 2>&1 &
PID=$!
url=""
for _ in $(seq 300); do
  url=$(sed -n 's|.*serving /metrics on \(https://[^ ]*\).*|\1|p' "$WORK/controller.log" | head -1)
  health=$(sed -n 's|.*serving /healthz and /readyz on \(http://[^ ]*\).*|\1|p' "$WORK/controller.log" | head -1)
  if [ -n "$url" ] && [ -n "$health" ] && curl -fsS "$health/readyz" >/dev/null 2>&1; then break; fi
  sleep 0.2
done
[ -n "$url" ] || { echo "the controller did not start: $(tail -5 "$WORK/controller.log")" >&2; exit 1; }

node=$(kubectl get node bench-wh-7 -o json)
tainted=$(jq -c '.spec.taints = [{"key":"dedicated","value":"x","effect":"NoExecute"}]' <<<"$node")
jq -nc --argjson new "$tainted" --argjson old "$node" \
  '{apiVersion:"admission.k8s.io/v1",kind:"AdmissionReview",request:{uid:"u",kind:{group:"",version:"v1",kind:"Node"},operation:"UPDATE",userInfo:{username:"bench"},object:$new,oldObject:$old}}' \
  >"$WORK/review.json"
echo "review body: $(wc -c <"$WORK/review.json") bytes; pods on the node: $(kubectl -n "$NS" get pods --no-headers | wc -l); nodes: $(kubectl get nodes --no-headers | wc -l)"
curl -sk -X POST --data-binary "@$WORK/review.json" "$url/validate/nodes" | jq -r '.response.warnings[0]'

args=()
for i in $(seq "$REQUESTS"); do
  [ "$i" -gt 1 ] && args+=(--next)
  # --next resets every option: each transfer names its own (the connection is kept).
  args+=(-sk -X POST -H 'Content-Type: application/json' --data-binary "@$WORK/review.json"
    -o /dev/null -w '%{time_pretransfer} %{time_total}\n' "$url/validate/nodes")
done
curl "${args[@]}" >"$WORK/times.txt"
awk '{ printf "%.3f\n", ($2 - $1) * 1000 }' "$WORK/times.txt" | sort -n >"$WORK/ms.txt"
awk '{ a[NR] = $1 } END {
  printf "%d requests over one connection, ms from the first byte sent to the last received: median %.2f, p90 %.2f, p99 %.2f, max %.2f\n",
    NR, a[int(NR * 0.5) + 1], a[int(NR * 0.9) + 1], a[int(NR * 0.99) + 1], a[NR] }' "$WORK/ms.txt"
