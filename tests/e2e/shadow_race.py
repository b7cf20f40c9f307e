# The same-name race of tests/e2e/shadow_kcm_test.sh (phase C) against an unthrottled
# kube-controller-manager, driven from one process (its reaction is a matter of milliseconds).
# argv: API CA AUTH_HEADER_FILE NS NAME TAINTED UNTAINTED ROUNDS OUT [SETTLE_SECONDS
#       [BLIND_WANTED MAX_ROUNDS]]
# Per round: POST NAME on TAINTED; after 0, 3, 6 or 9 ms (about the built-in's reaction time on
# this machine) force-delete it (uid precondition) and POST NAME on UNTAINTED; watch for up to
# SETTLE s (default 3) whether the re-created pod gets a deletionTimestamp (the built-in's
# DELETE by name, graceful, landed on it: nobody else deletes gracefully here); then (1.5 s
# later if so: a force delete sooner looks like the whole deletion was forced, README)
# force-delete the re-created pod. One line per round to OUT: "round delay_ms uid1
# uid1_terminating_before_the_force_delete(0/1) uid2 uid2_deleted_by_them(0/1) marking_count",
# the last the count of the built-in's Marking Event for NAME after the round (it stops rising
# once client-go's spam filter drops its Events). After ROUNDS rounds, rounds go on (up to
# MAX_ROUNDS in all) until BLIND_WANTED rounds had the re-created pod deleted by the built-in with
# no rise of that count (past the spam filter: nothing proves it theirs), with delay 0 and no
# GET before the force-delete (the only delay that races here: the built-in's DELETE finds the
# first pod gone, and its retry by name 10 ms later hits the second); first_terminating is 0
# for those.
import http.client, json, ssl, sys, time, urllib.parse
api, ca, tokfile, ns, name, tainted, untainted, rounds, out = sys.argv[1:10]
rounds = int(rounds)
u = urllib.parse.urlparse(api)
ctx = ssl.create_default_context(cafile=ca)
token = open(tokfile).read().split("Bearer ", 1)[1].strip()
conn = http.client.HTTPSConnection(u.hostname, u.port, context=ctx, timeout=20)
H = {"Authorization": "Bearer " + token, "Content-Type": "application/json", "User-Agent": "tec-e2e-race"}

def req(method, path, body=None):
    global conn
    for attempt in range(3):
        try:
            conn.request(method, path, body=None if body is None else json.dumps(body), headers=H)
            r = conn.getresponse()
            return r.status, json.loads(r.read() or b"{}")
        except (http.client.HTTPException, OSError):
            conn.close()
            conn = http.client.HTTPSConnection(u.hostname, u.port, context=ctx, timeout=20)
    raise SystemExit(f"{method} {path}: no answer")

pods = f"/api/v1/namespaces/{ns}/pods"
def pod(node):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"nodeName": node, "automountServiceAccountToken": False,
                     "terminationGracePeriodSeconds": 30,
                     "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.9"}]}}
def create(node):
    for _ in range(200):
        s, b = req("POST", pods, pod(node))
        if s == 201:
            return b["metadata"]["uid"]
        if s != 409:
            raise SystemExit(f"POST {name}: HTTP {s}: {str(b)[:300]}")
        time.sleep(0.05)  # the previous one is still there
    raise SystemExit(f"POST {name}: still exists")
def force_delete(uid):
    s, b = req("DELETE", f"{pods}/{name}", {"kind": "DeleteOptions", "apiVersion": "v1",
               "gracePeriodSeconds": 0, "preconditions": {"uid": uid}})
    return s
def get():
    s, b = req("GET", f"{pods}/{name}")
    if s != 200:
        return None, None
    return b["metadata"]["uid"], b["metadata"].get("deletionTimestamp")

def marking_count():
    sel = urllib.parse.quote(f"involvedObject.name={name},reason=TaintManagerEviction")
    s, b = req("GET", f"/api/v1/namespaces/{ns}/events?fieldSelector={sel}")
    return sum(int(e.get("count") or 1) for e in b.get("items", [])
               if e.get("message", "").startswith("Marking for deletion")) if s == 200 else -1

SETTLE = float(sys.argv[10]) if len(sys.argv) > 10 else 3.0
BLIND_WANTED = int(sys.argv[11]) if len(sys.argv) > 11 else 0
MAX_ROUNDS = int(sys.argv[12]) if len(sys.argv) > 12 else rounds
blind, last_count, r = 0, 0, 0
with open(out, "w") as f:
    while r < rounds or (blind < BLIND_WANTED and r < MAX_ROUNDS):
        r += 1
        delay = (r % 4) * 0.003 if r <= rounds else 0.0
        uid1 = create(tainted)
        first_theirs = 0
        if r <= rounds:
            time.sleep(delay)
            uid, ts = get()
            first_theirs = int(uid == uid1 and ts is not None)
        force_delete(uid1)
        uid2 = create(untainted)
        theirs = 0
        end = time.time() + SETTLE
        while time.time() < end:
            uid, ts = get()
            if uid == uid2 and ts:
                theirs = 1
                time.sleep(1.5)  # terminating longer than shadow's forced_within (1 s)
                break
            time.sleep(0.05)
        force_delete(uid2)
        while get()[0] == uid2:
            time.sleep(0.05)
        count = marking_count()
        blind += int(theirs == 1 and count <= last_count)
        last_count = max(last_count, count)
        f.write(f"{r} {int(delay*1000)} {uid1} {first_theirs} {uid2} {theirs} {count}\n")
        f.flush()
        time.sleep(1.0)
