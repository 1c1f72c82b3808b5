#!/usr/bin/env python3
"""Function order for the edge binaries (make cross): the code a start and an idle minute run,
first and together, so that the kernel maps fewer text pages (it maps a file's pages in 64 KiB
windows around each fault: code spread over the whole 1.9 MB text made 1.6 MB of it resident).

  edge_order.py hot MAP CALLGRIND OUT
      MAP: lld's -Map of the traced binary; CALLGRIND: `valgrind --tool=callgrind --dump-instr=yes`
      output of it (start, sync with the demo cluster, idle); OUT: lld --symbol-ordering-file,
      one symbol per executed input section of .text, in address order.
  edge_order.py check MAP ORDER
      After the ordered link (MAP: its -Map): fails unless the ordered functions sit together at
      the start of .text (within twice their size), i.e. unless the order took effect.
  edge_order.py translate ORDER MAP OUT
      The same order for another target's build of the same code (MAP: its -Map): symbols are
      matched by name without their hashes (legacy `17h<hash>E`, v0 crate disambiguators).

Only reads the two files; stdlib only. A symbol it cannot place is left out (lld then keeps
that function where it was): a stale or partial order costs RSS, never correctness.
"""

import bisect
import re
import sys

# lld's map: VMA, LMA, size, align (widths 16, 16, 8, 5), then output section, input section
# (8 spaces deeper) or symbol (16 spaces deeper).
ROW = re.compile(r"^\s*([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+\d+ (.*)$")
INPUT = re.compile(r"^.*:\((\.text[^)]*)\)$")


def text_sections(path):
    """[(start, size, [symbols])] of the input sections of .text, in address order."""
    out, in_text = [], False
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = ROW.match(line.rstrip("\n"))
            if not m:
                continue
            addr, size, rest = int(m.group(1), 16), int(m.group(2), 16), m.group(3)
            indent = len(rest) - len(rest.lstrip(" "))
            name = rest.strip()
            if indent == 0:
                in_text = name == ".text"
            elif not in_text:
                continue
            elif indent <= 8:
                sec = INPUT.match(name)
                out.append([addr, size, [], sec.group(1) if sec else ""])
            elif out and name:
                out[-1][2].append(name)
    return [s for s in out if s[1] > 0]


def symbol_of(section):
    """A symbol that names the section for --symbol-ordering-file: the mangled name its section
    carries (`.text.<symbol>` or `.text.unlikely.<symbol>`, one section per function), else
    its first symbol (the map
    prints symbols demangled, which only C symbols survive unchanged)."""
    _, _, symbols, secname = section
    for prefix in (".text.unlikely.", ".text.hot.", ".text.startup.", ".text.exit.", ".text."):
        if secname.startswith(prefix) and len(secname) > len(prefix):
            return secname[len(prefix):]
    return symbols[0] if symbols else None


def executed(path):
    """Instruction addresses of a callgrind file written with --dump-instr=yes."""
    addrs = set()
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("0x"):
                addrs.add(int(line.split(None, 1)[0], 16))
            elif line.startswith(("calls=", "jump=", "jcnd=")):
                parts = line.split()
                if len(parts) > 1 and parts[1].startswith("0x"):
                    addrs.add(int(parts[1], 16))
    return addrs


def hot(map_path, cg_path, out_path):
    sections = text_sections(map_path)
    if not sections:
        sys.exit(f"edge_order: no .text input sections in {map_path}")
    starts = [s[0] for s in sections]
    lo, hi = starts[0], sections[-1][0] + sections[-1][1]
    addrs = executed(cg_path)

    # A static-pie runs at some load base; take the base that puts the most addresses in .text.
    def inside(base):
        return sum(1 for a in addrs if lo <= a - base < hi)

    base = max((0, 0x108000, 0x400000, 0x4000000, 0x555555554000), key=inside)
    hits = set()
    for a in addrs:
        a -= base
        if lo <= a < hi:
            i = bisect.bisect_right(starts, a) - 1
            if i >= 0 and a < sections[i][0] + sections[i][1]:
                hits.add(i)
    names, size = [], 0
    for i in sorted(hits):
        sym = symbol_of(sections[i])
        if sym:
            names.append(sym)
            size += sections[i][1]
    with open(out_path, "w", encoding="utf-8") as f:
        f.write("".join(n + "\n" for n in names))
    total = sum(s[1] for s in sections)
    print(
        f"edge_order: {len(addrs)} executed addresses (load base {base:#x}); "
        f"{len(names)} of {len(sections)} functions, {size} of {total} bytes of .text, "
        f"ordered first in {out_path}"
    )
    if not names:
        sys.exit("edge_order: nothing executed in .text: wrong map or trace")


def unhashed(sym):
    sym = re.sub(r"17h[0-9a-f]{16}E$", "E", sym)
    return re.sub(r"Cs[0-9A-Za-z]+_", "Cs_", sym)


def translate(order_path, map_path, out_path):
    by_key = {}
    for sec in text_sections(map_path):
        sym = symbol_of(sec)
        if sym:
            by_key.setdefault(unhashed(sym), sym)
    with open(order_path, encoding="utf-8") as f:
        wanted = [l.strip() for l in f if l.strip()]
    names = [by_key[k] for k in map(unhashed, wanted) if k in by_key]
    with open(out_path, "w", encoding="utf-8") as f:
        f.write("".join(n + "\n" for n in names))
    print(f"edge_order: {len(names)} of {len(wanted)} symbols placed in {out_path}")


def check(map_path, order_path):
    sections = text_sections(map_path)
    with open(order_path, encoding="utf-8") as f:
        wanted = {l.strip() for l in f if l.strip()}
    placed = [s for s in sections if symbol_of(s) in wanted]
    if not sections or not placed:
        sys.exit(f"edge_order: none of {order_path}'s functions in {map_path}")
    lo = sections[0][0]
    size = sum(s[1] for s in placed)
    end = max(s[0] + s[1] for s in placed) - lo
    print(
        f"edge_order: {len(placed)} ordered functions, {size} bytes, "
        f"within the first {end} bytes of .text"
    )
    if end > 2 * size + 4096:
        sys.exit("edge_order: the order did not take effect (ordered functions are spread out)")


def main(argv):
    if len(argv) == 5 and argv[1] == "hot":
        hot(argv[2], argv[3], argv[4])
    elif len(argv) == 4 and argv[1] == "check":
        check(argv[2], argv[3])
    elif len(argv) == 5 and argv[1] == "translate":
        translate(argv[2], argv[3], argv[4])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
