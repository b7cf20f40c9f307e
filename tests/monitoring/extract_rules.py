#!/usr/bin/env python3
"""Writes the `spec` of charts/taint-eviction-controller/files/prometheusrule.yaml as a Prometheus rule file.

Usage: extract_rules.py PROMETHEUSRULE_YAML OUT_RULES_YAML

The PrometheusRule is the one source of the alerts: promtool (tests/monitoring/) and the real
Prometheus of tests/e2e/prometheus_test.sh read what this writes. Exits 1 with one line on
stderr when the file is not one PrometheusRule with spec.groups.
"""
import sys

import yaml


def main() -> int:
    if len(sys.argv) != 3:
        print("usage: extract_rules.py PROMETHEUSRULE_YAML OUT_RULES_YAML", file=sys.stderr)
        return 2
    try:
        with open(sys.argv[1], encoding="utf-8") as f:
            doc = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        print(f"extract_rules: cannot read {sys.argv[1]}: {str(e)[:300]!r}", file=sys.stderr)
        return 1
    if not isinstance(doc, dict) or doc.get("kind") != "PrometheusRule" or not isinstance(
            doc.get("spec"), dict) or not isinstance(doc["spec"].get("groups"), list):
        print(f"extract_rules: {sys.argv[1]} is not a PrometheusRule with spec.groups",
              file=sys.stderr)
        return 1
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        f.write(f"# Generated from {sys.argv[1]} by tests/monitoring/extract_rules.py; do not edit.\n")
        yaml.safe_dump({"groups": doc["spec"]["groups"]}, f, sort_keys=False, width=100)
    return 0


if __name__ == "__main__":
    sys.exit(main())
