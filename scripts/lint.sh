#!/usr/bin/env bash
# clang-tidy over the production code (timedqueue/ controller/ kube/ adapters/ ops/ policy/
# cmd/: the .cpp files of the compile database and the headers they include, per .clang-tidy's
# HeaderFilterRegex), every enabled check an error (.clang-tidy: WarningsAsErrors '*').
# Tests, benchmarks and fuzz targets are not linted: gtest's and Google Benchmark's macros
# trip several of the checks by design, and they are not what ships.
#
# Usage: scripts/lint.sh [BUILD_DIR] (default: build, the default preset's build directory,
# whose compile_commands.json CMake writes at configure time). JOBS (default 2) clang-tidy
# processes run at once; LINT_FILES (a regex on the absolute path) narrows the files, e.g.
# LINT_FILES=kube/src/client while fixing one. Exit status 1 on any finding, with the findings
# on stdout.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${1:-"$root/build"}
jobs=${JOBS:-2}
files=${LINT_FILES:-"^$root/(timedqueue|controller|kube|adapters|ops|policy|cmd)/"}

tidy=$(command -v clang-tidy-14 || command -v clang-tidy || true)
runner=$(command -v run-clang-tidy-14 || command -v run-clang-tidy || true)
if [[ -z $tidy || -z $runner ]]; then
  echo "lint: clang-tidy and run-clang-tidy not found; install them with scripts/install-deps.sh" \
    "(Debian package clang-tidy)" >&2
  exit 1
fi
if [[ ! -f $build_dir/compile_commands.json ]]; then
  echo "lint: $build_dir/compile_commands.json not found; configure first" \
    "(make build, or cmake --preset default)" >&2
  exit 1
fi

# run-clang-tidy prints every clang-tidy command line it runs, in colour: keep only what
# clang-tidy says, without the colour codes (CI logs are not terminals).
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
"$runner" -p "$build_dir" -j "$jobs" -quiet -clang-tidy-binary "$tidy" \
  "$files" >"$log" 2>&1 || status=$?
sed -e 's/\x1b\[[0-9;]*m//g' -e "\#^$tidy #d" -e '/^[0-9]* warnings\? generated\.$/d' \
  -e '/^Suppressed [0-9]* warnings/d' -e '/^Use -header-filter=/d' "$log"
if [[ $status -ne 0 ]]; then
  echo "lint: clang-tidy found problems (above); fix them or, if a check is wrong for this" \
    "code, disable it in .clang-tidy with a comment saying why" >&2
  exit 1
fi
echo "lint: clean"
