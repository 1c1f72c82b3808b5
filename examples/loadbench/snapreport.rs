//! The one Markdown table of `loadbench --snapshot` (header: machine, date, load, setup; rows
//! 1–4 as in the `make snapbench` brief), plus notes on anything odd.

use std::fmt::Write as _;
use std::time::Duration;

use crate::snapshot::{SnapResults, Window, OFFLINE_MARKS};
use crate::stats::{bytes, dur, pct};

/// (median, min, max) of `v` (nearest-rank median); zeros when empty.
fn mmm(v: &[u64]) -> (u64, u64, u64) {
    let mut v = v.to_vec();
    let med = pct(&mut v, 50.0);
    (
        med,
        v.first().copied().unwrap_or(0),
        v.last().copied().unwrap_or(0),
    )
}

fn ms_f(ns: u64) -> String {
    format!("{:.1} ms", ns as f64 / 1e6)
}

fn kib(k: u64) -> String {
    format!("{:.1} MiB", k as f64 / 1024.0)
}

/// "median (min–max)" with `f` formatting each value.
fn med_spread(v: &[u64], f: impl Fn(u64) -> String) -> String {
    if v.is_empty() {
        return "n/a".into();
    }
    let (m, lo, hi) = mmm(v);
    format!("{} ({}–{})", f(m), f(lo), f(hi))
}

/// "median | min–max" cells with `f` formatting each value.
fn cells(v: &[u64], f: impl Fn(u64) -> String) -> String {
    if v.is_empty() {
        return "n/a | n/a".into();
    }
    let (m, lo, hi) = mmm(v);
    format!("{} | {}–{}", f(m), f(lo), f(hi))
}

fn lat_ns(w: &Window) -> Vec<u64> {
    w.lat.iter().map(|l| l.1).collect()
}

/// "p50 / p99 / max" of `v`.
fn p50_99_max(v: &[u64]) -> String {
    let mut v = v.to_vec();
    format!(
        "p50 {} / p99 {} / max {}",
        dur(pct(&mut v, 50.0)),
        dur(pct(&mut v, 99.0)),
        dur(pct(&mut v, 100.0))
    )
}

/// The spread of p50, p99 and max over the window's three thirds (in request order).
fn thirds(w: &Window) -> String {
    let v = lat_ns(w);
    let n = v.len() / 3;
    if n == 0 {
        return "n/a".into();
    }
    let parts: Vec<Vec<u64>> = (0..3).map(|i| v[i * n..(i + 1) * n].to_vec()).collect();
    let range = |p: f64| {
        let x: Vec<u64> = parts.iter().map(|c| pct(&mut c.clone(), p)).collect();
        let (lo, hi) = (x.iter().min().copied(), x.iter().max().copied());
        format!("{}–{}", dur(lo.unwrap_or(0)), dur(hi.unwrap_or(0)))
    };
    format!(
        "per third of the window: p50 {}, p99 {}, max {}",
        range(50.0),
        range(99.0),
        range(100.0)
    )
}

/// Latencies of the requests that overlapped a logged write ([at − write − lock, at]) and of
/// the others.
fn overlap(w: &Window) -> (Vec<u64>, Vec<u64>) {
    let spans: Vec<_> = w
        .logged
        .iter()
        .map(|l| {
            let len = Duration::from_micros((l.ms + 1) * 1000 + l.lock_us);
            (l.at.checked_sub(len).unwrap_or(l.at), l.at)
        })
        .collect();
    let (mut on, mut off) = (Vec::new(), Vec::new());
    for &(start, ns) in &w.lat {
        let end = start + Duration::from_nanos(ns);
        if spans.iter().any(|&(b, e)| start < e && end > b) {
            on.push(ns);
        } else {
            off.push(ns);
        }
    }
    (on, off)
}

fn window_row(out: &mut String, w: &Window, what: &str) {
    let v = lat_ns(w);
    let mut notes = format!(
        "{} LISTs back to back on one keep-alive connection (raw client, 4 MiB reused buffer) in {:.1} s; body {} ({} items); {} relabels sent; snapshot writes during the window (`/metrics` delta): {}; VmRSS after {}; spawn → `/readyz` {}",
        v.len(),
        w.elapsed.as_secs_f64(),
        bytes(w.body.0 as u64),
        w.body.1,
        w.churn.changes,
        w.writes,
        kib(w.rss_kib),
        ms_f(w.ready.as_nanos() as u64),
    );
    if w.cache {
        let (on, off) = overlap(w);
        let _ = write!(
            notes,
            "; LISTs overlapping a logged write: {} ({}), the others: {}",
            on.len(),
            if on.is_empty() {
                "n/a".into()
            } else {
                p50_99_max(&on)
            },
            p50_99_max(&off)
        );
    }
    if w.churn.errors > 0 {
        let _ = write!(
            notes,
            "; {} churn/metrics errors ({})",
            w.churn.errors,
            w.churn.first_error.as_deref().unwrap_or("?")
        );
    }
    let _ = writeln!(
        out,
        "| 3 | LIST latency, {what} | {} | {} | {} | {notes} |",
        p50_99_max(&v),
        thirds(w),
        v.len()
    );
}

/// Per-write CPU samples from consecutive readings one write apart: (ticks, schedstat ns).
fn per_write_cpu(w: &Window) -> (Vec<u64>, Vec<u64>) {
    let (mut ticks, mut sched) = (Vec::new(), Vec::new());
    for p in w.churn.cpu_at.windows(2) {
        let ((w0, c0), (w1, c1)) = (p[0], p[1]);
        if w1 == w0 + 1 {
            ticks.push(c1.ticks - c0.ticks);
            if let (Some(a), Some(b)) = (c0.sched_ns, c1.sched_ns) {
                sched.push(b - a);
            }
        }
    }
    (ticks, sched)
}

/// The table.
pub fn table(r: &SnapResults) -> String {
    let m = &r.machine;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## grid-wrapper snapshot bench (`--cache-dir`) — scale S\n"
    );
    let _ = writeln!(
        out,
        "Machine: {} CPUs, {}; Linux {}; {}; `{}`; load average (1/5/15 min) at the start {}, at the end {}.  ",
        m.nproc, m.cpu, m.kernel, m.date, m.version, r.loadavg.0, r.loadavg.1
    );
    let _ = writeln!(
        out,
        "Setup: `grid-wrapper-sim {}`; grid-wrapper `--hostname=node-00000 -v 2`, its `--cache-dir` {} ({}); churn: one relabel of a non-local node every {} ms (`/sim/label-node`), `/metrics` polled every 50 ms, in both windows; the window without `--cache-dir` runs first, then the one with `--cache-dir --cache-write-interval=0`. Medians are nearest-rank; whole run {:.0} s.\n",
        r.sim_args,
        r.cache_dir.0,
        r.cache_dir.1,
        r.churn_ms,
        r.wall.as_secs_f64()
    );
    let _ = writeln!(
        out,
        "| # | measure | median | spread (min–max) | n | notes |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    let w = &r.with;
    let fin = r.shutdown.final_write;

    // 1. Size.
    let mut sizes: Vec<u64> = w.logged.iter().map(|l| l.bytes).collect();
    sizes.extend(fin.map(|f| f.bytes));
    let objects = w.logged.first().map_or(0, |l| l.objects);
    let (size_med, _, _) = mmm(&sizes);
    let _ = writeln!(
        out,
        "| 1 | snapshot file size | {} | {} | {} writes | {objects} objects; the cached JSON (sum of the four upstream list bodies: nodes, services, endpoints, endpointslices) is {} ({} B, {} objects): the snapshot is {:.2}× that; `/metrics` snapshot bytes after the window {} B; file after SIGTERM {} B |",
        format_args!("{} ({size_med} B)", bytes(size_med)),
        {
            let (_, lo, hi) = mmm(&sizes);
            format!("{lo}–{hi} B")
        },
        sizes.len(),
        bytes(r.upstream_json.0),
        r.upstream_json.0,
        r.upstream_json.1,
        size_med as f64 / r.upstream_json.0.max(1) as f64,
        w.metrics.bytes,
        r.shutdown.file_bytes,
    );

    // 2. Write time, CPU, lock.
    let write_ms: Vec<u64> = w.logged.iter().map(|l| l.ms).collect();
    let _ = writeln!(
        out,
        "| 2 | snapshot write (encode + write + fsync), per debounced write | {} | {} | `-v 2` DEBUG lines (whole ms); `/metrics` last write duration {:.3} s |",
        cells(&write_ms, |x| format!("{x} ms")),
        write_ms.len(),
        w.metrics.last_write_s,
    );
    let (tick_s, sched_s) = per_write_cpu(w);
    let tck_ms = |t: u64| format!("{:.1} ms", t as f64 * 1000.0 / r.tck as f64);
    let agg = match w.cpu {
        Some((a, b, n)) if n > 0 => format!(
            "{:.1} ms ({} ticks / {n} writes)",
            (b.ticks - a.ticks) as f64 * 1000.0 / r.tck as f64 / n as f64,
            b.ticks - a.ticks
        ),
        _ => "n/a".into(),
    };
    let agg_exact = match w.cpu {
        Some((a, b, n)) if n > 0 => a
            .sched_ns
            .zip(b.sched_ns)
            .map_or("n/a".into(), |(x, y)| ms_f((y - x) / n)),
        _ => "n/a".into(),
    };
    let _ = writeln!(
        out,
        "| 2 | `snapshot-writer` CPU per write (utime+stime, `/proc/<pid>/task/<tid>/stat`) | {} | per-write samples: {} | {} | per write from schedstat (ns): {} (n {}); utime+stime over the window and settle time divided by its writes: {agg}, schedstat likewise {agg_exact}; CLK_TCK {} |",
        if tick_s.is_empty() { "n/a".into() } else { tck_ms(mmm(&tick_s).0) },
        if tick_s.is_empty() {
            "n/a".into()
        } else {
            let (_, lo, hi) = mmm(&tick_s);
            format!("{}–{}", tck_ms(lo), tck_ms(hi))
        },
        tick_s.len(),
        med_spread(&sched_s, ms_f),
        sched_s.len(),
        r.tck,
    );
    let lock_us: Vec<u64> = w.logged.iter().map(|l| l.lock_us).collect();
    let _ = writeln!(
        out,
        "| 2 | time taking the objects from the cache per write | {} | {} | from the same log lines (pointer copies: under the cache lock before the single writer, asked of the writer since) |",
        cells(&lock_us, |x| format!("{x} µs")),
        lock_us.len(),
    );
    let _ = writeln!(
        out,
        "| 2 | final snapshot on SIGTERM | {} | — | 1 | SIGTERM → exit {} (includes the loop's drain); taking the objects {} |",
        fin.map_or("not logged".into(), |f| format!("{} ms", f.ms)),
        ms_f(r.shutdown.to_exit.as_nanos() as u64),
        fin.map_or("n/a".into(), |f| format!("{} µs", f.lock_us)),
    );

    // 3. Serving latency.
    window_row(&mut out, &r.without, "WITHOUT `--cache-dir`");
    window_row(&mut out, w, "WITH `--cache-dir --cache-write-interval=0`");
    let (mx_without, mx_with) = (
        lat_ns(&r.without).into_iter().max().unwrap_or(0),
        lat_ns(w).into_iter().max().unwrap_or(0),
    );
    let (mut a, mut b) = (lat_ns(&r.without), lat_ns(w));
    let _ = writeln!(
        out,
        "| 3 | stall check: max LIST latency with / without | {} / {} | — | — | difference {}; p99 with / without {} / {} |",
        dur(mx_with),
        dur(mx_without),
        if mx_with >= mx_without {
            format!("+{}", dur(mx_with - mx_without))
        } else {
            format!("−{}", dur(mx_without - mx_with))
        },
        dur(pct(&mut b, 99.0)),
        dur(pct(&mut a, 99.0)),
    );

    // 4. Offline start.
    let firsts: Vec<u64> = r
        .offline
        .iter()
        .map(|o| o.first_list.as_nanos() as u64)
        .collect();
    let rss: Vec<u64> = r.offline.iter().map(|o| o.rss_kib).collect();
    let items: Vec<String> = r.offline.iter().map(|o| o.body.1.to_string()).collect();
    let since = |i: usize| {
        let v: Vec<u64> = r
            .offline
            .iter()
            .filter_map(|o| o.marks.get(i).copied().flatten())
            .map(|d| d.as_nanos() as u64)
            .collect();
        (v.len(), med_spread(&v, ms_f))
    };
    let restored = since(2).0;
    let marks: Vec<String> = OFFLINE_MARKS
        .iter()
        .enumerate()
        .map(|(i, m)| format!("\"{m}\" {}", since(i).1))
        .collect();
    let non200: usize = r.offline.iter().map(|o| o.non_200).sum();
    let _ = writeln!(
        out,
        "| 4 | start → first LIST 200 from the snapshot, upstream down | {} | {} | spawn with the same `--cache-dir`, `--master` (the killed simulator's URL) and `--hostname`; LIST polled every 2 ms on fresh connections; VmRSS right after: {}; items served {} (online: {}); {restored}/{} logged \"serving the snapshot\"; spawn → log lines (stderr, timestamped when the bench read them): {}; {non200} non-200 answers before the 200 |",
        cells(&firsts, ms_f),
        firsts.len(),
        med_spread(&rss, kib),
        items.join(", "),
        w.body.1,
        r.offline.len(),
        marks.join(", "),
    );
    out
}
