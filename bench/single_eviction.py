#!/usr/bin/env python3
"""Single evictions with idle gaps: kube-controller-manager's taint manager and ours, interleaved.

An independent harness (issue 16 item 4), in Python's standard library only, so that it shares
no code with the controller or with bench/eviction_compare.cpp. Per run it creates a fresh node
(reported Ready, as a kubelet would) and a pod bound to it, waits until its own pod watch has
seen the pod and then a fixed idle gap (so the controller under test has seen the pod too, and
has nothing else to do), PATCHes a NoExecute taint onto the node and times, on the pod watch
opened before the PATCH, the moment the pod's deletionTimestamp shows. Then it deletes both.

The controllers run one at a time, alternating: start one, wait until it evicts a canary pod
(its caches are synced and it acts), time --block runs, stop it, start the other. Both run
with the client limits lifted (--kube-api-qps/--kube-api-burst) and, for ours,
--disruption-condition=false (kube-controller-manager 1.20 does not patch the condition).

    bench/single_eviction.py --kubeconfig CLUSTER/admin.kubeconfig \\
        --kcm ~/.cache/taint-eviction-controller/kubernetes-v1.20.2/bin/kube-controller-manager \\
        --tec build/bin/taint-eviction-controller --runs 20 --out /tmp/single.json

--stages runs ours at --log-level=trace and prints, from its stage=... lines (steady clock,
the same CLOCK_MONOTONIC as time.monotonic() here), where each eviction's time goes: watch
bytes in, decode, controller queue, worker, decision, timed queue, sink, connection, DELETE
written and answered, and the event POST beside it. --tec-base runs a second build of ours
(or a wrapper script) as a third controller, to compare two versions. The JSON (--out) keeps
every run's names and monotonic times, and wall_minus_monotonic to line them up with
wall-clock logs (an API server's audit log, kube-controller-manager's klog lines).

Not part of `make test`: it takes minutes and its figures depend on the machine.
"""

import argparse
import base64
import http.client
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import uuid

TAINT_KEY = "tec-bench/single-eviction"
LABEL = "tec-bench-single"


def now():
    return time.monotonic()


def percentile(values, p):
    """Linear interpolation between closest ranks (as bench/support's percentile())."""
    if not values:
        return float("nan")
    v = sorted(values)
    rank = p / 100.0 * (len(v) - 1)
    lo = int(rank)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (rank - lo)


class kubeconfig:
    """The current context of a kubeconfig, read through `kubectl config view` (JSON)."""

    def __init__(self, path):
        out = subprocess.run(
            ["kubectl", "--kubeconfig", path, "config", "view", "--raw", "--minify", "-o", "json"],
            check=True, capture_output=True, text=True).stdout
        cfg = json.loads(out)
        cluster = cfg["clusters"][0]["cluster"]
        user = cfg["users"][0]["user"]
        server = cluster["server"]
        assert server.startswith("https://"), "only https API servers are supported"
        hostport = server[len("https://"):].rstrip("/")
        self.host, _, port = hostport.rpartition(":")
        self.port = int(port)
        self._tmp = tempfile.TemporaryDirectory(prefix="single-eviction-")
        self.ctx = ssl.create_default_context()
        if "certificate-authority-data" in cluster:
            self.ctx.load_verify_locations(
                cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
        elif "certificate-authority" in cluster:
            self.ctx.load_verify_locations(cafile=cluster["certificate-authority"])
        if cluster.get("insecure-skip-tls-verify"):
            self.ctx.check_hostname = False
            self.ctx.verify_mode = ssl.CERT_NONE
        cert = self._file(user, "client-certificate")
        key = self._file(user, "client-key")
        if cert and key:
            self.ctx.load_cert_chain(cert, key)
        self.headers = {"Accept": "application/json"}
        if user.get("token"):
            self.headers["Authorization"] = "Bearer " + user["token"]

    def _file(self, user, field):
        if field + "-data" in user:
            path = os.path.join(self._tmp.name, field)
            with open(path, "wb") as f:
                f.write(base64.b64decode(user[field + "-data"]))
            return path
        return user.get(field)

    def connect(self, timeout=30):
        return http.client.HTTPSConnection(self.host, self.port, context=self.ctx,
                                           timeout=timeout)


class api:
    """Plain requests on one persistent connection (reopened after an error)."""

    def __init__(self, kc):
        self.kc = kc
        self.conn = None

    def call(self, method, path, body=None, content_type="application/json"):
        data = None if body is None else json.dumps(body).encode()
        headers = dict(self.kc.headers)
        if data is not None:
            headers["Content-Type"] = content_type
        for attempt in (1, 2):
            if self.conn is None:
                self.conn = self.kc.connect()
            try:
                self.conn.request(method, path, body=data, headers=headers)
                resp = self.conn.getresponse()
                text = resp.read()
                return resp.status, (json.loads(text) if text else None)
            except (http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def must(self, method, path, body=None, content_type="application/json", ok=(200, 201)):
        status, obj = self.call(method, path, body, content_type)
        if status not in ok:
            raise RuntimeError(f"{method} {path}: {status} {obj}")
        return obj


class pod_watch(threading.Thread):
    """A watch on the namespace's pods: when each pod was first seen, and first terminating."""

    def __init__(self, kc, client, ns):
        super().__init__(daemon=True)
        self.kc, self.ns = kc, ns
        self.cond = threading.Condition()
        self.seen = {}
        self.terminating = {}
        self.error = None
        self.rv = client.must("GET", f"/api/v1/namespaces/{ns}/pods?limit=1")["metadata"][
            "resourceVersion"]
        self.opened = threading.Event()

    def run(self):
        try:
            conn = self.kc.connect(timeout=None)
            conn.request("GET", f"/api/v1/namespaces/{self.ns}/pods?watch=1&resourceVersion="
                         f"{self.rv}&allowWatchBookmarks=true&timeoutSeconds=7200",
                         headers=self.kc.headers)
            resp = conn.getresponse()
            if resp.status != 200:
                raise RuntimeError(f"watch: {resp.status} {resp.read()[:200]}")
            self.opened.set()
            while True:
                line = resp.readline()
                t = now()
                if not line:
                    raise RuntimeError("the pod watch ended")
                ev = json.loads(line)
                if ev.get("type") == "ERROR":
                    raise RuntimeError(f"watch error: {ev}")
                meta = ev.get("object", {}).get("metadata", {})
                name = meta.get("name")
                with self.cond:
                    if ev["type"] in ("ADDED", "MODIFIED") and name not in self.seen:
                        self.seen[name] = t
                    if meta.get("deletionTimestamp") and name not in self.terminating:
                        self.terminating[name] = t
                    self.cond.notify_all()
        except Exception as e:  # reported to the main thread, which stops
            with self.cond:
                self.error = repr(e)
                self.cond.notify_all()
            self.opened.set()

    def wait_for(self, table, name, deadline, alive=lambda: True):
        with self.cond:
            while name not in table:
                if self.error:
                    raise RuntimeError(self.error)
                left = deadline - now()
                if left <= 0 or not alive():
                    return None
                self.cond.wait(min(left, 0.5))
            return table[name]


class controller:
    def __init__(self, name, argv, log_path):
        self.name, self.argv, self.log_path = name, argv, log_path
        self.proc = None

    def start(self):
        log = open(self.log_path, "a")
        log.write("\n=== single_eviction.py: starting " + " ".join(self.argv) + "\n")
        log.flush()
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        log.close()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        if not self.alive():
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class harness:
    def __init__(self, args, kc):
        self.args = args
        self.client = api(kc)
        self.ns = args.namespace
        self.seq = 0
        self.tag = uuid.uuid4().hex[:6]
        status, _ = self.client.call("GET", f"/api/v1/namespaces/{self.ns}")
        if status == 404:
            self.client.must("POST", "/api/v1/namespaces",
                             {"apiVersion": "v1", "kind": "Namespace",
                              "metadata": {"name": self.ns}})
        self.watch = pod_watch(kc, self.client, self.ns)
        self.watch.start()
        self.watch.opened.wait(30)
        if self.watch.error:
            raise RuntimeError(self.watch.error)

    def fresh(self, what):
        self.seq += 1
        return f"se-{self.tag}-{what}-{self.seq}"

    def make(self, node, pod):
        self.client.must("POST", "/api/v1/nodes",
                         {"apiVersion": "v1", "kind": "Node",
                          "metadata": {"name": node, "labels": {LABEL: "true"}}})
        # Ready, as a kubelet would report it: without it kube-controller-manager's node
        # lifecycle controller taints the node itself and may overwrite our taint.
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.client.must("PATCH", f"/api/v1/nodes/{node}/status",
                         {"status": {"conditions": [
                             {"type": "Ready", "status": "True", "reason": "KubeletReady",
                              "message": "single_eviction.py", "lastHeartbeatTime": stamp,
                              "lastTransitionTime": stamp}]}},
                         "application/merge-patch+json")
        self.client.must("POST", f"/api/v1/namespaces/{self.ns}/pods",
                         {"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": pod, "labels": {"app": LABEL}},
                          "spec": {"nodeName": node, "containers": [
                              {"name": "pause", "image": "registry.k8s.io/pause:3.9"}]}})
        if self.watch.wait_for(self.watch.seen, pod, now() + 30) is None:
            raise RuntimeError(f"the watch did not see pod {pod}")

    def taint(self, node):
        self.client.must("PATCH", f"/api/v1/nodes/{node}",
                         {"spec": {"taints": [{"key": TAINT_KEY, "value": "bench",
                                               "effect": "NoExecute"}]}},
                         "application/merge-patch+json")

    def remove(self, node, pod):
        self.client.must("DELETE", f"/api/v1/namespaces/{self.ns}/pods/{pod}",
                         {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0},
                         ok=(200, 202, 404))
        self.client.must("DELETE", f"/api/v1/nodes/{node}", ok=(200, 202, 404))

    def one(self, ctrl, gap):
        """One eviction: its names and times (time.monotonic(), CLOCK_MONOTONIC)."""
        node = self.fresh("node")
        pod = node.replace("-node-", "-pod-")
        self.make(node, pod)
        time.sleep(gap)
        t0 = now()
        self.taint(node)
        t_patch = now()
        t1 = self.watch.wait_for(self.watch.terminating, pod, t0 + 30, ctrl.alive)
        self.remove(node, pod)
        if t1 is None:
            raise RuntimeError(f"{ctrl.name}: pod {pod} not evicted within 30 s "
                               f"(alive: {ctrl.alive()}; log {ctrl.log_path})")
        return {"node": node, "pod": f"{self.ns}/{pod}", "t0": t0, "patched": t_patch,
                "seen": t1}

    def block(self, ctrl, runs):
        ctrl.start()
        try:
            started = now()
            # The canary: evicted once the controller's caches are synced and it acts.
            node = self.fresh("node")
            pod = node.replace("-node-", "-pod-")
            self.make(node, pod)
            self.taint(node)
            t = self.watch.wait_for(self.watch.terminating, pod, now() + 120, ctrl.alive)
            self.remove(node, pod)
            if t is None:
                raise RuntimeError(f"{ctrl.name} did not evict the canary (log {ctrl.log_path})")
            ready = t - started
            out = []
            for _ in range(runs):
                out.append(self.one(ctrl, self.args.gap))
            return ready, out
        finally:
            ctrl.stop()


STAGE_LINE = re.compile(r"stage=(\w+) (.*?)\s*t_us=(\d+)")

# (label, stage, a predicate on the rest of the line given the run, anchor) in pipeline order.
# anchor "t0": the first match after the taint PATCH was sent; a label: the first match at or
# after that stage's time.
STAGES = [
    ("watch bytes in (node)", "watch_bytes", lambda r, x: "kind=nodes" in x, "t0"),
    ("decoded (node)", "decoded", lambda r, x: "kind=nodes" in x, "t0"),
    ("controller enqueue", "enqueued", lambda r, x: f'node="{r["node"]}"' in x, "t0"),
    ("worker picks it up", "worker", lambda r, x: f'node="{r["node"]}"' in x, "t0"),
    ("decision", "decided", lambda r, x: f'pod="{r["pod"]}"' in x, "t0"),
    ("timed queue fires", "fired", lambda r, x: f'pod="{r["pod"]}"' in x, "t0"),
    ("sink starts", "sink", lambda r, x: f'pod="{r["pod"]}"' in x, "t0"),
    ("DELETE: client", "request", lambda r, x: x.startswith("DELETE") and r["podpath"] in x, "t0"),
    ("DELETE: connection", "acquired",
     lambda r, x: x.startswith("DELETE") and r["podpath"] in x, "t0"),
    ("DELETE: written", "written", lambda r, x: x.startswith("DELETE") and r["podpath"] in x,
     "t0"),
    ("DELETE: response", "response", lambda r, x: x.startswith("DELETE") and r["podpath"] in x,
     "t0"),
    ("watch bytes in (pod, ours)", "watch_bytes", lambda r, x: "kind=pods" in x,
     "DELETE: written"),
]
EVENT_STAGES = [
    ("event POST: client", "request"),
    ("event POST: connection", "acquired"),
    ("event POST: written", "written"),
    ("event POST: response", "response"),
]


def stage_breakdown(log_path, runs):
    """Each run's stages (ms after the taint PATCH was sent) from ours' trace-level log."""
    lines = []
    with open(log_path, errors="replace") as f:
        for line in f:
            m = STAGE_LINE.search(line)
            if m:
                lines.append((int(m.group(3)) / 1e6, m.group(1), m.group(2)))
    lines.sort(key=lambda l: l[0])
    out = []
    for run in runs:
        r = dict(run, podpath="/pods/" + run["pod"].split("/", 1)[1])
        t0, end = run["t0"], run["seen"] + 0.5
        window = [l for l in lines if t0 <= l[0] <= end]
        at = {"t0": t0}
        extra = {}
        for label, stage, pred, anchor in STAGES:
            start = at.get(anchor)
            if start is None:
                continue
            hit = next((l for l in window if l[1] == stage and l[0] >= start and pred(r, l[2])),
                       None)
            if hit:
                at[label] = hit[0]
                if stage == "acquired":
                    extra["DELETE connection"] = hit[2].split(" t_us")[0]
        fired = at.get("timed queue fires", t0)
        for label, stage in EVENT_STAGES:
            hit = next((l for l in window if l[1] == stage and l[0] >= fired
                        and l[2].startswith("POST") and "/events" in l[2]), None)
            if hit:
                at[label] = hit[0]
                if stage == "acquired":
                    extra["event connection"] = hit[2]
        at["PATCH answered (harness)"] = run["patched"]
        at["deletionTimestamp seen (harness)"] = run["seen"]
        out.append({"ms": {k: round((v - t0) * 1e3, 3) for k, v in at.items() if k != "t0"},
                    "connections": extra})
    return out


def print_breakdown(per_run):
    order = (["PATCH answered (harness)"] + [s[0] for s in STAGES[:-1]]
             + [s[0] for s in EVENT_STAGES] + [STAGES[-1][0], "deletionTimestamp seen (harness)"])
    print("\nours, per stage: ms after the taint PATCH was sent (median over runs; "
          "step = median of the time since the stage above)")
    print(f"{'stage':34} {'p50':>7} {'p90':>7} {'step p50':>9} {'step p90':>9}")
    prev = None
    for label in order:
        v = [r["ms"][label] for r in per_run if label in r["ms"]]
        if not v:
            continue
        step = ""
        if prev and not label.startswith("event"):
            d = [r["ms"][label] - r["ms"][prev] for r in per_run
                 if label in r["ms"] and prev in r["ms"]]
            step = f"{percentile(d, 50):9.2f} {percentile(d, 90):9.2f}"
        print(f"{label:34} {percentile(v, 50):7.2f} {percentile(v, 90):7.2f} {step}")
        if not label.startswith("event") and label != "PATCH answered (harness)":
            prev = label


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kubeconfig", required=True, help="admin kubeconfig of the API server")
    p.add_argument("--kcm", help="kube-controller-manager binary (v1.20)")
    p.add_argument("--tec", help="taint-eviction-controller binary")
    p.add_argument("--tec-base",
                   help="another build of ours (or a wrapper script), run as a third controller "
                   "'tec-base' with the same flags, to compare two versions")
    p.add_argument("--tec-arg", action="append", default=[],
                   help="an extra flag for taint-eviction-controller (repeat)")
    p.add_argument("--runs", type=int, default=20, help="timed evictions per controller")
    p.add_argument("--block", type=int, default=1,
                   help="timed evictions per start of a controller before switching")
    p.add_argument("--abba", action="store_true",
                   help="reverse the order of the controllers every other block (A,B,B,A,...), "
                   "so a slow spell of a shared machine hits both")
    p.add_argument("--gap", type=float, default=1.5,
                   help="idle seconds between the pod being seen and the taint")
    p.add_argument("--qps", type=int, default=100000, help="--kube-api-qps and -burst of both")
    p.add_argument("--namespace", default="tec-single-eviction")
    p.add_argument("--log-dir", default=".", help="where the controllers' logs go")
    p.add_argument("--out", help="write the samples and the summary here (JSON)")
    p.add_argument("--stages", action="store_true",
                   help="run ours with --log-level=trace and print where each eviction's time "
                   "goes, from its stage=... lines")
    args = p.parse_args()

    kc = kubeconfig(args.kubeconfig)
    ctrls = []
    if args.kcm:
        ctrls.append(controller("kcm", [
            args.kcm, "--kubeconfig=" + args.kubeconfig, "--controllers=nodelifecycle",
            "--leader-elect=false", "--node-monitor-grace-period=1h",
            "--node-startup-grace-period=1h", "--port=0", "--secure-port=0",
            f"--kube-api-qps={args.qps}", f"--kube-api-burst={args.qps}"],
            os.path.join(args.log_dir, "single-kcm.log")))
    for name, binary in (("tec", args.tec), ("tec-base", args.tec_base)):
        if binary:
            ctrls.append(controller(name, [
                binary, "--kubeconfig=" + args.kubeconfig, "--leader-elect=false",
                "--disruption-condition=false", "--metrics-bind-address=0",
                "--health-probe-bind-address=0", f"--kube-api-qps={args.qps}",
                f"--kube-api-burst={args.qps}"]
                + (["--log-level=trace"] if args.stages else []) + args.tec_arg,
                os.path.join(args.log_dir, f"single-{name}.log")))
    if not ctrls:
        p.error("give --kcm, --tec or both")

    h = harness(args, kc)
    results = {c.name: {"latency_ms": [], "patch_ms": [], "ready_s": []} for c in ctrls}
    done = 0
    try:
        while done < args.runs:
            n = min(args.block, args.runs - done)
            flip = args.abba and (done // args.block) % 2 == 1
            for c in (list(reversed(ctrls)) if flip else ctrls):
                ready, samples = h.block(c, n)
                r = results[c.name]
                r["ready_s"].append(round(ready, 3))
                for x in samples:
                    r["latency_ms"].append(round((x["seen"] - x["t0"]) * 1e3, 3))
                    r["patch_ms"].append(round((x["patched"] - x["t0"]) * 1e3, 3))
                    r.setdefault("runs", []).append(x)
                print(f"{c.name:4} run {done + 1:3}-{done + n:<3} "
                      + " ".join(f"{(x['seen'] - x['t0']) * 1e3:6.1f}" for x in samples)
                      + " ms", flush=True)
            done += n
    finally:
        for c in ctrls:
            c.stop()

    print(f"\n{args.runs} runs each, idle gap {args.gap} s, blocks of {args.block}; "
          "taint PATCH sent -> deletionTimestamp on the watch, ms")
    print(f"{'controller':12} {'p50':>7} {'p90':>7} {'p99':>7} {'max':>7} {'min':>7}"
          f"   {'PATCH p50':>9}")
    for name, r in results.items():
        v = r["latency_ms"]
        r["summary"] = {k: round(percentile(v, q), 2)
                        for k, q in (("p50", 50), ("p90", 90), ("p99", 99))}
        r["summary"].update(max=max(v), min=min(v), patch_p50=round(percentile(r["patch_ms"], 50), 2))
        s = r["summary"]
        print(f"{name:12} {s['p50']:7.1f} {s['p90']:7.1f} {s['p99']:7.1f} {s['max']:7.1f} "
              f"{s['min']:7.1f}   {s['patch_p50']:9.1f}")
    for c in ctrls:
        if args.stages and c.name != "kcm":
            per_run = stage_breakdown(c.log_path, results[c.name]["runs"])
            results[c.name]["stages"] = per_run
            print(f"\n[{c.name}]", end="")
            print_breakdown(per_run)
    if args.out:
        # Run times are time.monotonic(); wall = monotonic + this (to line them up with logs
        # and audit events stamped with the wall clock).
        offset = time.time() - time.monotonic()
        with open(args.out, "w") as f:
            json.dump({"args": vars(args), "wall_minus_monotonic": offset, "results": results},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
