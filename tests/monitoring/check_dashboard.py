#!/usr/bin/env python3
"""Checks the monitoring kit's files against each other and against the metrics the code defines.

Usage: check_dashboard.py MONITORING_DIR [--exprs]

- dashboard.json is JSON; every panel but a row has a datasource and at least one target with
  an expr that selects job="taint-eviction-controller"; panel ids are unique.
- every taint_eviction_controller_* name in dashboard.json and prometheusrule.yaml (less a
  histogram's _bucket/_sum/_count) is one the daemon exposes: one of the golden list in
  tests/cmd/metric_set_test.cpp, which that test proves equal to what /metrics renders.
With --exprs: prints every panel expression, one a line ($__rate_interval as 1m), and checks
nothing (tests/e2e/prometheus_test.sh asks Prometheus for each).
Exits 1 with one line per problem.
"""
import json
import os
import re
import sys

JOB = 'job="taint-eviction-controller"'
NAME = re.compile(r"taint_eviction_controller_[a-z_]+")


def panel_exprs(dashboard):
    for p in dashboard.get("panels", []):
        if p.get("type") == "row":
            continue
        yield p, [t.get("expr", "") for t in p.get("targets", [])]


GOLDEN = os.path.join("tests", "cmd", "metric_set_test.cpp")


def defined_metrics(repo):
    with open(os.path.join(repo, GOLDEN), encoding="utf-8") as f:
        src = f.read()
    names = set(re.findall(r'\{p \+ "([a-z_]+)"', src))
    return {"taint_eviction_controller_" + n for n in names}


def main() -> int:
    if len(sys.argv) not in (2, 3) or (len(sys.argv) == 3 and sys.argv[2] != "--exprs"):
        print("usage: check_dashboard.py MONITORING_DIR [--exprs]", file=sys.stderr)
        return 2
    mdir = sys.argv[1]
    try:
        with open(os.path.join(mdir, "dashboard.json"), encoding="utf-8") as f:
            dashboard = json.load(f)
    except (OSError, ValueError) as e:
        print(f"dashboard.json: {str(e)[:300]!r}", file=sys.stderr)
        return 1
    if len(sys.argv) == 3:
        for _, exprs in panel_exprs(dashboard):
            for e in exprs:
                print(e.replace("$__rate_interval", "1m"))
        return 0
    problems = []
    ids = set()
    for p, exprs in panel_exprs(dashboard):
        title = p.get("title", "?")
        if p.get("id") in ids:
            problems.append(f"panel {title!r}: duplicate id {p.get('id')}")
        ids.add(p.get("id"))
        if not p.get("datasource"):
            problems.append(f"panel {title!r}: no datasource")
        if not exprs or not all(exprs):
            problems.append(f"panel {title!r}: a target without an expr")
        for e in exprs:
            if JOB not in e:
                problems.append(f"panel {title!r}: {e!r} does not select {JOB}")
    with open(os.path.join(mdir, "prometheusrule.yaml"), encoding="utf-8") as f:
        rules = f.read()
    repo = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    known = defined_metrics(repo)
    used = set(NAME.findall(json.dumps(dashboard))) | set(NAME.findall(rules))
    for n in sorted(used):
        base = re.sub(r"_(bucket|sum|count)$", "", n)
        if n not in known and base not in known:
            problems.append(f"{n}: not a metric the daemon exposes ({GOLDEN})")
    for p in problems:
        print(p, file=sys.stderr)
    if not problems:
        print(f"dashboard.json: {len(ids)} panels; {len(used)} metric names, all registered")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
