#!/usr/bin/env python3
"""Attack traffic for the e2e attack tests (issue 45): attack_review_test.sh and
attack_tokens_test.sh. Python 3 standard library only.

Every request goes to a loopback address (a URL naming another host is refused) and every loop
is bounded in count and in time: each subcommand stops by itself. Subcommands print one JSON
object on stdout (the tests read it with python3 -c); progress goes to stderr.

API-server subcommands (--api URL --token-file FILE: the admin token of the local cluster):
  create-pods   POST COUNT pods bound to NODE (spec.nodeName; no scheduler runs)
  delete-pods   delete every pod of a namespace at once (one deletecollection, grace 0)
  evict-time    taint NODE NoExecute, then poll until COUNT pods of a label have a
                deletionTimestamp (or are gone): the milliseconds from the taint
Controller subcommands:
  review-flood  CONNS connections looping POSTs of an AdmissionReview that gives NODE TAINTS
                NoExecute taints, until --stop-file exists (or --max-seconds)
  watch         /healthz every 0.5 s (5 s timeout), the Lease every 1 s, the process every
                0.5 s, until --stop-file exists (or --max-seconds)
  tokens        a flood of GET /metrics with random bearer tokens beside readers with valid
                tokens on a fixed schedule (fresh TCP connection per read)
  bad-bytes     requests with byte 0xFF in the bearer token or in the path
"""
import argparse
import datetime
import http.client
import ipaddress
import json
import os
import secrets
import socket
import ssl
import sys
import threading
import time
import urllib.parse

MAX_SECONDS = 300  # no loop of this helper runs longer, whatever it is told


def loopback(url):
    """(scheme, host, port) of URL; exits when the host is not a loopback address."""
    u = urllib.parse.urlsplit(url)
    host = u.hostname or ""
    ok = host == "localhost"
    if not ok:
        try:
            ok = ipaddress.ip_address(host).is_loopback
        except ValueError:
            ok = False
    if not ok:
        sys.exit(f"attack.py: refusing {url}: only loopback addresses are targets")
    port = u.port or (443 if u.scheme == "https" else 80)
    return u.scheme, host, port


def tls_context():
    # The controller's certificate is self-signed (generated at start) and the API server's is
    # the local cluster's own: loopback test traffic, no verification.
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


TLS = tls_context()


def connection(url, timeout):
    scheme, host, port = loopback(url)
    if scheme == "https":
        return http.client.HTTPSConnection(host, port, timeout=timeout, context=TLS)
    return http.client.HTTPConnection(host, port, timeout=timeout)


def progress(*args):
    print("attack.py:", *args, file=sys.stderr, flush=True)


def read_token(path):
    with open(path, encoding="ascii") as f:
        return f.read().strip()


def bounded_seconds(s):
    return min(float(s), MAX_SECONDS)


def stop_requested(stop_file, deadline):
    return (stop_file and os.path.exists(stop_file)) or time.monotonic() >= deadline


def parse_time(s):
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


class Api:
    """The API server with the admin token: one kept-alive connection per thread."""

    def __init__(self, url, token):
        self.url = url
        loopback(url)
        self.headers = {"Authorization": "Bearer " + token, "Accept": "application/json"}
        self.local = threading.local()

    def request(self, method, path, body=None, content_type="application/json", timeout=30):
        for attempt in range(5):
            conn = getattr(self.local, "conn", None)
            if conn is None:
                conn = self.local.conn = connection(self.url, timeout)
            headers = dict(self.headers)
            data = None
            if body is not None:
                data = json.dumps(body).encode()
                headers["Content-Type"] = content_type
            try:
                conn.request(method, path, body=data, headers=headers)
                resp = conn.getresponse()
                payload = resp.read()
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                self.local.conn = None
                if attempt == 4:
                    raise
                progress(f"{method} {path}: {e!r}; retrying")
                time.sleep(0.2 * (attempt + 1))
                continue
            if resp.status == 429 or resp.status >= 500:
                time.sleep(0.2 * (attempt + 1))
                continue
            return resp.status, (json.loads(payload) if payload else None)
        return resp.status, None


def cmd_create_pods(a):
    api = Api(a.api, read_token(a.token_file))
    count = min(a.count, 10000)
    labels = dict(kv.split("=", 1) for kv in a.label)
    names = [f"{a.prefix}{i}" for i in range(count)]
    lock = threading.Lock()
    failures = []
    t0 = time.monotonic()

    def worker(part):
        for name in part:
            pod = {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": a.ns, "labels": labels},
                "spec": {
                    "nodeName": a.node, "automountServiceAccountToken": False,
                    "terminationGracePeriodSeconds": 30,
                    "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.9"}],
                },
            }
            status, doc = api.request("POST", f"/api/v1/namespaces/{a.ns}/pods", pod)
            if status not in (201, 409):
                with lock:
                    failures.append(f"{name}: {status} {str(doc)[:200]}")

    threads = [threading.Thread(target=worker, args=(names[i::a.threads],))
               for i in range(a.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"created": count - len(failures), "seconds": round(time.monotonic() - t0, 1),
                      "failures": failures[:5]}))
    return 0 if not failures else 1


def cmd_delete_pods(a):
    api = Api(a.api, read_token(a.token_file))
    status, _ = api.request("DELETE", f"/api/v1/namespaces/{a.ns}/pods",
                            {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
                            timeout=120)
    print(json.dumps({"status": status}))
    return 0 if status == 200 else 1


def cmd_evict_time(a):
    """Taints the node (a JSON patch of spec.taints), then lists the pods of the label every
    100 ms until COUNT of them are gone or have a deletionTimestamp."""
    api = Api(a.api, read_token(a.token_file))
    key, rest = a.taint.split("=", 1)
    value, effect = rest.split(":", 1)
    status, node = api.request("GET", f"/api/v1/nodes/{a.node}")
    if status != 200:
        sys.exit(f"attack.py: GET node {a.node}: {status}")
    taints = [t for t in (node["spec"].get("taints") or []) if t["key"] != key]
    taints.append({"key": key, "value": value, "effect": effect})
    patch = [{"op": "test", "path": "/metadata/resourceVersion",
              "value": node["metadata"]["resourceVersion"]},
             {"op": "add", "path": "/spec/taints", "value": taints}]
    t0 = time.monotonic()
    status, _ = api.request("PATCH", f"/api/v1/nodes/{a.node}", patch,
                            content_type="application/json-patch+json")
    if status != 200:
        sys.exit(f"attack.py: PATCH node {a.node}: {status}")
    deadline = t0 + bounded_seconds(a.timeout)
    selector = urllib.parse.quote(a.selector)
    deleted = 0
    while True:
        status, doc = api.request("GET", f"/api/v1/namespaces/{a.ns}/pods?labelSelector={selector}")
        now = time.monotonic()
        if status == 200:
            present = [p for p in doc["items"] if not p["metadata"].get("deletionTimestamp")]
            deleted = a.count - len(present)
            if deleted >= a.count:
                print(json.dumps({"done": True, "ms": int((now - t0) * 1000), "deleted": deleted}))
                return 0
        if now >= deadline:
            print(json.dumps({"done": False, "ms": int((now - t0) * 1000), "deleted": deleted}))
            return 0
        time.sleep(0.1)


def review_body(node, taints):
    # Short keys: 10,000 taints in about 400 KB, a body the controller reads (not one its body
    # limit refuses unread), as the 409 KB review.
    new_taints = [{"key": f"k{i:05d}", "effect": "NoExecute"} for i in range(taints)]
    review = {
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "attack", "kind": {"group": "", "version": "v1", "kind": "Node"},
            "resource": {"group": "", "version": "v1", "resource": "nodes"},
            "operation": "UPDATE", "name": node, "userInfo": {"username": "attacker"},
            "object": {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node},
                       "spec": {"taints": new_taints}},
            "oldObject": {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node},
                          "spec": {}},
        },
    }
    return json.dumps(review, separators=(",", ":")).encode()


def cmd_review_flood(a):
    scheme, host, port = loopback(a.url)
    path = urllib.parse.urlsplit(a.url).path
    body = review_body(a.node, a.taints)
    deadline = time.monotonic() + bounded_seconds(a.max_seconds)
    lock = threading.Lock()
    stats = {"sent": 0, "answered": 0, "statuses": {}, "errors": {}, "seconds": []}
    in_flight = [0]
    t_start = time.monotonic()

    def worker():
        conn = None
        while not stop_requested(a.stop_file, deadline):
            if conn is None:
                conn = connection(a.url, a.request_timeout)
            t0 = time.monotonic()
            with lock:
                stats["sent"] += 1
                in_flight[0] += 1
            try:
                conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                resp.read()
                with lock:
                    stats["answered"] += 1
                    key = str(resp.status)
                    stats["statuses"][key] = stats["statuses"].get(key, 0) + 1
                    stats["seconds"].append(time.monotonic() - t0)
            except (OSError, http.client.HTTPException) as e:
                with lock:
                    name = type(e).__name__
                    stats["errors"][name] = stats["errors"].get(name, 0) + 1
                conn.close()
                conn = None
                time.sleep(0.1)
            finally:
                with lock:
                    in_flight[0] -= 1

    # Daemon threads: a review still unanswered at the stop is abandoned (counted in_flight),
    # its connection closed when this process exits.
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(a.conns)]
    for t in threads:
        t.start()
    while not stop_requested(a.stop_file, deadline):
        time.sleep(0.1)
    for t in threads:
        t.join(timeout=0.5)
    with lock:
        secs = stats["seconds"]
        out = {"body_bytes": len(body), "taints": a.taints, "conns": a.conns,
               "seconds": round(time.monotonic() - t_start, 1), "sent": stats["sent"],
               "answered": stats["answered"], "answered_200": stats["statuses"].get("200", 0),
               "in_flight_at_stop": in_flight[0],
               "statuses": stats["statuses"], "errors": stats["errors"],
               "avg_s": round(sum(secs) / len(secs), 3) if secs else None,
               "max_s": round(max(secs), 3) if secs else None}
    print(json.dumps(out))
    return 0


def cmd_watch(a):
    """Probes /healthz, reads the Lease and checks the process, each on its own thread."""
    loopback(a.health)
    api = Api(a.api, read_token(a.token_file))
    deadline = time.monotonic() + bounded_seconds(a.max_seconds)
    t_start = time.monotonic()
    lock = threading.Lock()
    out = {"probes": 0, "probe_failures": 0, "max_failures_in_a_row": 0, "probe_max_s": 0.0,
           "first_failures": [], "lease_reads": 0, "lease_read_errors": 0, "holders": [],
           "renewals_seen": 0, "max_lease_age_s": 0.0, "lease_stale_reads": 0,
           "lease_duration_s": None, "process_exited_at_s": None}

    def since():
        return round(time.monotonic() - t_start, 1)

    def probes():
        in_a_row = 0
        next_at = time.monotonic()
        while not stop_requested(a.stop_file, deadline):
            t0 = time.monotonic()
            what = None
            try:
                conn = connection(a.health, 5)
                conn.request("GET", "/healthz")
                resp = conn.getresponse()
                resp.read()
                conn.close()
                if resp.status != 200:
                    what = f"status {resp.status}"
            except (OSError, http.client.HTTPException) as e:
                what = type(e).__name__
            took = time.monotonic() - t0
            with lock:
                out["probes"] += 1
                out["probe_max_s"] = round(max(out["probe_max_s"], took), 3)
                if what is None:
                    in_a_row = 0
                else:
                    in_a_row += 1
                    out["probe_failures"] += 1
                    out["max_failures_in_a_row"] = max(out["max_failures_in_a_row"], in_a_row)
                    if len(out["first_failures"]) < 5:
                        out["first_failures"].append(f"t={since()}s {what} after {took:.1f}s")
            next_at += 0.5
            time.sleep(max(0.0, next_at - time.monotonic()))
            next_at = max(next_at, time.monotonic())

    def lease():
        last_renew = None
        path = f"/apis/coordination.k8s.io/v1/namespaces/{a.lease_ns}/leases/{a.lease_name}"
        while not stop_requested(a.stop_file, deadline):
            t0 = time.monotonic()
            try:
                status, doc = api.request("GET", path, timeout=5)
            except (OSError, http.client.HTTPException):
                status, doc = 0, None
            with lock:
                if status != 200 or doc is None:
                    out["lease_read_errors"] += 1
                else:
                    spec = doc.get("spec", {})
                    out["lease_reads"] += 1
                    holder = spec.get("holderIdentity", "")
                    if holder not in out["holders"]:
                        out["holders"].append(holder)
                    out["lease_duration_s"] = spec.get("leaseDurationSeconds")
                    renew = spec.get("renewTime")
                    if renew:
                        age = time.time() - parse_time(renew)
                        out["max_lease_age_s"] = round(max(out["max_lease_age_s"], age), 1)
                        if age > (spec.get("leaseDurationSeconds") or 15):
                            out["lease_stale_reads"] += 1
                        if renew != last_renew:
                            if last_renew is not None:
                                out["renewals_seen"] += 1
                            last_renew = renew
            time.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))

    def process():
        while not stop_requested(a.stop_file, deadline):
            try:
                os.kill(a.pid, 0)
                # A zombie (exited, not yet reaped by the test's shell) still answers kill 0.
                with open(f"/proc/{a.pid}/stat", encoding="ascii") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
                alive = state != "Z"
            except (OSError, IndexError):
                alive = False
            if not alive:
                with lock:
                    out["process_exited_at_s"] = since()
                return
            time.sleep(0.5)

    threads = [threading.Thread(target=f, daemon=True) for f in (probes, lease, process)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=bounded_seconds(a.max_seconds) + 10)
    out["seconds"] = since()
    print(json.dumps(out))
    return 0


def raw_get(url, path, headers, timeout):
    """One GET on a fresh TLS connection, the request written byte for byte (a path or a header
    value need not be ASCII); the status, 0 when the connection closed (or timed out) without a
    status line."""
    _, host, port = loopback(url)
    req = b"GET " + path + b" HTTP/1.1\r\nHost: " + host.encode() + b"\r\n"
    for name, value in headers:
        req += name + b": " + value + b"\r\n"
    req += b"Connection: close\r\n\r\n"
    data = b""
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw:
            with TLS.wrap_socket(raw, server_hostname=host) as s:
                s.sendall(req)
                data = b""
                while b"\r\n" not in data and len(data) < 4096:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                # The rest of the answer is read and dropped: a scrape reads the whole body.
                while s.recv(65536):
                    pass
    except OSError:  # ssl.SSLError and socket.timeout too: what arrived before still counts
        pass
    line = data.split(b"\r\n", 1)[0].split()
    if len(line) >= 2 and line[0].startswith(b"HTTP/") and line[1].isdigit():
        return int(line[1])
    return 0


def cmd_tokens(a):
    """The schedule, from t=0: every reader reads once before the flood (the 'known' readers,
    which makes them known; the 'fresh' reader does not), the flood runs from t=FLOOD_START for
    FLOOD_SECONDS; during it the 'known' reader reads every KNOWN_EVERY s (longer than the
    controller's 10 s decision cache: each read needs its decision again), the 'frequent'
    reader every 2 s, and the 'fresh' reader, whose token the controller never saw, at
    FLOOD_START+4 s and then every KNOWN_EVERY s."""
    base = a.url.rstrip("/")
    loopback(base)
    tokens = {"known": read_token(a.known_token_file),
              "frequent": read_token(a.frequent_token_file),
              "fresh": read_token(a.fresh_token_file)}
    flood_seconds = bounded_seconds(a.flood_seconds)
    t_start = time.monotonic()
    lock = threading.Lock()
    reads = {name: [] for name in tokens}
    flood = {"sent": 0, "statuses": {}, "errors": {}}
    stop_flood = threading.Event()

    def at():
        return round(time.monotonic() - t_start, 1)

    def read(name):
        t0 = time.monotonic()
        auth = (b"Authorization", b"Bearer " + tokens[name].encode())
        status = raw_get(base, b"/metrics", [auth], timeout=10)
        with lock:
            reads[name].append({"t": round(t0 - t_start, 1), "status": status,
                                "s": round(time.monotonic() - t0, 2)})

    def reader(name, times):
        for t in times:
            time.sleep(max(0.0, t - (time.monotonic() - t_start)))
            read(name)

    def flooder():
        conn = None
        while not stop_flood.is_set():
            if conn is None:
                conn = connection(base, 10)
            try:
                conn.request("GET", "/metrics",
                             headers={"Authorization": "Bearer " + secrets.token_urlsafe(24)})
                resp = conn.getresponse()
                resp.read()
                key = str(resp.status)
                if resp.will_close:
                    conn.close()
                    conn = None
                with lock:
                    flood["sent"] += 1
                    flood["statuses"][key] = flood["statuses"].get(key, 0) + 1
            except (OSError, http.client.HTTPException) as e:
                with lock:
                    flood["sent"] += 1
                    name = type(e).__name__
                    flood["errors"][name] = flood["errors"].get(name, 0) + 1
                conn.close()
                conn = None

    # Before the flood: the known and the frequent reader authenticate (their decision cached).
    read("known")
    read("frequent")
    start = a.flood_start
    end = start + flood_seconds
    known_times = [start + a.known_every * i for i in range(1, 100)
                   if start + a.known_every * i < end - 1]
    frequent_times = [t / 2 for t in range(int(start * 2) + 2, int((end - 1) * 2), 4)]
    fresh_times = [start + 4 + a.known_every * i for i in range(100)
                   if start + 4 + a.known_every * i < end - 1]
    readers = [threading.Thread(target=reader, args=(n, ts), daemon=True)
               for n, ts in (("known", known_times), ("frequent", frequent_times),
                             ("fresh", fresh_times))]
    time.sleep(max(0.0, start - (time.monotonic() - t_start)))
    flood_t0 = time.monotonic()
    flooders = [threading.Thread(target=flooder, daemon=True) for _ in range(a.flood_threads)]
    for t in flooders + readers:
        t.start()
    for t in readers:
        t.join(timeout=flood_seconds + 30)
    time.sleep(max(0.0, end - (time.monotonic() - t_start)))
    stop_flood.set()
    for t in flooders:
        t.join(timeout=15)
    flood_s = time.monotonic() - flood_t0
    with lock:
        out = {"flood": dict(flood, threads=a.flood_threads, seconds=round(flood_s, 1),
                             per_second=round(flood["sent"] / flood_s)),
               "flood_window": [start, end], "reads": reads}
    print(json.dumps(out))
    return 0


def cmd_bad_bytes(a):
    """COUNT GETs with byte 0xFF in the bearer token (mode token) or in the path (mode path,
    with a valid token), each on a fresh connection; the statuses counted (0: no answer)."""
    base = a.url.rstrip("/")
    loopback(base)
    token = read_token(a.token_file).encode() if a.token_file else b""
    statuses = {}
    deadline = time.monotonic() + 60
    for i in range(min(a.count, 1000)):
        if time.monotonic() >= deadline:
            break
        if a.mode == "token":
            path = b"/metrics"
            headers = [(b"Authorization", b"Bearer abc\xff\xfe" + str(i).encode())]
        else:
            path = b"/metrics\xff" + str(i).encode()
            headers = [(b"Authorization", b"Bearer " + token)]
        status = raw_get(base, path, headers, timeout=10)
        statuses[str(status)] = statuses.get(str(status), 0) + 1
    print(json.dumps({"mode": a.mode, "statuses": statuses}))
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)

    def api_args(s):
        s.add_argument("--api", required=True, help="the API server's URL (loopback)")
        s.add_argument("--token-file", required=True, help="file holding the admin token")

    s = sub.add_parser("create-pods")
    api_args(s)
    s.add_argument("--ns", required=True)
    s.add_argument("--node", required=True)
    s.add_argument("--prefix", required=True)
    s.add_argument("--count", type=int, required=True)
    s.add_argument("--label", action="append", default=[], help="KEY=VALUE")
    s.add_argument("--threads", type=int, default=4)
    s.set_defaults(f=cmd_create_pods)

    s = sub.add_parser("delete-pods")
    api_args(s)
    s.add_argument("--ns", required=True)
    s.set_defaults(f=cmd_delete_pods)

    s = sub.add_parser("evict-time")
    api_args(s)
    s.add_argument("--ns", required=True)
    s.add_argument("--node", required=True)
    s.add_argument("--taint", required=True, help="KEY=VALUE:EFFECT")
    s.add_argument("--selector", required=True, help="label selector of the node's pods")
    s.add_argument("--count", type=int, required=True)
    s.add_argument("--timeout", type=float, default=90)
    s.set_defaults(f=cmd_evict_time)

    s = sub.add_parser("review-flood")
    s.add_argument("--url", required=True, help="https://127.0.0.1:PORT/validate/nodes")
    s.add_argument("--node", required=True)
    s.add_argument("--taints", type=int, default=10000)
    s.add_argument("--conns", type=int, default=3)
    s.add_argument("--request-timeout", type=float, default=120)
    s.add_argument("--stop-file", required=True)
    s.add_argument("--max-seconds", type=float, default=120)
    s.set_defaults(f=cmd_review_flood)

    s = sub.add_parser("watch")
    api_args(s)
    s.add_argument("--health", required=True, help="http://127.0.0.1:PORT (the probe port)")
    s.add_argument("--lease-ns", required=True)
    s.add_argument("--lease-name", required=True)
    s.add_argument("--pid", type=int, required=True)
    s.add_argument("--stop-file", required=True)
    s.add_argument("--max-seconds", type=float, default=120)
    s.set_defaults(f=cmd_watch)

    s = sub.add_parser("tokens")
    s.add_argument("--url", required=True, help="https://127.0.0.1:PORT (the metrics port)")
    s.add_argument("--known-token-file", required=True)
    s.add_argument("--frequent-token-file", required=True)
    s.add_argument("--fresh-token-file", required=True)
    s.add_argument("--flood-threads", type=int, default=32)
    s.add_argument("--flood-start", type=float, default=2)
    s.add_argument("--flood-seconds", type=float, default=40)
    s.add_argument("--known-every", type=float, default=12)
    s.set_defaults(f=cmd_tokens)

    s = sub.add_parser("bad-bytes")
    s.add_argument("--url", required=True, help="https://127.0.0.1:PORT (the metrics port)")
    s.add_argument("--mode", choices=["token", "path"], required=True)
    s.add_argument("--token-file", help="a valid token (mode path)")
    s.add_argument("--count", type=int, default=100)
    s.set_defaults(f=cmd_bad_bytes)

    a = p.parse_args()
    return a.f(a)


if __name__ == "__main__":
    sys.exit(main())
