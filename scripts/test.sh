#!/usr/bin/env bash
# `make test`: every test, in stages, each one timed, with a table of the stages at the end
# (also written to build/test-stages.txt), so every run says where its time went.
#
# The machine has 2 cores and most of the work is compiling, so what can wait runs at nice 19
# beside what cannot: the tests that wait on timers (e2e, e2e-node, integration) keep their CPU,
# and the compilers take every cycle those leave.
#   deps              scripts/install-deps.sh
#   then, side by side:
#     kube binaries   the five kube binaries from Debian's source (cached after)
#     images          the real node's base, pause and workload images (cached after)
#     build           the default preset (GCC), everything its ctest runs
#     the chain       at nice 19, one after another: the asan build and the tsan build (clang 14,
#                     the unit tests only), lint (clang-tidy on the translation units that
#                     changed since their last clean run, once `build` is done: `make lint`
#                     checks them all), the asan tests and the tsan tests (the unit tests under
#                     ASan+UBSan and TSan: they do not depend on timing)
#   format-check      clang-format over every C++ file (after build)
#   ctest             the default preset's ctest (after build, kube binaries and images): unit,
#                     integration, e2e (in TEC_E2E_LANES control planes side by side), e2e-node
#                     (a real node) and deploy/Dockerfile's image build (nice 19)
# A failed stage fails the run; the others still run (one run shows every failure), except
# what needs a failed build. Exit status 1 when any stage failed.
#
# Environment: JOBS (build jobs, default 2), TEC_CTEST_JOBS (tests ctest runs at once for the
# default preset, default 6: most of them wait), TEC_TEST_STAGES_FILE (where the table goes).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$root"
jobs=${JOBS:-2}
ctest_jobs=${TEC_CTEST_JOBS:-6}
logs="$root/build/test-logs"
table="${TEC_TEST_STAGES_FILE:-$root/build/test-stages.txt}"
mkdir -p "$logs"
rm -f "$logs"/*.status "$logs"/*.log "$logs"/*.cpu
t0=$(date +%s)

# stage NAME CMD...: runs CMD with its output to the terminal (and build/test-logs/NAME.log),
# recording when it started, how long it took and whether it passed.
stage() {
  local name=$1 start rc
  shift
  start=$(date +%s)
  echo "==== make test: $name ($(date +%T))"
  cpu_timed "$logs/$name.cpu" "$@" 2>&1 | tee "$logs/$name.log"
  rc=${PIPESTATUS[0]}
  printf '%s %s %s\n' "$((start - t0))" "$(($(date +%s) - start))" "$rc" >"$logs/$name.status"
  echo "==== make test: $name: $( [ "$rc" -eq 0 ] && echo ok || echo "FAILED (exit $rc)") in $(($(date +%s) - start)) s"
  return "$rc"
}

# quiet_stage NAME CMD...: the same with the output to the log only (a stage that runs beside
# another, whose lines would interleave); the log is printed when it fails.
quiet_stage() {
  local name=$1 start rc
  shift
  start=$(date +%s)
  echo "==== make test: $name started ($(date +%T); log: build/test-logs/$name.log)"
  cpu_timed "$logs/$name.cpu" "$@" >"$logs/$name.log" 2>&1
  rc=$?
  printf '%s %s %s\n' "$((start - t0))" "$(($(date +%s) - start))" "$rc" >"$logs/$name.status"
  if [ "$rc" -ne 0 ]; then
    echo "==== make test: $name FAILED (exit $rc) after $(($(date +%s) - start)) s; its log:"
    tail -n 200 "$logs/$name.log"
  else
    echo "==== make test: $name: ok in $(($(date +%s) - start)) s"
  fi
  return "$rc"
}

# cpu_timed FILE CMD...: runs CMD in a subshell, then writes the CPU seconds (user + system) of
# every process it waited for (compilers under ninja, Go's compiles, the tests) to FILE.
cpu_timed() {
  local file=$1
  shift
  (
    "$@"
    rc=$?
    # `times` itself, not in a pipeline: a forked child starts with no children's times.
    times >"$file.times"
    tail -n 1 "$file.times" | awk '{ s = 0; for (i = 1; i <= NF; i++) { split($i, a, /[ms]/); s += a[1] * 60 + a[2] } printf "%d\n", s }' >"$file"
    rm -f "$file.times"
    exit "$rc"
  )
}

ok() { [ -f "$logs/$1.status" ] && [ "$(cut -d' ' -f3 "$logs/$1.status")" = 0 ]; }

kube_build() {
  deploy/local/cluster.sh build kube-apiserver kube-controller-manager kube-scheduler kubelet \
    kube-proxy >/dev/null
}
node_images() {
  local image
  for image in base pause workload; do deploy/local/images.sh "$image" || return 1; done
}
default_build() {
  cmake --preset default >/dev/null && cmake --build --preset default -j "$jobs"
}
format_check() {
  git ls-files '*.cpp' '*.hpp' | xargs -r clang-format --dry-run -Werror
}
sanitizer_build() {
  cmake --preset "$1" >/dev/null && cmake --build --preset "$1" -j "$jobs"
}
# The chain, at nice 19 beside everything else: the sanitizer builds first (they need nothing
# but the sources), lint once the default build is done, then the sanitizer tests.
background_chain() {
  quiet_stage "asan build" nice -n 19 bash -c "$(declare -f sanitizer_build); sanitizer_build asan"
  quiet_stage "tsan build" nice -n 19 bash -c "$(declare -f sanitizer_build); sanitizer_build tsan"
  while [ ! -f "$build_done" ]; do sleep 2; done
  if ok build; then
    quiet_stage lint nice -n 19 env JOBS="$jobs" scripts/lint.sh --changed build
  fi
  if ok "asan build"; then
    quiet_stage "asan tests" nice -n 19 ctest --preset asan -j "$jobs"
  fi
  if ok "tsan build"; then
    quiet_stage "tsan tests" nice -n 19 ctest --preset tsan -j "$jobs"
  fi
}

print_table() {
  local name f start secs rc cpu total=$(($(date +%s) - t0)) failed=0 cpu_total=0
  {
    echo "make test: stages ($(date -u +%FT%TZ); $(nproc) cores; commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
    printf '%-14s %8s %9s %9s  %s\n' stage "start s" "seconds" "CPU s" result
    for name in deps "kube binaries" images build format-check ctest "asan build" "tsan build" \
                lint "asan tests" "tsan tests"; do
      f="$logs/$name.status"
      if [ -f "$f" ]; then
        read -r start secs rc <"$f"
        cpu=$(cat "$logs/$name.cpu" 2>/dev/null || echo '?')
        [[ $cpu =~ ^[0-9]+$ ]] && cpu_total=$((cpu_total + cpu))
        printf '%-14s %8s %9s %9s  %s\n' "$name" "$start" "$secs" "$cpu" "$( [ "$rc" -eq 0 ] && echo ok || echo "FAILED ($rc)")"
        [ "$rc" -eq 0 ] || failed=1
      else
        printf '%-14s %8s %9s %9s  %s\n' "$name" - - - "not run"
      fi
    done
    printf '%-14s %8s %9s %9s  %s\n' total 0 "$total" "$cpu_total" "$( [ "$failed" -eq 0 ] && echo passed || echo FAILED)"
    echo "(CPU s: user + system seconds of the processes the stage waited for; daemons a test starts"
    echo " in the background, such as a control plane, are not counted; $(nproc) cores give $(($(nproc) * total)) in all)"
    echo "(side by side: kube binaries, images, build, then format-check and ctest; beside them all, at"
    echo " nice 19, one after another: asan build, tsan build, lint, asan tests, tsan tests)"
    if [ -f "$logs/ctest.log" ]; then
      echo "ctest (default preset), seconds per label (summed over tests; lanes run side by side):"
      sed -n '/^Label Time Summary:/,/^$/p' "$logs/ctest.log" | sed '1d;/^$/d'
      echo "ctest, the 12 longest tests:"
      grep -E '^ *[0-9]+/[0-9]+ Test +#[0-9]+: ' "$logs/ctest.log" \
        | sed -E 's/.*Test +#[0-9]+: ([^ ]+) .* ([0-9.]+) sec$/\2 \1/' | sort -rn | head -12 \
        | awk '{ printf "  %8.1f s  %s\n", $1, $2 }'
    fi
  } | tee "$table"
  # The block above runs in a subshell (a pipeline): its `failed` does not reach here.
  for f in "$logs"/*.status; do
    [ "$(cut -d' ' -f3 "$f")" = 0 ] || return 1
  done
  return 0
}

stage deps scripts/install-deps.sh || { print_table; exit 1; }
# Each part of the run below leaves its status in build/test-logs; the chain waits for the
# default build (lint reads its compile database and dependency records) through this file.
build_done="$logs/build.done"
rm -f "$build_done"
background_chain &
chain_pid=$!
quiet_stage "kube binaries" kube_build &
kube_pid=$!
quiet_stage images node_images &
images_pid=$!
stage build default_build
build_ok=$?
touch "$build_done"
wait "$kube_pid"
wait "$images_pid"
if [ "$build_ok" -eq 0 ]; then
  stage format-check format_check
  if ok "kube binaries" && ok images; then
    # --timeout: a test without its own TIMEOUT; ctest prints the label summary itself.
    stage ctest bash -c "cd build && ctest --output-on-failure -j '$ctest_jobs' --timeout 900"
  fi
fi
echo "==== make test: waiting for the chain (asan, tsan, lint) ($(date +%T))"
wait "$chain_pid"
echo
print_table
