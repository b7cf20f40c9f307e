#!/usr/bin/env bash
# The noise of the API Priority and Fairness scenario (eviction_compare --scenarios apf): FLOWS
# loops, each LISTing every pod of namespace tec-bench-noise with one of the tokens in
# TOKENS_FILE (flow i uses token i mod ACCOUNTS), until SECONDS have passed or SIGTERM. Each
# request's HTTP status goes to STATUS_FILE (one per line; 000: no answer within 60 s).
# Runs in a session of its own, so SIGTERM ends every loop and every curl at once.
# Usage: bench/apf_noise.sh TOKENS_FILE API_URL CA_FILE ACCOUNTS FLOWS SECONDS STATUS_FILE
set -uo pipefail
if [ "$(ps -o sid= -p $$ | tr -d ' ')" != "$$" ]; then
  exec setsid "$0" "$@"
fi
mapfile -t tokens <"$1"
url=$2 ca=$3 accounts=$4 flows=$5 seconds=$6 status=$7
[ "${#tokens[@]}" -ge "$accounts" ] || { echo "apf_noise.sh: $1 has fewer than $accounts tokens" >&2; exit 2; }
trap 'trap - TERM; kill -TERM -- -$$ 2>/dev/null; exit 0' TERM INT
end=$(($(date +%s) + seconds))
for ((f = 0; f < flows; f++)); do
  token=${tokens[$((f % accounts))]}
  (
    while [ "$(date +%s)" -lt "$end" ]; do
      curl -s -o /dev/null -w '%{http_code}\n' --max-time 60 --cacert "$ca" \
        -H "Authorization: Bearer $token" "$url/api/v1/namespaces/tec-bench-noise/pods" >>"$status"
    done
  ) &
done
wait
