# Shared by tests/helm/*_test.sh: the chart's path, and a skip (exit 77) without helm.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
chart=$root/charts/taint-eviction-controller
if ! command -v helm >/dev/null 2>&1; then
  echo "SKIP: helm is not on PATH (scripts/install-deps.sh installs it)"
  exit 77
fi
# PyYAML from the system Python (Debian's python3-yaml, installed by install-deps.sh).
python=/usr/bin/python3
[ -x "$python" ] || python=python3
