#!/usr/bin/env python3
"""Small-cluster soak (issue 8): RSS of grid-wrapper over time under steady churn.

A simulated cluster of 7 nodes and 13 Services (slices of 10 endpoints), ~18 upstream changes/s
(slice annotations and node relabels), 20 watchers of EndpointSlices that reconnect every 1-5 s
resuming from their last resourceVersion, and 3 listers. Prints VmRSS every 10 s and a summary.
Everything on 127.0.0.1; bounded by --secs.

  python3 scripts/soak.py --bin target/release/grid-wrapper --sim target/release/grid-wrapper-sim [--secs 300]
"""
import argparse, http.client, json, random, re, socket, subprocess, sys, threading, time

SEL = "labelSelector=%21service.kubernetes.io%2Fheadless%2C%21service.kubernetes.io%2Fservice-proxy-name"
SLICES = "/apis/discovery.k8s.io/v1/endpointslices"


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def get_json(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", path); r = c.getresponse(); body = r.read(); c.close()
    return r.status, json.loads(body) if body else None


def post(port, path, obj):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("POST", path, body=json.dumps(obj), headers={"Content-Type": "application/json"})
    r = c.getresponse(); r.read(); c.close(); return r.status


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True); ap.add_argument("--sim", required=True)
    ap.add_argument("--secs", type=int, default=300); ap.add_argument("--rate", type=float, default=18)
    a = ap.parse_args()
    sim = subprocess.Popen([a.sim, "--fixture", "scale", "--nodes", "7", "--services", "13", "--zones", "3",
                            "--endpoints-per-slice", "10", "--history", "100000", "--listen", "127.0.0.1:0"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    procs = [sim]
    try:
        line = sim.stdout.readline()
        sport = int(re.search(r":(\d+)", line.split("//")[1]).group(1))
        port, health = free_port(), free_port()
        gw = subprocess.Popen([a.bin, f"--master=http://127.0.0.1:{sport}", "--hostname=node-00000",
                               f"--bind-address=127.0.0.1:{port}", f"--metrics-bind-address=127.0.0.1:{health}", "-v", "0"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(gw)
        for _ in range(600):
            try:
                if get_json(health, "/readyz")[0] == 200: break
            except Exception: pass
            time.sleep(0.05)
        slices = get_json(sport, SLICES)[1]["items"]
        nodes = [n["metadata"]["name"] for n in get_json(sport, "/api/v1/nodes")[1]["items"]]
        stop = time.time() + a.secs
        stats = {"changes": 0, "events": 0, "lists": 0, "list_errors": 0, "reconnects": 0, "gone": 0}
        lock = threading.Lock()

        def churn():
            n, t0 = 0, time.time()
            while time.time() < stop:
                n += 1
                if n % 6 == 0:
                    name = random.choice(nodes[1:])
                    post(sport, "/sim/label-node", {"name": name, "labels": {"zone": f"zone-{random.randint(0, 2)}"}})
                else:
                    s = random.choice(slices)
                    s.setdefault("metadata", {}).setdefault("annotations", {})["soak"] = str(n)
                    s["metadata"].pop("resourceVersion", None)
                    post(sport, "/sim/apply", s)
                with lock: stats["changes"] += 1
                time.sleep(max(0, t0 + n / a.rate - time.time()))

        def watcher():
            rv = get_json(port, f"{SLICES}?{SEL}")[1]["metadata"]["resourceVersion"]
            while time.time() < stop:
                until = time.time() + random.uniform(1, 5)
                try:
                    sock = socket.create_connection(("127.0.0.1", port), timeout=1)
                    sock.sendall(f"GET {SLICES}?{SEL}&watch=true&allowWatchBookmarks=true&resourceVersion={rv} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
                    buf = b""
                    while time.time() < until:
                        try: chunk = sock.recv(65536)
                        except socket.timeout: continue
                        if not chunk: break
                        buf += chunk
                        rvs = re.findall(rb'"resourceVersion":"(\d+)"', buf)
                        if b'"type":"ERROR"' in buf:
                            with lock: stats["gone"] += 1
                            rv = get_json(port, f"{SLICES}?{SEL}")[1]["metadata"]["resourceVersion"]
                            break
                        evs = buf.count(b'{"type":')
                        if rvs: rv = max(int(x) for x in rvs)
                        with lock: stats["events"] += evs
                        buf = buf[-200:] if evs == 0 else b""
                    sock.close()
                    with lock: stats["reconnects"] += 1
                except OSError:
                    time.sleep(0.1)

        def lister():
            while time.time() < stop:
                try:
                    code, _ = get_json(port, f"{SLICES}?{SEL}")
                    with lock: stats["lists" if code == 200 else "list_errors"] += 1
                except Exception:
                    with lock: stats["list_errors"] += 1
                time.sleep(random.uniform(0.1, 0.5))

        threads = [threading.Thread(target=churn, daemon=True)]
        threads += [threading.Thread(target=watcher, daemon=True) for _ in range(20)]
        threads += [threading.Thread(target=lister, daemon=True) for _ in range(3)]
        for t in threads: t.start()
        start, samples = time.time(), []
        print(f"rss at ready: {rss_kib(gw.pid)} KiB", flush=True)
        while time.time() < stop:
            time.sleep(min(10, max(0, stop - time.time())))
            r = rss_kib(gw.pid); samples.append(r)
            print(f"t={time.time() - start:5.0f}s rss={r} KiB changes={stats['changes']} events={stats['events']} lists={stats['lists']} list_errors={stats['list_errors']} gone={stats['gone']}", flush=True)
        for t in threads: t.join(timeout=10)
        fds = len(__import__("os").listdir(f"/proc/{gw.pid}/fd"))
        print(f"summary: rss first {samples[0]} KiB, max {max(samples)} KiB, last {samples[-1]} KiB; fds {fds}; {stats}")
    finally:
        for p in procs:
            p.kill(); p.wait()


if __name__ == "__main__":
    sys.exit(main())
