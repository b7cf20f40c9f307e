#!/usr/bin/env bash
# deploy/ is the chart rendered (scripts/render-deploy.sh): render it again into a scratch
# directory and compare with the committed files, byte for byte. A difference means the chart
# changed without `scripts/render-deploy.sh`, or deploy/'s rendered files were edited by hand
# (edit the chart instead). Also: every rendered file is listed in deploy/kustomization.yaml
# or deploy/monitoring/kustomization.yaml, and no rendered file is left there that the chart no
# longer writes.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$root/scripts/render-deploy.sh" "$tmp"
failed=0
rendered() { (cd "$1" && grep -l -r --include='*.yaml' '^# Rendered from charts/taint-eviction-controller' . | sort); }
if ! diff <(rendered "$tmp") <(rendered "$root/deploy"); then
  echo "FAIL: the rendered files differ from deploy/'s (left: the chart's, right: deploy/'s)"
  failed=1
fi
while read -r f; do
  if ! diff -u "$root/deploy/$f" "$tmp/$f" >"$tmp/diff" 2>&1; then
    echo "FAIL: deploy/${f#./} is not the chart's rendering (run scripts/render-deploy.sh):"
    head -40 "$tmp/diff"
    failed=1
  fi
  dir=$(dirname "$f") name=$(basename "$f")
  grep -q "^  - $name\$" "$root/deploy/$dir/kustomization.yaml" ||
    { echo "FAIL: deploy/$dir/kustomization.yaml does not list $name"; failed=1; }
done < <(rendered "$tmp")
[ "$failed" = 0 ] && echo "ok: deploy/ is the chart's rendering ($(rendered "$tmp" | wc -l) files)"
exit "$failed"
