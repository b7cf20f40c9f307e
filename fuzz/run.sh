#!/usr/bin/env bash
# Runs every libFuzzer target of the `fuzz` build (make fuzz) for a bounded time, one after the
# other, each on its committed seed corpus (fuzz/corpus/<target>/, only read) plus a scratch
# corpus that keeps what earlier runs found (build-fuzz/corpus/<target>/, not in the repo).
# A crash, leak, timeout or invariant violation is saved as build-fuzz/crashes/<target>-*;
# the log of each run is build-fuzz/logs/<target>.log. One summary line per target.
# Exits 1 when any target failed (the others still run).
#
# Environment: FUZZ_SECONDS (per target, default 60), FUZZ_TARGETS (default: all),
# FUZZ_BUILD_DIR (default build-fuzz), FUZZ_ARGS (extra libFuzzer flags).
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=${FUZZ_SECONDS:-60}
targets=${FUZZ_TARGETS:-decode line_splitter kubeconfig server_url go_duration options http_endpoints}

mkdir -p "$build/crashes" "$build/logs"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

failed=()
for t in $targets; do
  bin=$build/bin/fuzz_$t
  if [ ! -x "$bin" ]; then
    echo "fuzz: $bin is missing (build with: cmake --preset fuzz && cmake --build --preset fuzz)" >&2
    failed+=("$t")
    continue
  fi
  scratch=$build/corpus/$t
  log=$build/logs/$t.log
  mkdir -p "$scratch"
  # -timeout: one input taking longer is a hang. stdin from /dev/null: no input can block on it.
  # shellcheck disable=SC2086 # FUZZ_ARGS is a list of flags
  "$bin" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$build/crashes/$t-" ${FUZZ_ARGS:-} "$scratch" "$root/fuzz/corpus/$t" \
    </dev/null >"$log" 2>&1
  rc=$?
  # The last status line, e.g. "#123456 DONE cov: 1234 ft: 5678 corp: 90/12Kb ... exec/s: 2057".
  last=$(grep -E '^#[0-9]+' "$log" | tail -n 1)
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  # -fork=N prints no stat:: lines: the last job's rate then.
  [ -n "$rate" ] || rate=$(sed -nE 's/.* exec\/s:? ([0-9]+).*/\1/p' <<<"$last")
  cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$last")
  ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")
  corp=$(sed -nE 's/.* corp: ([^ ]+).*/\1/p' <<<"$last")
  if [ "$rc" -eq 0 ]; then
    printf 'fuzz: %-15s ok      %ss runs=%s exec/s=%s cov=%s ft=%s corpus=%s\n' \
      "$t" "$seconds" "${runs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}"
  else
    printf 'fuzz: %-15s FAILED  exit %s, log %s\n' "$t" "$rc" "$log"
    grep -E 'ERROR: |invariant violated|SUMMARY: |Test unit written to' "$log" | head -n 8 |
      sed 's/^/    /'
    failed+=("$t")
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failed: ${failed[*]} (reproduce: build-fuzz/bin/fuzz_<target> <crash file>)"
  exit 1
fi
