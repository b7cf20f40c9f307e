#!/usr/bin/env bash
# Runs the unit suite under ASan+UBSan and under TSan N times each (default 10) while another
# build keeps both cores busy, and reports how many runs passed. A test that depends on a
# wall-clock margin fails here long before it fails on a newcomer's machine.
#
#   scripts/test-repeat.sh [N]        (make test-repeat REPEAT=N)
#
# The load is a throw-away build of the whole project (the default preset's settings, without
# ccache, so it really compiles) into a temporary directory with -j2, started again from
# scratch each time it finishes; it runs from the first test run to the last and is stopped
# (its own process group) on exit. The runs alternate: asan 1, tsan 1, asan 2, ... Logs of
# failed runs are kept in build/test-repeat/ (or $TEC_REPEAT_DIR); passing runs leave none.
# Exit status: 0 when every run passed, 1 when one failed, 2 for a bad argument.
set -euo pipefail

n="${1:-10}"
if ! [[ "$n" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 [N]  (N, the runs per sanitizer, a positive integer; got \"$n\")" >&2
  exit 2
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
logs="${TEC_REPEAT_DIR:-$root/build/test-repeat}"
mkdir -p "$logs"
rm -f "$logs"/*.log

started=$(date +%s)
echo "test-repeat: building the asan and tsan presets"
for preset in asan tsan; do
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j 2
done

load_dir="$(mktemp -d "${TMPDIR:-/tmp}/tec-test-repeat-load.XXXXXX")"
load_pid=""
stop_load() {
  if [ -n "$load_pid" ]; then
    kill -TERM -- "-$load_pid" 2>/dev/null || true
    wait "$load_pid" 2>/dev/null || true
    load_pid=""
  fi
  rm -rf "$load_dir"
}
trap stop_load EXIT
trap 'exit 130' INT TERM

# setsid: the load and every compiler it starts form one process group, stopped as one.
setsid env CCACHE_DISABLE=1 bash -c '
  src="$1"; dir="$2"
  while :; do
    rm -rf "$dir/build"
    cmake -S "$src" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_COMPILER_LAUNCHER= >/dev/null 2>&1 || exit 1
    cmake --build "$dir/build" -j 2 >/dev/null 2>&1 || true
    echo done >>"$dir/builds"
  done' load "$root" "$load_dir" &
load_pid=$!
echo "test-repeat: background load: a throw-away -j2 build of the default preset (pid $load_pid)"

declare -A passed=([asan]=0 [tsan]=0)
failed_logs=()
for ((i = 1; i <= n; i++)); do
  for preset in asan tsan; do
    if ! kill -0 "$load_pid" 2>/dev/null; then
      echo "test-repeat: the background load stopped (cmake could not configure it)" >&2
      exit 1
    fi
    log="$logs/$preset-$i.log"
    t0=$(date +%s)
    if ctest --preset "$preset" -j 2 --timeout 600 >"$log" 2>&1; then
      passed[$preset]=$((passed[$preset] + 1))
      echo "test-repeat: $preset run $i/$n passed ($(($(date +%s) - t0)) s)"
      rm -f "$log"
    else
      echo "test-repeat: $preset run $i/$n FAILED ($(($(date +%s) - t0)) s), log: $log"
      grep -E '^ *[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess aborted|Exception)' "$log" || true
      failed_logs+=("$log")
    fi
  done
done

builds=0  # the file appears when the first throw-away build completes
if [ -f "$load_dir/builds" ]; then builds=$(wc -l <"$load_dir/builds"); fi
stop_load
elapsed=$(($(date +%s) - started))
echo "test-repeat: background builds completed during the runs: $builds"
echo "test-repeat: wall time $((elapsed / 60)) min $((elapsed % 60)) s"
echo "asan: ${passed[asan]}/$n passed, tsan: ${passed[tsan]}/$n passed"
if [ ${#failed_logs[@]} -gt 0 ]; then
  echo "failing logs: ${failed_logs[*]}"
  exit 1
fi
