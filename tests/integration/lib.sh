# shellcheck shell=bash
# Shared preamble of the shell integration tests: fail(), the KUBECONFIG and tool checks, and
# k(), a kubectl that can never hang. Sourced after the test sets TEST_NAME; not run itself.
set -euo pipefail

readonly REQ_TIMEOUT=20s # per kubectl request
readonly CMD_TIMEOUT=60  # seconds, hard cap per kubectl invocation

fail() {
  echo "FAIL: $TEST_NAME: $*" >&2
  exit 1
}

if [ -z "${KUBECONFIG:-}" ]; then
  echo "FAIL: $TEST_NAME: KUBECONFIG is not set (run deploy/local/cluster.sh up and export the path it prints)" >&2
  exit 2
fi
[ -r "$KUBECONFIG" ] || fail "KUBECONFIG=$KUBECONFIG is not readable"
command -v kubectl >/dev/null 2>&1 || fail "kubectl not found on PATH"
command -v timeout >/dev/null 2>&1 || fail "timeout (coreutils) not found on PATH"

k() {
  timeout "$CMD_TIMEOUT" kubectl --request-timeout="$REQ_TIMEOUT" "$@"
}
