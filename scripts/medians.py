#!/usr/bin/env python3
"""Folds the markdown tables of several runs of one bench into one table of medians.

    python3 scripts/medians.py [--keep N] run1.md run2.md run3.md > medians.md

Every run must print the same tables (same rows, same columns). A cell whose figures differ
between runs is written with each figure replaced by its median over the runs and its spread
(min–max): `21.4 MiB (20.9 MiB–22.0 MiB)`; durations may be written in another unit than the
runs used (µs, ms, s), sizes keep theirs. Text outside tables is taken from the
first run. `--keep N` keeps only each table's first N columns (the loadbench tables' last
column is a long detail). Used to write BENCHMARKS.md from `make loadbench` / `make snapbench` runs.
"""
import re
import statistics
import sys

NUM = re.compile(r"(-?\d[\d,]*(?:\.\d+)?)(?:\s?(ns|µs|ms|s|KiB|MiB|GiB)\b)?")
TIME = {"ns": 1e-9, "µs": 1e-6, "ms": 1e-3, "s": 1.0}
SIZE = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def tokens(cell):
    """The cell's figures: (value in base units, unit class, the number's text, its unit)."""
    out = []
    for m in NUM.finditer(cell):
        num, unit = m.group(1), m.group(2) or ""
        value = float(num.replace(",", ""))
        if unit in TIME:
            out.append((value * TIME[unit], "time", num, unit))
        elif unit in SIZE:
            out.append((value * SIZE[unit], "size", num, unit))
        else:
            out.append((value, "", num, unit))
    return out


def shape(cell):
    return NUM.sub(lambda m: "#" + ("t" if m.group(2) in TIME else m.group(2) or ""), cell)


def decimals(text):
    return len(text.split(".")[1]) if "." in text else 0


def write(value, kind, like, unit):
    """`value` (base units) as a figure like `like` `unit` was written."""
    if kind == "time":
        for u, scale, places in (("s", 1.0, 2), ("ms", 1e-3, 2), ("µs", 1e-6, 1), ("ns", 1e-9, 0)):
            if value >= scale or u == "ns":
                return f"{value / scale:.{places}f} {u}"
    if kind == "size":
        value /= SIZE[unit]
    text = f"{value:,.{decimals(like)}f}" if "," in like else f"{value:.{decimals(like)}f}"
    return text + (" " + unit if unit else "")


def fold(cells):
    first = cells[0]
    if len({shape(c) for c in cells}) != 1:
        return first + " (runs differ: " + " / ".join(c.strip() for c in cells[1:]) + ")"
    per_run = [tokens(c) for c in cells]
    if all([t[0] for t in p] == [t[0] for t in per_run[0]] for p in per_run):
        return first
    out, pos = [], 0
    for i, m in enumerate(NUM.finditer(first)):
        out.append(first[pos:m.start()])
        _, kind, like, unit = per_run[0][i]
        values = [p[i][0] for p in per_run]
        out.append(write(statistics.median(values), kind, like, unit))
        if min(values) != max(values):
            lo, hi = write(min(values), kind, like, unit), write(max(values), kind, like, unit)
            out.append(f" ({lo}–{hi})")
        pos = m.end()
    out.append(first[pos:])
    return "".join(out)


def cells(line):
    return line.strip().strip("|").split("|")


def key(line):
    """A table row's name: its first cell, and the second too when the first is a short row id
    (the loadbench tables' `#` column, `F1`, a scale such as `S`), never a figure that varies
    between runs."""
    c = cells(line)
    short_id = len(c) > 2 and len(c[0].strip()) <= 3
    return tuple(c[:2]) if short_id else tuple(c[:1])


def main(paths, keep=None):
    runs = [open(p, encoding="utf-8").read().splitlines() for p in paths]
    by_key = [{key(l): l for l in r if l.startswith("|")} for r in runs]
    print(f"<!-- medians of {len(runs)} runs: {' '.join(paths)} -->")
    for first in runs[0]:
        if not first.startswith("|"):
            print(first)
            continue
        if set(first) <= set("|-: "):
            print(first)  # a header's separator: every table has its own
            continue
        lines = [k[key(first)] for k in by_key if key(first) in k]
        cols = [cells(l) for l in lines]
        width = len(cols[0]) if keep is None else min(keep, len(cols[0]))
        if set(first) <= set("|-: ") or len({len(c) for c in cols}) != 1:
            print("|" + "|".join(cols[0][:width]) + "|")
            continue
        row = [fold([c[i] for c in cols]) for i in range(width)]
        if len(lines) < len(runs):
            row[-1] += f" (a row of {len(lines)} of the {len(runs)} runs)"
        print("|" + "|".join(row) + "|")
    # Rows the first run does not have (a ramp that went one step further elsewhere).
    seen = {key(l) for l in runs[0] if l.startswith("|")}
    for i, k in enumerate(by_key[1:], start=2):
        for name, line in k.items():
            if name not in seen:
                seen.add(name)
                print(f"|{'|'.join(cells(line)[:keep] if keep else cells(line))}| (run {i} only)")


if __name__ == "__main__":
    args = sys.argv[1:]
    keep = None
    if args[:1] == ["--keep"] and len(args) > 1:
        keep, args = int(args[1]), args[2:]
    if len(args) < 2:
        sys.exit(__doc__)
    main(args, keep)
