#!/usr/bin/env bash
# Copies the monitoring kit (deploy/monitoring/: servicemonitor.yaml, prometheusrule.yaml,
# dashboard.json) into the chart's files/, which the chart's monitoring.* toggles render: a
# chart cannot read outside its own directory. Run it after changing deploy/monitoring/;
# `--check` only reports (exit 1) when a copy differs, for a test or CI.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/deploy/monitoring
dst=$root/charts/taint-eviction-controller/files
check=0
if [ "${1:-}" = "--check" ]; then
  check=1
fi
status=0
for f in servicemonitor.yaml prometheusrule.yaml dashboard.json; do
  if [ ! -f "$src/$f" ]; then
    echo "sync-chart: $src/$f not found; files/$f left as it is" >&2
    continue
  fi
  if cmp -s "$src/$f" "$dst/$f"; then
    continue
  fi
  if [ $check -eq 1 ]; then
    echo "sync-chart: charts/taint-eviction-controller/files/$f differs from deploy/monitoring/$f (run scripts/sync-chart.sh)" >&2
    status=1
  else
    cp "$src/$f" "$dst/$f"
    echo "sync-chart: copied deploy/monitoring/$f"
  fi
done
exit $status
