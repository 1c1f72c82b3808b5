#!/usr/bin/env python3
"""A full sync of grid-wrapper from the simulator's scale fixture, from a protobuf upstream (the
simulator's default) and from a JSON one (`--no-protobuf`), alternated run by run: the time
from grid-wrapper's spawn to `/readyz` 200, grid-wrapper's CPU (utime+stime) and RSS at that
moment, and the LIST bytes the simulator wrote (`/sim/state` served.listBytes, gzip'd as sent,
and listPlainBytes). Prints each run, then the median, min and max of each figure.

  python3 scripts/formatbench.py BIN_DIR [flat|real] [RUNS] [S|x10]

BIN_DIR holds grid-wrapper and grid-wrapper-sim (e.g. target/release)."""
import json, os, subprocess, sys, time, urllib.request, statistics, socket
BIN = sys.argv[1]
SHAPE = sys.argv[2] if len(sys.argv) > 2 else "flat"
RUNS = int(sys.argv[3]) if len(sys.argv) > 3 else 3
SCALE = sys.argv[4] if len(sys.argv) > 4 else "S"
SIZES = {"S": [], "x10": ["--nodes", "5000", "--services", "20000"]}[SCALE]
TCK = os.sysconf("SC_CLK_TCK")

def free():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def get(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status, r.read()
    except Exception:
        return None, b""

def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TCK

def run(mode):
    sp, mp, gp = free(), free(), free()
    args = [f"{BIN}/grid-wrapper-sim", "--fixture", "scale", "--shape", SHAPE, *SIZES, "--listen", f"127.0.0.1:{sp}"]
    if mode == "json":
        args.append("--no-protobuf")
    sim = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while get(f"http://127.0.0.1:{sp}/readyz")[0] != 200:
        time.sleep(0.05)
        if sim.poll() is not None:
            sys.exit(f"the simulator exited: {sim.returncode}")
    t0 = time.monotonic()
    gw = subprocess.Popen([f"{BIN}/grid-wrapper", f"--master=http://127.0.0.1:{sp}", "--hostname=node-00000",
                           f"--bind-address=127.0.0.1:{gp}", f"--metrics-bind-address=127.0.0.1:{mp}"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while get(f"http://127.0.0.1:{mp}/readyz")[0] != 200:
        time.sleep(0.01)
    took = time.monotonic() - t0
    c = cpu(gw.pid)
    rss = int([l for l in open(f"/proc/{gw.pid}/status") if l.startswith("VmRSS")][0].split()[1]) / 1024
    st = json.loads(get(f"http://127.0.0.1:{sp}/sim/state")[1])
    served = st["served"]
    gw.kill(); sim.kill(); gw.wait(); sim.wait()
    return took, c, rss, served["listBytes"], served["listPlainBytes"]

res = {"protobuf": [], "json": []}
for i in range(RUNS):
    for mode in (["protobuf", "json"] if i % 2 == 0 else ["json", "protobuf"]):
        r = run(mode)
        res[mode].append(r)
        print(mode, "sync %.2f s, cpu %.2f s, rss %.1f MiB, list bytes %d (plain %d)" % r, flush=True)
for mode, rs in res.items():
    for i, name in enumerate(["sync s", "cpu s", "rss MiB"]):
        v = [r[i] for r in rs]
        print(f"{mode:9} {name:8} median {statistics.median(v):.2f}  min {min(v):.2f}  max {max(v):.2f}")
    print(f"{mode:9} list bytes as sent {rs[0][3]}, plain {rs[0][4]}")
