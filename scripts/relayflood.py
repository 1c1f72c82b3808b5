#!/usr/bin/env python3
"""A flood of the relay port, the hostile LAN of docs/SEMANTICS.md §12.1 (tests/relay_hostile.rs
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
"""
import json
import selectors
import signal
import socket
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
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
