#!/usr/bin/env bash
# clang-tidy over the production code (base/ timedqueue/ controller/ k8sclient/ informers/
# writers/ shadow/ metrics/ serving/ reports/ policy/ admission/ kubectl_plugin/ cmd/ asio/: the .cpp files of the compile database and the headers
# they include, per .clang-tidy's HeaderFilterRegex), every enabled check an error
# (.clang-tidy: WarningsAsErrors '*').
# Tests, benchmarks and fuzz targets are not linted: gtest's and Google Benchmark's macros
# trip several of the checks by design, and they are not what ships.
#
# Usage: scripts/lint.sh [--changed [--write-record]] [BUILD_DIR] (default: build, the default preset's build
# directory, whose compile_commands.json CMake writes at configure time). --changed (`make
# test`): only the translation units with no clean run of their exact text on record, in the
# committed scripts/lint-clean.txt or in ~/.cache/taint-eviction-controller/lint
# (scripts/lint.py says what the key covers); without it (`make lint`), all of them, and then
# scripts/lint-clean.txt is rewritten with the units found clean (commit it); --changed
# --write-record (`make lint-changed`) rewrites it too when every unit is clean. JOBS (default 2)
# clang-tidy processes run at once; LINT_FILES (a regex on the absolute path) narrows the files,
# e.g. LINT_FILES=k8sclient/src/client while fixing one (the committed record is then left alone).
# Exit status 1 on any finding, with the findings on stdout.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
changed=()
if [[ ${1:-} == --changed ]]; then
  changed=(--changed)
  shift
  if [[ ${1:-} == --write-record ]]; then
    changed+=(--write-record)
    shift
  fi
fi
build_dir=${1:-"$root/build"}
jobs=${JOBS:-2}
files=${LINT_FILES:-"^$root/(base|timedqueue|controller|k8sclient|informers|writers|shadow|metrics|serving|reports|policy|admission|kubectl_plugin|cmd|asio)/"}
narrowed=()
[[ -n ${LINT_FILES:-} ]] && narrowed=(--files-narrowed)

tidy=$(command -v clang-tidy-14 || command -v clang-tidy || true)
if [[ -z $tidy ]]; then
  echo "lint: clang-tidy not found; install it with scripts/install-deps.sh (Debian package" \
    "clang-tidy)" >&2
  exit 1
fi
if [[ ! -f $build_dir/compile_commands.json ]]; then
  echo "lint: $build_dir/compile_commands.json not found; configure first" \
    "(make build, or cmake --preset default)" >&2
  exit 1
fi

if ! python3 "$root/scripts/lint.py" --tidy "$tidy" --build "$build_dir" --root "$root" \
    --files "$files" --jobs "$jobs" "${changed[@]}" "${narrowed[@]}"; then
  echo "lint: clang-tidy found problems (above); fix them or, if a check is wrong for this" \
    "code, disable it in .clang-tidy with a comment saying why" >&2
  exit 1
fi
echo "lint: clean"
