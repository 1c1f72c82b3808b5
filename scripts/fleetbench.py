#!/usr/bin/env python3
"""make fleetbench (issue 38): what a fleet of grid-wrappers coming back after a WAN outage costs
the cloud, and how long until every node serves what changed during the outage.

One grid-wrapper-sim is the cloud. It listens twice: the cloud address the fleet (or the site
relay) reads, and a control address the bench uses, so the outage can close the first alone.
N grid-wrapper processes (each its own ports and --hostname fleet-NNN, a Node of that name at
the cloud) read the cloud directly, or, "with relay", one site relay (grid-wrapper with
--relay-bind-address, TLS, certificates by deploy/relay/make-certs.sh) that reads the cloud.
Once all are ready: the cloud address refuses connections for OUTAGE seconds (/sim/refuse on
that listener: its connections are cut and new ones refused, as when the site's WAN link drops
and the cloud's load balancer answers for the lost backends); during it one EndpointSlice is
changed (a label with the run's mark) and, "throttled", the cloud starts shedding load like an
apiserver's API Priority and Fairness (/sim/load: 429 + Retry-After past FLEET_MAX_PER_SECOND
requests in a second, or FLEET_MAX_IN_FLIGHT short requests in flight). Then the cloud returns.

Measured from the simulator's own counters (/sim/load, requests per wall-clock second): the
peak requests/s at the cloud after the return, the requests of the first minute after it, the
429s answered; and from the nodes: the time from the return until every node's LIST of
EndpointSlices holds the changed slice (polled on each node's own port).

Environment (defaults for the full run):
  FLEET_N=200             grid-wrappers
  FLEET_RUNS=3            runs of each configuration (medians with spread: scripts/medians.py)
  FLEET_OUTAGE=30         seconds the cloud is away
  FLEET_AFTER=60          seconds observed after the return (the "first minute"); a node not
                          current by FLEET_CONVERGE_LIMIT (default 120) counts as that limit
  FLEET_CONFIGS=direct,direct-throttled,relay,relay-throttled
  FLEET_MAX_PER_SECOND=100  the throttled cloud's limit of requests per second (0: none)
  FLEET_MAX_IN_FLIGHT=0   its limit of short requests in flight (0: none; the simulator answers
                          so fast that concurrency alone rarely builds up at these sizes)
  FLEET_RETRY_AFTER=2     its Retry-After, seconds
  FLEET_SIM_ARGS="--fixture demo"  the cloud's objects (e.g. "--fixture scale" for scale S;
                          the N fleet Nodes are added to them)
  FLEET_OUT=out/fleetbench.md, FLEET_PNG=out/fleetbench.png
  GW_BIN (grid-wrapper to measure), BIN_DIR (where grid-wrapper-sim is; default target/release)
The plot is written with python's zlib alone (no plotting library): the cloud's requests per
second over time, the median over the runs, one line per configuration.
"""
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib

ENV = os.environ
N = int(ENV.get("FLEET_N", "200"))
RUNS = int(ENV.get("FLEET_RUNS", "3"))
OUTAGE = int(ENV.get("FLEET_OUTAGE", "30"))
AFTER = int(ENV.get("FLEET_AFTER", "60"))
CONVERGE_LIMIT = int(ENV.get("FLEET_CONVERGE_LIMIT", "120"))
CONFIGS = [c for c in ENV.get(
    "FLEET_CONFIGS", "direct,direct-throttled,relay,relay-throttled").split(",") if c]
MAX_IN_FLIGHT = int(ENV.get("FLEET_MAX_IN_FLIGHT", "0"))
MAX_PER_SECOND = int(ENV.get("FLEET_MAX_PER_SECOND", "100"))
RETRY_AFTER = int(ENV.get("FLEET_RETRY_AFTER", "2"))
OUT = ENV.get("FLEET_OUT", "out/fleetbench.md")
PNG = ENV.get("FLEET_PNG", "out/fleetbench.png")
SIM_ARGS = ENV.get("FLEET_SIM_ARGS", "--fixture demo").split()
BIN_DIR = ENV.get("BIN_DIR", "target/release")
GW_BIN = ENV.get("GW_BIN", os.path.join(BIN_DIR, "grid-wrapper"))
SIM_BIN = os.path.join(BIN_DIR, "grid-wrapper-sim")
READY_LIMIT = max(60, N)  # seconds for the whole fleet to become ready
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROCS = []


def log(msg):
    print(f"fleetbench: {msg}", file=sys.stderr, flush=True)


def kill_all():
    for p in PROCS:
        if p.poll() is None:
            p.kill()
    for p in PROCS:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    PROCS.clear()


def on_signal(signum, _frame):
    kill_all()
    sys.exit(128 + signum)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port, method, path, body=None, timeout=5.0):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data else {}
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def control(port, what, body=None):
    code, data = request(port, "POST" if body is not None else "GET", f"/sim/{what}", body, 30)
    if code >= 300:
        raise RuntimeError(f"/sim/{what}: {code} {data[:200]!r}")
    return json.loads(data or b"null")


def spawn(args, logfile):
    with open(logfile, "wb") as out:
        p = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    PROCS.append(p)
    return p


def wait_until(what, limit, cond, every=0.2):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(every)
    raise RuntimeError(f"{what}: not within {limit} s")


def start_sim(tmp):
    cloud, ctl = free_port(), free_port()
    logfile = os.path.join(tmp, "sim.log")
    spawn([SIM_BIN, "--listen", f"127.0.0.1:{cloud}", "--listen", f"127.0.0.1:{ctl}",
           *SIM_ARGS], logfile)

    def up():
        try:
            return request(ctl, "GET", "/sim/state", timeout=1)[0] == 200
        except OSError:
            return False
    wait_until("the simulator", 30, up)
    nodes = [{
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": f"fleet-{i:03d}",
                     "labels": {"topology.kubernetes.io/zone": f"zone-{i % 3}"}},
        "status": {"addresses": [{"type": "InternalIP", "address": f"10.77.{i // 250}.{i % 250 + 1}"}]},
    } for i in range(N)]
    control(ctl, "apply", nodes)
    return cloud, ctl


def make_pki(tmp):
    pki = os.path.join(tmp, "pki")
    subprocess.run(["bash", os.path.join(ROOT, "deploy/relay/make-certs.sh"), pki, "fleetbench",
                    "127.0.0.1"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return pki


def healthy(port):
    try:
        return request(port, "GET", "/readyz", timeout=2)[0] == 200
    except OSError:
        return False


class Node:
    def __init__(self, i, port, health):
        self.name, self.port, self.health = f"fleet-{i:03d}", port, health
        self.current_at = None


def start_fleet(tmp, cloud, relay_port, pki):
    nodes = []
    extra = []
    if relay_port:
        kc = os.path.join(tmp, "relay.kubeconfig")
        with open(kc, "w") as f:
            f.write(
                "apiVersion: v1\nkind: Config\ncurrent-context: relays\n"
                "contexts:\n- name: relays\n  context:\n    cluster: relays\n    user: follower\n"
                f"clusters:\n- name: relays\n  cluster:\n    server: https://127.0.0.1:{relay_port}\n"
                f"    certificate-authority: {pki}/site-ca.crt\n"
                f"users:\n- name: follower\n  user:\n    client-certificate: {pki}/follower.crt\n"
                f"    client-key: {pki}/follower.key\n")
        extra = [f"--relay-kubeconfig={kc}", f"--relay-servers=https://127.0.0.1:{relay_port}"]
    for i in range(N):
        node = Node(i, free_port(), free_port())
        spawn([GW_BIN, f"--master=http://127.0.0.1:{cloud}", f"--hostname={node.name}",
               f"--bind-address=127.0.0.1:{node.port}",
               f"--metrics-bind-address=127.0.0.1:{node.health}", *extra],
              os.path.join(tmp, f"{node.name}.log"))
        nodes.append(node)
    pending = list(nodes)
    deadline = time.monotonic() + READY_LIMIT
    while pending and time.monotonic() < deadline:
        pending = [n for n in pending if not healthy(n.health)]
        if pending:
            time.sleep(0.5)
    if pending:
        raise RuntimeError(f"{len(pending)} of {N} grid-wrappers not ready in {READY_LIMIT} s")
    return nodes


def start_relay(tmp, cloud, pki):
    port, api, health = free_port(), free_port(), free_port()
    # A follower holds about six connections, so N followers need more than the default budget
    # (1,024) once N passes about 170; and here every follower comes from 127.0.0.1, where on a
    # site each has its own address: the per-source limit gets the same room, and the per-source
    # connection rate is off (N followers from one address are not one source reconnecting).
    budget = str(max(1024, 8 * N))
    spawn([GW_BIN, f"--master=http://127.0.0.1:{cloud}", "--hostname=fleet-000",
           f"--bind-address=127.0.0.1:{api}", f"--metrics-bind-address=127.0.0.1:{health}",
           f"--relay-bind-address=127.0.0.1:{port}", f"--relay-cert-file={pki}/relay.crt",
           f"--relay-key-file={pki}/relay.key", f"--relay-client-ca-file={pki}/site-ca.crt",
           f"--relay-max-connections={budget}", f"--relay-max-connections-per-source={budget}",
           "--relay-connection-rate-per-source=0"],
          os.path.join(tmp, "relay.log"))
    wait_until("the relay", 60, lambda: healthy(health))
    return port


def marked(node, mark):
    path = ("/apis/discovery.k8s.io/v1/endpointslices?labelSelector=fleetbench-mark%3D" + mark)
    try:
        code, body = request(node.port, "GET", path, timeout=3)
        return code == 200 and len(json.loads(body).get("items") or []) > 0
    except (OSError, ValueError):
        return False


def poll_nodes(nodes, mark, t_return, limit):
    """Each node's time (from the return) until it serves the marked slice; bounded."""
    lock = threading.Lock()
    todo = list(nodes)

    def worker():
        while time.monotonic() < t_return + limit:
            with lock:
                if not todo:
                    return
                node = todo.pop(0)
            if marked(node, mark):
                node.current_at = max(0.0, time.monotonic() - t_return)
            else:
                with lock:
                    todo.append(node)
                time.sleep(0.2)
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(min(16, len(nodes)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=limit + 30)


def one_run(config, run, tmp_root):
    tmp = tempfile.mkdtemp(prefix=f"{config}-{run}-", dir=tmp_root)
    relay = config.startswith("relay")
    throttled = config.endswith("throttled")
    try:
        cloud, ctl = start_sim(tmp)
        pki = make_pki(tmp) if relay else None
        relay_port = start_relay(tmp, cloud, pki) if relay else None
        t0 = time.monotonic()
        nodes = start_fleet(tmp, cloud, relay_port, pki)
        log(f"{config} run {run}: {N} nodes ready in {time.monotonic() - t0:.1f} s")
        time.sleep(5)  # steady state before the outage
        # The slice to change, read before the outage (a read at the cloud the bench makes).
        slices = json.loads(request(ctl, "GET", "/apis/discovery.k8s.io/v1/endpointslices")[1])
        slice_ = dict(slices["items"][0], kind="EndpointSlice", apiVersion="discovery.k8s.io/v1")
        unix_refuse = time.time()
        control(ctl, "refuse", {"seconds": OUTAGE, "listen": f"127.0.0.1:{cloud}"})
        t_refuse = time.monotonic()
        time.sleep(min(2, OUTAGE / 3))
        mark = f"m{int(unix_refuse)}"
        slice_["metadata"].setdefault("labels", {})["fleetbench-mark"] = mark
        slice_["metadata"].pop("resourceVersion", None)
        control(ctl, "apply", slice_)
        if throttled:
            control(ctl, "load", {"maxInFlight": MAX_IN_FLIGHT or None,
                                  "maxPerSecond": MAX_PER_SECOND or None,
                                  "retryAfter": RETRY_AFTER})
        t_return = t_refuse + OUTAGE
        time.sleep(max(0.0, t_return - time.monotonic()))
        poll_nodes(nodes, mark, t_return, CONVERGE_LIMIT)
        time.sleep(max(0.0, t_return + AFTER + 1 - time.monotonic()))
        load = control(ctl, "load")
    finally:
        kill_all()
    unix_return = unix_refuse + OUTAGE
    # Seconds of the simulator's wall clock, numbered from the outage's start.
    series = {int(r[0] - int(unix_refuse)): (r[1], r[2]) for r in load["perSecond"]}
    back = int(unix_return) - int(unix_refuse)
    first_minute = [series.get(s, (0, 0)) for s in range(back, back + AFTER)]
    current = [n.current_at for n in nodes if n.current_at is not None]
    result = {
        "config": config, "run": run, "n": N,
        "peak": max((r for r, _ in first_minute), default=0),
        "first_minute": sum(r for r, _ in first_minute),
        "throttled": sum(t for _, t in first_minute),
        "all_current": max(current) if len(current) == N else float(CONVERGE_LIMIT),
        "current": len(current),
        "median_current": statistics.median(current) if current else float(CONVERGE_LIMIT),
        "series": {str(k): v[0] for k, v in series.items()},
        "unix_return": unix_return,
    }
    shutil.rmtree(tmp, ignore_errors=True)
    return result


def table(results, run):
    lines = [
        f"### Fleet: N = {N}, outage {OUTAGE} s (run {run})", "",
        "| configuration | peak req/s at the cloud after the return | requests, first "
        f"{AFTER} s after the return | 429s answered in it | every node current after | "
        "median node current after | nodes current |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['config']} | {r['peak']} | {r['first_minute']} | {r['throttled']} | "
            f"{r['all_current']:.1f} s | {r['median_current']:.1f} s | {r['current']} |")
    return "\n".join(lines) + "\n"


# --- PNG without a plotting library -------------------------------------------------------
FONT = {  # 3x5 glyphs, rows top to bottom, 3 bits each
    "0": "75557", "1": "26227", "2": "71747", "3": "71717", "4": "55711", "5": "74717",
    "6": "74757", "7": "71111", "8": "75757", "9": "75717", "-": "00700", " ": "00000",
    "a": "03553", "c": "03443", "d": "13553", "e": "07563", "f": "34644", "i": "20222",
    "l": "22222", "o": "02552", "q": "03531", "r": "06544", "s": "03636", "t": "27223",
    "h": "44755", "u": "05553", "y": "05531", "/": "11244", "+": "02720", "n": "06555",
    "m": "07775", "w": "05577", "g": "03536", "(": "12221", ")": "42224", ":": "02020",
    ".": "00002", "=": "07070", ",": "00024", "p": "06564", "b": "44757", "k": "45655", "x": "05255", "v": "05552",
}
COLORS = [(31, 119, 180), (214, 39, 40), (44, 160, 44), (148, 103, 189), (255, 127, 14)]


class Canvas:
    def __init__(self, w, h):
        self.w, self.h = w, h
        self.px = bytearray(b"\xff" * (w * h * 3))

    def dot(self, x, y, c):
        if 0 <= x < self.w and 0 <= y < self.h:
            i = (y * self.w + x) * 3
            self.px[i:i + 3] = bytes(c)

    def rect(self, x0, y0, x1, y1, c):
        for y in range(max(0, y0), min(self.h, y1)):
            for x in range(max(0, x0), min(self.w, x1)):
                self.dot(x, y, c)

    def line(self, x0, y0, x1, y1, c, width=2):
        steps = max(abs(x1 - x0), abs(y1 - y0), 1)
        for s in range(steps + 1):
            x = round(x0 + (x1 - x0) * s / steps)
            y = round(y0 + (y1 - y0) * s / steps)
            self.rect(x, y, x + width, y + width, c)

    def text(self, x, y, s, c=(0, 0, 0), scale=2):
        for ch in s.lower():
            rows = FONT.get(ch, FONT[" "])
            for r, bits in enumerate(rows):
                v = int(bits, 16)
                for b in range(3):
                    if v & (4 >> b):
                        self.rect(x + b * scale, y + r * scale, x + (b + 1) * scale,
                                  y + (r + 1) * scale, c)
            x += 4 * scale

    def png(self, path):
        raw = b"".join(b"\x00" + bytes(self.px[y * self.w * 3:(y + 1) * self.w * 3])
                       for y in range(self.h))

        def chunk(kind, data):
            return (struct.pack(">I", len(data)) + kind + data
                    + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
        with open(path, "wb") as f:
            f.write(b"\x89PNG\r\n\x1a\n")
            f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0)))
            f.write(chunk(b"IDAT", zlib.compress(raw, 9)))
            f.write(chunk(b"IEND", b""))


def plot(by_config, path):
    """The cloud's requests per second against seconds from the outage's start: per
    configuration, the median over its runs of each second."""
    t_from, t_to = -5, OUTAGE + AFTER
    lines = {}
    for config, runs in by_config.items():
        lines[config] = [statistics.median(r["series"].get(str(t), 0) for r in runs)
                         for t in range(t_from, t_to)]
    top = max([max(v) for v in lines.values()] + [1])
    step = 10 ** max(0, len(str(int(top))) - 1)
    top = (int(top // step) + 1) * step
    w, h, left, right, up, down = 900, 460, 70, 20, 50, 50
    cv = Canvas(w, h)
    pw, ph = w - left - right, h - up - down

    def xy(t, v):
        return (left + round((t - t_from) * pw / (t_to - t_from - 1)),
                up + ph - round(v * ph / top))
    x_out0, _ = xy(0, 0)
    x_out1, _ = xy(OUTAGE, 0)
    cv.rect(x_out0, up, x_out1, up + ph, (230, 230, 230))
    cv.text(x_out0 + 6, up + 6, "cloud away", (120, 120, 120))
    cv.line(left, up, left, up + ph, (0, 0, 0), 1)
    cv.line(left, up + ph, left + pw, up + ph, (0, 0, 0), 1)
    for k in range(0, 6):
        v = top * k / 5
        _, y = xy(t_from, v)
        cv.line(left - 5, y, left, y, (0, 0, 0), 1)
        cv.text(4, y - 5, f"{int(v)}")
    for t in range(0, t_to, 10):
        x, _ = xy(t, 0)
        cv.line(x, up + ph, x, up + ph + 5, (0, 0, 0), 1)
        cv.text(x - 8, up + ph + 10, f"{t}")
    cv.text(left, h - 18, "seconds from the start of the outage")
    cv.text(left, 8, f"requests/s at the cloud, n = {N}, median of {RUNS} run(s)")
    lx = left + pw - 260
    for i, (config, ys) in enumerate(lines.items()):
        c = COLORS[i % len(COLORS)]
        pts = [xy(t_from + j, v) for j, v in enumerate(ys)]
        for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
            cv.line(x0, y0, x1, y1, c)
        cv.rect(lx, up + 8 + i * 16, lx + 12, up + 18 + i * 16, c)
        cv.text(lx + 18, up + 8 + i * 16, config.replace("-", "+"))
    cv.png(path)


def main():
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    for b in (GW_BIN, SIM_BIN):
        if not os.access(b, os.X_OK):
            sys.exit(f"fleetbench: {b} is not built")
    os.makedirs(os.path.dirname(OUT) or ".", exist_ok=True)
    tmp_root = tempfile.mkdtemp(prefix="fleetbench-")
    by_config = {c: [] for c in CONFIGS}
    run_files = []
    try:
        for run in range(1, RUNS + 1):
            results = []
            for config in CONFIGS:
                log(f"run {run} of {RUNS}: {config}, N = {N}, outage {OUTAGE} s")
                r = one_run(config, run, tmp_root)
                log(f"  peak {r['peak']} req/s, first minute {r['first_minute']} requests, "
                    f"{r['throttled']} 429s, every node current after {r['all_current']:.1f} s "
                    f"({r['current']}/{N})")
                results.append(r)
                by_config[config].append(r)
            name = OUT.replace(".md", f"-{run}.md")
            with open(name, "w") as f:
                f.write(table(results, run))
            with open(OUT.replace(".md", f"-{run}.json"), "w") as f:
                json.dump(results, f)
            run_files.append(name)
    finally:
        kill_all()
        shutil.rmtree(tmp_root, ignore_errors=True)
    if len(run_files) > 1:
        medians = subprocess.run([sys.executable, os.path.join(ROOT, "scripts/medians.py"),
                                  *run_files], check=True, capture_output=True, text=True).stdout
    else:
        with open(run_files[0]) as f:
            medians = f.read()
    plot(by_config, PNG)
    with open(OUT, "w") as f:
        what = f"medians of {RUNS} runs, spread min–max" if RUNS > 1 else "one run"
        f.write(medians.replace("(run 1)", f"({what})"))
        f.write(f"\nConfigurations: direct = every node reads the cloud; relay = one site relay "
                f"reads it and the nodes follow the relay; throttled = the cloud answers 429 + "
                f"Retry-After: {RETRY_AFTER} past {MAX_PER_SECOND or 'no limit of'} requests in a "
                f"second or {MAX_IN_FLIGHT or 'no limit of'} short requests in flight, from the "
                f"outage on. Plot: {PNG}. grid-wrapper: {GW_BIN}.\n")
    print(open(OUT).read())
    log(f"table in {OUT}, plot in {PNG}")


if __name__ == "__main__":
    main()
