#!/usr/bin/env python3
"""The Prometheus configuration the Prometheus Operator writes for a ServiceMonitor and a
PrometheusRule (the parts the chart's objects use), for a Prometheus running outside the
cluster (prometheus_test.sh). The operator's configuration discovers the Service's endpoints
with Kubernetes service discovery, which Debian's Prometheus is built without (its "+ds"
source drops it): here the discovery is done from the Services and Endpoints the caller read
(the same selection: the Services the ServiceMonitor's selector matches, in its namespace, the
endpoint port it names) and handed to Prometheus as a file_sd target file with the labels the
operator's relabelling gives (job from jobLabel, namespace, service, pod, endpoint). The scrape
itself is the ServiceMonitor's: scheme, path, interval, timeout, the CA from the Secret it
names (written to a file by the caller) and its serverName, and the bearer token file, the
operator's mount of Prometheus' own ServiceAccount token (here a file holding its token).

Two negative controls, each a job of its own with the same targets: the serverName of
another namespace (the certificate must not verify), and the token of a ServiceAccount nobody
bound to the metrics-reader role (403).

Usage: servicemonitor_scrape.py --servicemonitor SM.json --prometheusrule PR.json
         --services SVC.json --endpoints EP.json --ca FILE --token FILE --stranger-token FILE
         --wrong-server-name NAME --config OUT.yml --rules OUT.yml --targets-dir DIR
SM.json, PR.json, SVC.json and EP.json are `kubectl get ... -o json` lists.
"""
import argparse
import copy
import json
import sys

import yaml


def sanitize(name):
    """A label name as Kubernetes service discovery writes it."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def targets(sm, endpoint, services, endpoints):
    """The file_sd target groups of the operator's discovery for one ServiceMonitor endpoint."""
    meta, spec = sm["metadata"], sm["spec"]
    namespaces = spec.get("namespaceSelector", {}).get("matchNames") or [meta["namespace"]]
    wanted = spec["selector"].get("matchLabels", {})
    groups = []
    for svc in services:
        m = svc["metadata"]
        labels = m.get("labels", {})
        if m["namespace"] not in namespaces or any(labels.get(k) != v for k, v in wanted.items()):
            continue
        job = labels.get(spec.get("jobLabel", ""), m["name"])
        for ep in endpoints:
            if ep["metadata"]["namespace"] != m["namespace"] or ep["metadata"]["name"] != m["name"]:
                continue
            for subset in ep.get("subsets", []):
                for port in subset.get("ports", []):
                    if port.get("name") != endpoint["port"]:
                        continue
                    for address in subset.get("addresses", []):
                        groups.append({
                            "targets": [f"{address['ip']}:{port['port']}"],
                            "labels": {"job": job, "namespace": m["namespace"], "service": m["name"],
                                       "pod": address.get("targetRef", {}).get("name", ""),
                                       "endpoint": endpoint["port"]},
                        })
    return groups


def scrape_config(sm, endpoint, index, target_file, ca, token):
    meta = sm["metadata"]
    config = {
        "job_name": f"serviceMonitor/{meta['namespace']}/{meta['name']}/{index}",
        "honor_labels": bool(endpoint.get("honorLabels", False)),
        "file_sd_configs": [{"files": [target_file], "refresh_interval": "5s"}],
        "scheme": endpoint.get("scheme", "http"),
        "metrics_path": endpoint.get("path", "/metrics"),
    }
    if endpoint.get("interval"):
        config["scrape_interval"] = endpoint["interval"]
    if endpoint.get("scrapeTimeout"):
        config["scrape_timeout"] = endpoint["scrapeTimeout"]
    tls = endpoint.get("tlsConfig")
    if tls:
        out = {}
        if "ca" in tls:
            out["ca_file"] = ca
        if tls.get("serverName"):
            out["server_name"] = tls["serverName"]
        if tls.get("insecureSkipVerify"):
            out["insecure_skip_verify"] = True
        config["tls_config"] = out
    if endpoint.get("bearerTokenFile"):
        config["authorization"] = {"type": "Bearer", "credentials_file": token}
    return config


def control(config, job, **changes):
    """A copy of config as job `job` (its job label set to it), with the changes applied."""
    c = copy.deepcopy(config)
    c["job_name"] = job
    c["relabel_configs"] = [{"target_label": "job", "replacement": job}]
    if "server_name" in changes:
        c["tls_config"]["server_name"] = changes["server_name"]
    if "token" in changes:
        c["authorization"]["credentials_file"] = changes["token"]
    return c


def main():
    ap = argparse.ArgumentParser()
    for name in ("servicemonitor", "prometheusrule", "services", "endpoints", "ca", "token",
                 "stranger-token", "wrong-server-name", "config", "rules", "targets-dir"):
        ap.add_argument("--" + name, required=True)
    a = ap.parse_args()
    monitors = json.load(open(a.servicemonitor))["items"]
    rules = json.load(open(a.prometheusrule))["items"]
    if len(monitors) != 1 or len(rules) != 1:
        sys.exit(f"expected one ServiceMonitor and one PrometheusRule, got {len(monitors)} and {len(rules)}")
    sm = monitors[0]
    services = json.load(open(a.services))["items"]
    endpoints = json.load(open(a.endpoints))["items"]
    configs = []
    for i, e in enumerate(sm["spec"]["endpoints"]):
        groups = targets(sm, e, services, endpoints)
        if not groups:
            sys.exit(f"the ServiceMonitor's endpoint {i} (port {e.get('port')}) selects no address")
        target_file = f"{a.targets_dir}/endpoint-{i}.json"
        with open(target_file, "w") as f:
            json.dump(groups, f)
        configs.append(scrape_config(sm, e, i, target_file, a.ca, a.token))
    configs.append(control(configs[0], "control-wrong-server-name", server_name=a.wrong_server_name))
    configs.append(control(configs[0], "control-unbound-token", token=a.stranger_token))
    with open(a.rules, "w") as f:
        yaml.safe_dump({"groups": rules[0]["spec"]["groups"]}, f, sort_keys=False)
    with open(a.config, "w") as f:
        yaml.safe_dump({"global": {"scrape_interval": "5s", "evaluation_interval": "5s"},
                        "rule_files": [a.rules], "scrape_configs": configs}, f, sort_keys=False)


if __name__ == "__main__":
    main()
