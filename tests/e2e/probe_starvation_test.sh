#!/usr/bin/env bash
# End to end, the probe port under connection pressure: with 64 idle connections (the server's
# limit) and then 64 connections trickling header bytes held open to :8081, /healthz and
# /readyz still answer at once (the server closes its longest idle, else oldest, connection to
# make room), so a kubelet never restarts a healthy leader for it.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

setup_rbac
start_controller probes
hostport=${HEALTH_URL#http://}

# hold.py HOST:PORT MODE: opens 64 connections to the probe port and keeps them until its stdin closes. MODE
# idle sends nothing; MODE trickle sends a partial request line, then a header byte every 100 ms.
cat >"$WORK/hold.py" <<'PY'
import socket, sys, threading, time
host, port = sys.argv[1].rsplit(":", 1)
mode = sys.argv[2]
conns = []
for _ in range(64):
    s = socket.create_connection((host, int(port)), timeout=5)
    if mode == "trickle":
        s.sendall(b"GET /healthz HTTP/1.1\r\nX-Slow: ")
    conns.append(s)
print("holding", flush=True)
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
while not stop.is_set():
    if mode == "trickle":
        for s in conns:
            try:
                s.send(b"a")
            except OSError:
                pass
    time.sleep(0.1)
PY

for mode in idle trickle; do
  coproc HOLDER { python3 -u "$WORK/hold.py" "$hostport" "$mode"; }
  read -r -t 30 line <&"${HOLDER[0]}" || fail "could not open 64 $mode connections"
  [ "$line" = holding ] || fail "unexpected output from the connection holder: $line"
  for path in /healthz /readyz; do
    t0=$(now_ms)
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$HEALTH_URL$path") || true
    [ "$code" = 200 ] || fail "$path answered '$code' with 64 $mode connections held (expected 200)"
    log "$path: 200 in $(($(now_ms) - t0)) ms with 64 $mode connections open"
  done
  holder_pid=$HOLDER_PID
  eval "exec ${HOLDER[1]}>&-"  # end of input: the holder closes its connections and exits
  wait "$holder_pid" 2>/dev/null || true
done

kill -0 "$CONTROLLER_PID" || fail "the controller died"
stop_controller "$CONTROLLER_PID"
echo "PASS: $TEST_NAME"
