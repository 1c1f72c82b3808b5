#!/usr/bin/env python3
"""A flood of the relay port, the hostile LAN of docs/SEMANTICS.md §12.1 (tests/it/relay_hostile.rs
and scripts/relayflood.sh use it), on loopback only.

  relayflood.py flood HOST PORT SOURCES PER SECS HEX REOPEN
      SOURCES x PER sockets to HOST:PORT, source i bound to 127.0.0.(2+i); each sends the bytes
      HEX once connected (none: it stays silent) and, with REOPEN=1, is opened again from the same
      source as soon as the server closes it (at most 100 times the first round in all). Prints
      "opened N" once the first round is connected, and its totals as JSON when SECS are over,
      on SIGTERM or when its stdin closes.

  relayflood.py probe HOST PORT SECS PATH
      GETs PATH on a fresh connection to HOST:PORT every 20 ms for SECS; prints one JSON line:
      the count, failures, p50, p99 and max in milliseconds.

  relayflood.py hello
      Prints the hex of a whole TLS ClientHello (what a real client sends first).

  relayflood.py bench --sim SIM --out OUT.md [--runs 3] [--secs 20] [--partial] LABEL=BIN...
      make relayflood: for each run and each binary in turn (alternated), a simulator, the binary
      as a relay in front of it (certificates by deploy/relay/make-certs.sh), the kube-proxy
      port's LIST latency probed for SECS without a flood, then for SECS during a flood of 24
      sources x 100 sockets sending a whole ClientHello (the start of one with --partial) and
      reopened as soon as closed; with each process's CPU over the flood window. Writes every
      run and the medians (with their min-max spread) to OUT.md and prints them.
"""
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time


def flood(host, port, sources, per, secs, payload, reopen):
    sel = selectors.DefaultSelector()
    n = {"opened": 0, "connected": 0, "failed": 0, "closed": 0}
    budget = 100 * sources * per
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))

    def start(src, first=False):
        # The first round connects one socket after the other, as fast as the server's listen
        # queue takes them; a reopened socket connects without waiting.
        if n["opened"] >= budget:
            return
        s = socket.socket()
        s.setblocking(first)
        s.bind((src, 0))
        try:
            s.connect((host, port))
        except BlockingIOError:
            pass
        except OSError:
            n["failed"] += 1
            s.close()
            return
        n["opened"] += 1
        s.setblocking(False)
        sel.register(s, selectors.EVENT_WRITE, src)

    def gone(s, src):
        sel.unregister(s)
        s.close()
        n["closed"] += 1
        if reopen:
            start(src)

    sel.register(sys.stdin, selectors.EVENT_READ, None)
    for i in range(sources):
        for _ in range(per):
            start("127.0.0.%d" % (2 + i), first=True)
    told = False
    t0 = time.monotonic()
    end = t0 + secs
    busy = 0.0
    while time.monotonic() < end and not stop["now"]:
        ready = sel.select(0.2)
        b = time.monotonic()
        for key, ev in ready:
            s, src = key.fileobj, key.data
            if src is None:
                stop["now"] = not sys.stdin.buffer.read1(4096)
                continue
            if ev & selectors.EVENT_WRITE:
                if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                    n["failed"] += 1
                    gone(s, src)
                    continue
                n["connected"] += 1
                try:
                    if payload:
                        s.send(payload)
                except OSError:
                    gone(s, src)
                    continue
                sel.modify(s, selectors.EVENT_READ, src)
            else:
                try:
                    d = s.recv(65536)
                except OSError:
                    d = b""
                if not d:
                    gone(s, src)
        busy += time.monotonic() - b
        if not told and n["connected"] + n["failed"] >= sources * per:
            told = True
            print("opened", n["connected"], flush=True)
    n["secs"] = round(time.monotonic() - t0, 2)
    # The share of the time the flood spent working rather than waiting for the server.
    n["busy"] = round(busy / max(n["secs"], 1e-9), 3)
    try:
        print(json.dumps(n), flush=True)
    except BrokenPipeError:
        pass  # whoever started it has gone


def probe(host, port, secs, path):
    took, failed = [], 0
    req = ("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (path, host)).encode()
    end = time.monotonic() + secs
    while time.monotonic() < end:
        t = time.monotonic()
        ok = False
        try:
            with socket.create_connection((host, port), timeout=20) as s:
                s.sendall(req)
                data = b""
                while True:
                    d = s.recv(65536)
                    if not d:
                        break
                    data += d
                ok = data.startswith(b"HTTP/1.1 200")
        except OSError:
            pass
        took.append((time.monotonic() - t) * 1000)
        failed += 0 if ok else 1
        time.sleep(0.02)
    took.sort()

    def q(p):
        return round(took[min(len(took) - 1, int(p * len(took)))], 2) if took else None

    print(json.dumps({"n": len(took), "failed": failed, "p50": q(0.5), "p99": q(0.99),
                      "max": round(took[-1], 2) if took else None}), flush=True)


def hello():
    import ssl
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    conn = ctx.wrap_bio(inc, out, server_hostname="relay")
    try:
        conn.do_handshake()
    except ssl.SSLWantReadError:
        pass
    print(out.read().hex())


def cpu_secs(pid):
    """User + system CPU seconds of a process so far (Linux /proc)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_line(f, word, secs):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        line = f.readline()
        if word in line:
            return line
        if not line:
            time.sleep(0.05)
    raise SystemExit("relayflood: no %r within %s s" % (word, secs))


def one_run(sim_bin, gw_bin, pki, secs, payload):
    """One relay under one flood: the probes' and the processes' figures."""
    procs = []
    try:
        sim = subprocess.Popen([sim_bin, "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
        procs.append(sim)
        url = wait_line(sim.stdout, "listening", 30).split()[-1]
        kp, health, relay = free_port(), free_port(), free_port()
        gw = subprocess.Popen([gw_bin, "--master=" + url, "--hostname=edge-a1",
                               "--bind-address=127.0.0.1:%d" % kp,
                               "--metrics-bind-address=127.0.0.1:%d" % health,
                               "--relay-bind-address=127.0.0.1:%d" % relay,
                               "--relay-cert-file=" + os.path.join(pki, "relay.crt"),
                               "--relay-key-file=" + os.path.join(pki, "relay.key"),
                               "--relay-client-ca-file=" + os.path.join(pki, "site-ca.crt")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(gw)
        end = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", health), timeout=2) as c:
                    c.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    if c.recv(64).startswith(b"HTTP/1.1 200"):
                        break
            except OSError:
                pass
            if time.monotonic() > end:
                raise SystemExit("relayflood: the relay never became ready")
            time.sleep(0.1)
        me = [sys.executable, os.path.abspath(__file__)]
        quiet = json.loads(subprocess.run(me + ["probe", "127.0.0.1", str(kp), str(secs),
                                                "/api/v1/services"],
                                          capture_output=True, text=True, check=True).stdout)
        flood_p = subprocess.Popen(me + ["flood", "127.0.0.1", str(relay), "24", "100",
                                         str(secs + 60), payload.hex(), "1"],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs.append(flood_p)
        wait_line(flood_p.stdout, "opened", 120)
        cpu0 = (cpu_secs(gw.pid), cpu_secs(flood_p.pid), time.monotonic())
        loud = json.loads(subprocess.run(me + ["probe", "127.0.0.1", str(kp), str(secs),
                                               "/api/v1/services"],
                                         capture_output=True, text=True, check=True).stdout)
        wall = time.monotonic() - cpu0[2]
        gw_cpu = (cpu_secs(gw.pid) - cpu0[0]) / wall
        flood_cpu = (cpu_secs(flood_p.pid) - cpu0[1]) / wall
        flood_p.stdin.close()
        totals = json.loads(flood_p.stdout.read().strip().splitlines()[-1])
        return {"quiet": quiet, "flood": loud, "gw_cpu": gw_cpu, "flood_cpu": flood_cpu,
                "connects_per_s": totals["connected"] / max(totals["secs"], 1e-9),
                "flood_busy": totals["busy"]}
    finally:
        for p in reversed(procs):
            p.kill()
            p.wait()


def bench(argv):
    import argparse
    import statistics
    import tempfile
    ap = argparse.ArgumentParser(prog="relayflood.py bench")
    ap.add_argument("--sim", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--secs", type=float, default=20)
    ap.add_argument("--partial", action="store_true")
    ap.add_argument("bins", nargs="+", metavar="LABEL=BIN")
    a = ap.parse_args(argv)
    bins = [b.split("=", 1) for b in a.bins]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    pki = tempfile.mkdtemp(prefix="relayflood-")
    subprocess.run(["bash", os.path.join(root, "deploy/relay/make-certs.sh"), pki, "bench",
                    "127.0.0.1"], check=True, capture_output=True)
    payload = bytes.fromhex("1603010200010001fc0303") if a.partial else bytes.fromhex(
        subprocess.run([sys.executable, os.path.abspath(__file__), "hello"], capture_output=True,
                       text=True, check=True).stdout.strip())
    rows = {label: [] for label, _ in bins}
    lines = ["# relayflood: the kube-proxy port's LIST latency during a reconnect flood of the "
             "relay port", "",
             "24 sources x 100 sockets, each sending %s and reopened as soon as closed; a LIST "
             "of services on a fresh connection every 20 ms for %g s, without then with the "
             "flood; CPU as a share of one core over the flood window." % (
                 "the start of a ClientHello" if a.partial else "a whole ClientHello", a.secs),
             "", "| binary | run | quiet p50 ms | flood p50 ms | flood p99 ms | flood max ms | "
             "failed/LISTs | relay CPU | flood CPU | flood connects/s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for run in range(1, a.runs + 1):
        for label, path in bins:
            print("relayflood: run %d of %d, %s" % (run, a.runs, label), file=sys.stderr)
            r = one_run(a.sim, path, pki, a.secs, payload)
            rows[label].append(r)
            f = r["flood"]
            lines.append("| %s | %d | %s | %s | %s | %s | %d/%d | %.0f %% | %.0f %% | %.0f |" % (
                label, run, r["quiet"]["p50"], f["p50"], f["p99"], f["max"], f["failed"], f["n"],
                100 * r["gw_cpu"], 100 * r["flood_cpu"], r["connects_per_s"]))
    lines += ["", "Medians of the runs (min-max):", "",
              "| binary | flood p50 ms | flood p99 ms | flood max ms | failed LISTs | "
              "relay CPU % | flood CPU % |", "|---|---|---|---|---|---|---|"]

    def med(vals):
        vals = [v for v in vals if v is not None]
        if not vals:
            return "-"
        return "%s (%s-%s)" % tuple(fmt(v) for v in (statistics.median(vals), min(vals),
                                                      max(vals)))

    def fmt(v):
        return "%.0f" % v if abs(v) >= 100 else "%.3g" % v

    for label, _ in bins:
        rs = rows[label]
        lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            label, med([r["flood"]["p50"] for r in rs]), med([r["flood"]["p99"] for r in rs]),
            med([r["flood"]["max"] for r in rs]), med([r["flood"]["failed"] for r in rs]),
            med([100 * r["gw_cpu"] for r in rs]), med([100 * r["flood_cpu"] for r in rs])))
    text = "\n".join(lines) + "\n"
    with open(a.out, "w") as f:
        f.write(text)
    print(text)


def main(argv):
    if argv[:1] == ["flood"] and len(argv) == 8:
        _, host, port, sources, per, secs, hexed, reopen = argv
        flood(host, int(port), int(sources), int(per), float(secs), bytes.fromhex(hexed),
              reopen == "1")
    elif argv[:1] == ["probe"] and len(argv) == 5:
        _, host, port, secs, path = argv
        probe(host, int(port), float(secs), path)
    elif argv == ["hello"]:
        hello()
    elif argv[:1] == ["bench"]:
        bench(argv[1:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
