#!/usr/bin/env python3
"""Memory of watches whose clients never read (issue 43).

Starts grid-wrapper-sim at scale S (or x10) and a grid-wrapper binary against it, reads one
slice watch of each kind to its end marker (warm-up), then opens N EndpointSlice watches with
kube-proxy's selector -- half from resourceVersion 0, half WatchList -- and never reads them.
Prints one line per run: grid-wrapper's VmRSS before, with the stuck watches open (the largest of
five readings a second after the last one is open), per stuck watch, and after they are closed.
With --readers N instead: N concurrent WatchLists that do read, each to its initial-events-end
marker; the line gives the peak RSS (VmHWM, reset just before they open) above the RSS before.

  python3 scripts/stuckbench.py --bin BINARY --sim target/debug/grid-wrapper-sim \\
      [--scale S|x10] [--watches 300 | --readers 100] [--runs 3] [--label NAME]

Loopback only; every child is killed on exit.
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

SCALES = {
    "S": ["--nodes", "500", "--services", "2000", "--zones", "20", "--endpoints-per-slice", "10"],
    "x10": ["--nodes", "5000", "--services", "20000", "--zones", "200", "--endpoints-per-slice", "10"],
}
SELECTOR = "%21service.kubernetes.io%2Fheadless%2C%21service.kubernetes.io%2Fservice-proxy-name"
V1 = "/apis/discovery.k8s.io/v1/endpointslices"
PLAIN = f"{V1}?labelSelector={SELECTOR}&watch=true&resourceVersion=0&allowWatchBookmarks=true&timeoutSeconds=3600"
WATCHLIST = (f"{V1}?labelSelector={SELECTOR}&watch=true&sendInitialEvents=true"
             "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=3600")
OPEN = 'grid_wrapper_open_watches{resource="endpointslices.discovery.k8s.io/v1"}'


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss(pid, field="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field}")


def readers(pid, addr, n):
    """N WatchLists read to their marker at once; returns the peak RSS while they ran."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current RSS
    errors = []

    def one():
        try:
            read_initial(addr, WATCHLIST)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    if errors:
        raise RuntimeError(f"{len(errors)} readers failed: {errors[0]}")
    return rss(pid, "VmHWM")


def get(url, timeout=30):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read()


def metric(health, name):
    _, body = get(f"http://{health}/metrics")
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


def wait(what, cond, limit):
    end = time.time() + limit
    while not cond():
        if time.time() > end:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.1)


def read_initial(addr, path):
    """Reads a watch to its first BOOKMARK; returns the ADDED count."""
    s = socket.create_connection(addr)
    s.settimeout(120)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    buf, added = b"", 0
    while True:
        data = s.recv(1 << 20)
        if not data:
            raise RuntimeError("watch closed before its marker")
        buf += data
        added += buf.count(b'"type":"ADDED"')
        if b'"type":"BOOKMARK"' in buf:
            s.close()
            return added
        buf = buf[-64:]


def run(args, sim_url):
    port, health = free_port(), free_port()
    w = subprocess.Popen(
        [args.bin, f"--master={sim_url}", "--hostname=node-00000",
         f"--bind-address=127.0.0.1:{port}", f"--metrics-bind-address=127.0.0.1:{health}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        h = f"127.0.0.1:{health}"
        addr = ("127.0.0.1", port)

        def ready():
            try:
                return get(f"http://{h}/readyz", 2)[0] == 200
            except Exception:
                return False

        wait("readiness", ready, 600)
        for path in (PLAIN, WATCHLIST):
            read_initial(addr, path)
        wait("warm-up watches to close", lambda: metric(h, OPEN) == 0, 30)
        time.sleep(2)
        before = rss(w.pid)
        if args.readers:
            return before, readers(w.pid, addr, args.readers), rss(w.pid)
        held = []
        for i in range(args.watches):
            s = socket.create_connection(addr)
            path = PLAIN if i % 2 == 0 else WATCHLIST
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            held.append(s)
        wait("stuck watches to open", lambda: metric(h, OPEN) == args.watches, 120)
        time.sleep(1)
        during = 0
        for _ in range(5):
            during = max(during, rss(w.pid))
            time.sleep(0.2)
        for s in held:
            s.close()
        wait("stuck watches to close", lambda: metric(h, OPEN) == 0, 60)
        time.sleep(3)
        after = rss(w.pid)
        return before, during, after
    finally:
        w.send_signal(signal.SIGKILL)
        w.wait()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--sim", default="target/debug/grid-wrapper-sim")
    p.add_argument("--scale", default="S", choices=sorted(SCALES))
    p.add_argument("--watches", type=int, default=300)
    p.add_argument("--readers", type=int, default=0)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--label", default=None)
    args = p.parse_args()
    sim = subprocess.Popen(
        [args.sim, "--fixture", "scale", "--history", "20000"] + SCALES[args.scale],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        url = sim.stdout.readline().decode().split()[-1]
        label = args.label or os.path.basename(args.bin)
        for i in range(args.runs):
            before, during, after = run(args, url)
            if args.readers:
                print(json.dumps({"label": label, "scale": args.scale, "run": i + 1,
                                  "readers": args.readers, "rss_before": before,
                                  "peak": during, "peak_above": during - before,
                                  "rss_after": after}), flush=True)
                continue
            per = (during - before) / args.watches
            print(json.dumps({"label": label, "scale": args.scale, "run": i + 1,
                              "watches": args.watches, "rss_before": before,
                              "rss_stuck": during, "per_watch": round(per),
                              "rss_after_close": after}), flush=True)
    finally:
        sim.send_signal(signal.SIGKILL)
        sim.wait()


if __name__ == "__main__":
    sys.exit(main())
