#!/usr/bin/env python3
"""Detection and recovery time of a running peer (detect.sh starts the farm and the peer).

For each endpoint index: its address goes into the farm's fail list and nginx reloads; the
clock starts when the endpoint is seen answering 503 (a reload is not instantaneous), and
stops when the peer shows it DOWN: HAProxy's server status on its stats socket, or the
address gone from the hosts file the orchestrator writes. Then the same for healing. Prints
one line per trial on stderr and a JSON summary (min / median / max ms) on stdout.
Standard library only; every address is on loopback."""
import argparse
import http.client
import json
import os
import signal
import socket
import statistics
import sys
import time


def ip(i):
    return f"127.3.{i // 250}.{i % 250 + 1}"


def http_code(address, port):
    try:
        c = http.client.HTTPConnection(address, port, timeout=0.5)
        c.request("GET", "/healthz")
        code = c.getresponse().status
        c.close()
        return code
    except OSError:
        return None


def haproxy_statuses(sock, sid):
    """Server statuses (column 18 of `show stat`: UP, DOWN, or a "going" state while it
    changes) of backend `farm`; sid -1 for every server."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock)
    s.sendall(f"show stat farm 4 {sid}\n".encode())
    out = b""
    while chunk := s.recv(65536):
        out += chunk
    s.close()
    rows = [r.split(",") for r in out.decode().splitlines() if r and not r.startswith("#")]
    return [r[17] for r in rows if len(r) > 17]


def haproxy_down(sock, i):
    statuses = haproxy_statuses(sock, i + 1)
    return bool(statuses) and statuses[0].startswith("DOWN")


def hosts_count(path):
    try:
        with open(path) as f:
            return sum(1 for line in f if line.strip() and not line.startswith("#"))
    except OSError:
        return 0


def hosts_down(path, i):
    try:
        with open(path) as f:
            present = {line.split()[0] for line in f if line.strip() and not line.startswith("#")}
    except OSError:
        return False
    return ip(i) not in present


def set_failing(state, indexes):
    with open(os.path.join(state, "fail.map"), "w") as f:
        f.writelines(f"{ip(i)} 1;\n" for i in indexes)
    with open(os.path.join(state, "nginx.pid")) as f:
        os.kill(int(f.read()), signal.SIGHUP)


def wait(what, ready, timeout=60.0, poll=0.005):
    start = time.monotonic()
    while not ready():
        if time.monotonic() - start > timeout:
            sys.exit(f"timed out waiting for {what}")
        time.sleep(poll)
    return time.monotonic()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", choices=["haproxy", "hosts"], required=True)
    ap.add_argument("--state", required=True, help="detect.sh's state directory")
    ap.add_argument("--port", type=int, required=True, help="the farm's port")
    ap.add_argument("--n", type=int, required=True, help="endpoints: all must be up first")
    ap.add_argument("--idx", type=int, action="append", required=True)
    a = ap.parse_args()
    if a.kind == "haproxy":
        sock = os.path.join(a.state, "haproxy.sock")
        down = lambda i: haproxy_down(sock, i)  # noqa: E731
        up = lambda: haproxy_statuses(sock, -1).count("UP")  # noqa: E731
    else:
        hosts = os.path.join(a.state, "bench.hosts")
        down = lambda i: hosts_down(hosts, i)  # noqa: E731
        up = lambda: hosts_count(hosts)  # noqa: E731
    wait(f"all {a.n} endpoints up", lambda: up() >= a.n, timeout=120, poll=0.5)
    time.sleep(5)
    detect, recover = [], []
    for i in a.idx:
        set_failing(a.state, [i])
        seen = wait("503 at the farm", lambda: http_code(ip(i), a.port) == 503)
        detect.append((wait("DOWN", lambda: down(i)) - seen) * 1000)
        set_failing(a.state, [])
        seen = wait("200 at the farm", lambda: http_code(ip(i), a.port) == 200)
        recover.append((wait("UP", lambda: not down(i)) - seen) * 1000)
        print(f"{a.kind} idx {i}: detect {detect[-1]:.0f} ms, recover {recover[-1]:.0f} ms",
              file=sys.stderr)
        time.sleep(1.0)
    summary = lambda v: [round(min(v)), round(statistics.median(v)), round(max(v))]  # noqa: E731
    print(json.dumps({"peer": a.kind, "trials": len(a.idx),
                      "detect_ms_min_median_max": summary(detect),
                      "recover_ms_min_median_max": summary(recover)}))


if __name__ == "__main__":
    main()
