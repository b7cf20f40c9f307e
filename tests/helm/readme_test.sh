#!/usr/bin/env bash
# The chart's README.md is what charts/taint-eviction-controller/gen-readme.py writes from
# values.yaml (a parameter table of every value, each described by its `# -- ` comment): the
# script regenerates it into a temporary file, which must equal the committed one. The script
# also fails on a value without a description. Python's standard library only; no helm needed.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
chart=$root/charts/taint-eviction-controller
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! python3 "$chart/gen-readme.py" "$tmp/README.md"; then
  echo "FAIL: gen-readme.py failed (above); fix values.yaml, then run charts/taint-eviction-controller/gen-readme.py"
  exit 1
fi
if ! diff -u "$chart/README.md" "$tmp/README.md"; then
  echo "FAIL: charts/taint-eviction-controller/README.md is not what values.yaml gives (--- committed, +++ generated): run charts/taint-eviction-controller/gen-readme.py"
  exit 1
fi
echo "ok: charts/taint-eviction-controller/README.md is generated from values.yaml"
