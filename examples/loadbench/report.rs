//! The one Markdown table of the load bench (header: machine, date, setup; rows 1–5 as in the
//! `make loadbench` brief), plus notes on anything odd.

use std::fmt::Write as _;

use crate::phases::{Results, Round, KEEP_UP_P99};
use crate::stats::{bytes, dur};
use crate::ReadySample;

fn ms(ns: i64) -> String {
    format!("{:.1} ms", ns as f64 / 1e6)
}

fn median_i(v: &[i64]) -> i64 {
    let mut v = v.to_vec();
    v.sort_unstable();
    v.get(v.len().saturating_sub(1) / 2).copied().unwrap_or(0)
}

/// The detail text of one paced round.
pub fn round_detail(r: &Round, watchers: usize) -> String {
    let d = &r.delivery;
    let mut s = format!(
        "achieved {:.0}/s ({} changes, {} requests); delivered {}/{}; all-watcher lag p50 {} / p99 {}",
        r.run.achieved_rate(),
        d.changes,
        r.run.requests,
        d.delivered,
        d.changes * watchers,
        dur(d.all_pct(50.0)),
        dur(d.all_pct(99.0)),
    );
    let (early, late) = d.trend();
    let _ = write!(
        s,
        " (first/last tenth {} → {}); CPU % of a core over {:.1} s: wrapper {:.0} ({} per delivery), sim {:.0}, bench ({} watch client and driver) {:.0} ({} per delivery)",
        dur(early),
        dur(late),
        r.window.as_secs_f64(),
        100.0 * r.wrapper_cpu / r.window.as_secs_f64().max(1e-9),
        dur((r.wrapper_cpu * 1e9 / d.delivered.max(1) as f64) as u64),
        100.0 * r.sim_cpu / r.window.as_secs_f64().max(1e-9),
        match crate::watchers::client() {
            crate::watchers::ClientKind::Epoll => "epoll",
            crate::watchers::ClientKind::Threads => "thread-per-watch",
        },
        100.0 * r.self_cpu / r.window.as_secs_f64().max(1e-9),
        dur((r.self_cpu * 1e9 / d.delivered.max(1) as f64) as u64),
    );
    if d.complete < d.changes {
        let _ = write!(
            s,
            "; only {}/{} changes reached every watcher: {} deliveries missing when the drain wait ended, the last delivery came {} after the last apply",
            d.complete,
            d.changes,
            (d.changes * watchers) as u64 - d.delivered,
            ms(d.last_after_last_send)
        );
    }
    if d.ended > 0 {
        let _ = write!(
            s,
            "; {} watch(es) ended: {}",
            d.ended,
            d.end_reason.as_deref().unwrap_or("?")
        );
    }
    if r.too_slow > 0 {
        let _ = write!(s, "; wrapper logged {} 'too slow'", r.too_slow);
    }
    if r.run.errors > 0 {
        let _ = write!(
            s,
            "; {} apply errors ({})",
            r.run.errors,
            r.run.first_error.as_deref().unwrap_or("?")
        );
    }
    let u = &r.upstream;
    if u.complete < u.changes || u.ended > 0 {
        let _ = write!(
            s,
            "; a control watch directly on the sim got only {}/{} changes{}",
            u.complete,
            u.changes,
            u.end_reason
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        );
    }
    for w in &r.wrapper_warnings {
        let _ = write!(s, "; wrapper log: `{w}`");
    }
    if d.duplicates > 0 {
        let _ = write!(s, "; {} duplicate deliveries", d.duplicates);
    }
    s
}

fn verdict(r: &Round) -> String {
    match (r.kept_up(), r.source_bound()) {
        (true, false) => "kept up".into(),
        (true, true) => format!(
            "kept up, but the driver+sim reached only {:.0}/s",
            r.run.achieved_rate()
        ),
        (false, bound) => {
            let why = if !r.delivery.all_delivered() {
                "not every watcher got every change"
            } else if r.run.errors > 0 {
                "apply errors"
            } else {
                "p99 ≥ 1 s"
            };
            let tail = if bound {
                " (driver+sim also below target)"
            } else {
                ""
            };
            format!("**did not keep up**: {why}{tail}")
        }
    }
}

fn ready_rows(out: &mut String, first: &ReadySample, runs: &[ReadySample]) {
    let starts: Vec<i64> = runs.iter().map(|s| s.start_to_ready as i64).collect();
    let listed: Vec<i64> = runs.iter().filter_map(|s| s.listed_to_ready).collect();
    let cache: Vec<i64> = runs
        .iter()
        .filter_map(|s| s.listed_to_cache_ready)
        .collect();
    let list = |v: &[i64]| v.iter().map(|&x| ms(x)).collect::<Vec<_>>().join(", ");
    let _ = writeln!(
        out,
        "| 5 | start → `/readyz` 200 | median {} | {} fresh starts against the running sim: {}; first start (sim just started) {}; `/readyz` polled every 5 ms |",
        ms(median_i(&starts)),
        runs.len(),
        list(&starts),
        ms(first.start_to_ready as i64),
    );
    let first: Vec<i64> = runs
        .iter()
        .filter_map(|s| s.start_to_first_listed)
        .collect();
    let kinds: Vec<&str> = runs.iter().map(|s| s.last_listed_kind.as_str()).collect();
    let lines = runs.first().map_or(0, |s| s.listed_lines);
    let applied: Vec<String> = runs
        .iter()
        .map(|s| match s.last_applied {
            Some((off, held)) => format!("{off:.1} / {held:.1} ms"),
            None => "n/a".into(),
        })
        .collect();
    let _ = writeln!(
        out,
        "| 5 | last upstream `listed` log line → `/readyz` 200 | median {} | per start: {}; last `listed` → `cache ready` log line: {}; last list was {}; that list read and decoded on its reflector's thread (its items are prepared as they are read) / applied by the writer (its `applied in` log line): {}; spawn → first `listed` line: {}; {} `listed` lines per start (stderr read in a thread, timestamped on arrival) |",
        if listed.is_empty() { "n/a".into() } else { ms(median_i(&listed)) },
        list(&listed),
        list(&cache),
        kinds.join(", "),
        applied.join(", "),
        list(&first),
        lines,
    );
}

/// The table.
pub fn table(r: &Results) -> String {
    let m = &r.machine;
    let mut out = String::new();
    let _ = writeln!(out, "## grid-wrapper load bench — scale S\n");
    let _ = writeln!(
        out,
        "Machine: nproc {} · {} · Linux {} · {} · {} · sim `{}` · {} watchers · whole run {:.0} s\n",
        m.nproc,
        m.cpu,
        m.kernel,
        m.date,
        m.version,
        r.sim_args,
        r.watchers,
        r.wall.as_secs_f64()
    );
    let _ = writeln!(out, "| # | Measurement | Result | Detail |");
    let _ = writeln!(out, "|---|---|---|---|");

    let mem = &r.mem;
    let json = mem.json_bytes();
    let _ = writeln!(
        out,
        "| 1 | grid-wrapper RSS after sync | {} | VmRSS 1 s after `/readyz` 200; VmHWM then {}; after the four LISTs {}; after the watch phases {} (VmHWM {}) |",
        bytes(mem.rss_sync * 1024),
        bytes(mem.hwm_sync * 1024),
        bytes(mem.rss_after_lists * 1024),
        bytes(mem.rss_end * 1024),
        bytes(mem.hwm_end * 1024),
    );
    let _ = writeln!(
        out,
        "| 1 | RSS ÷ JSON after sync | {:.2}× | VmRSS 1 s after `/readyz` 200 ({}) ÷ cached JSON {} = {}; for scale, the simulator holding the same objects as `serde_json::Value`s: VmRSS {} |",
        mem.per_json(mem.rss_sync),
        bytes(mem.rss_sync * 1024),
        bytes(json),
        mem.json_parts(bytes),
        bytes(mem.sim_rss * 1024),
    );
    let (pb, pb_detail) = mem.proto_row(bytes);
    let _ = writeln!(
        out,
        "| 1 | RSS after sync + protobuf kube-proxy (lists + watches) | {pb} | {pb_detail} |"
    );
    let (up, up_detail) = mem.upstream_row(bytes);
    let _ = writeln!(
        out,
        "| 1 | RSS ÷ upstream JSON after sync | {up} | {up_detail} |"
    );
    let _ = writeln!(
        out,
        "| 1 | peak (VmHWM) ÷ JSON | {:.2}× | VmHWM at the end of the watch phases {} ÷ {}; at sync {:.2}× ({}) |",
        mem.per_json(mem.hwm_end),
        bytes(mem.hwm_end * 1024),
        bytes(json),
        mem.per_json(mem.hwm_sync),
        bytes(mem.hwm_sync * 1024),
    );
    let _ = writeln!(
        out,
        "| 1 | after churn ÷ JSON | {:.2}× | VmRSS {} after every watch phase (fan-out, the writer phase's relabels and relists, the ramp) ÷ {} |",
        mem.per_json(mem.rss_end),
        bytes(mem.rss_end * 1024),
        bytes(json),
    );
    if mem.rss_aged > 0 {
        let _ = writeln!(
            out,
            "| 1 | once the event-log window passed ÷ JSON | {:.2}× | VmRSS {} {:.0} s after the last change of the watch phases (the logs keep 75 s; the 100 watchers still connected, nothing changed since) ÷ {} |",
            mem.per_json(mem.rss_aged),
            bytes(mem.rss_aged * 1024),
            mem.aged_after.as_secs_f64(),
            bytes(json),
        );
    }

    crate::listbench::rows(&mut out, &r.list);

    let f = &r.fanout;
    let d = &f.delivery;
    let _ = writeln!(
        out,
        "| 3 | fan-out: upstream apply → received by all {} watchers, p50 / p99 | {} / {} | {} changes at {:.0}/s to slices of non-topology Services (annotation counter); {}; per-delivery p50 / p99 {} / {}; the upstream's own share: apply → received by a control watch directly on the simulator p50 / p99 {} / {} |",
        r.watchers,
        dur(d.all_pct(50.0)),
        dur(d.all_pct(99.0)),
        d.changes,
        f.rate,
        round_detail(f, r.watchers),
        dur(d.each_pct(50.0)),
        dur(d.each_pct(99.0)),
        dur(f.upstream.all_pct(50.0)),
        dur(f.upstream.all_pct(99.0)),
    );
    let mut own = crate::stats::own_share(d, &f.upstream);
    let _ = writeln!(
        out,
        "| 3 | fan-out: grid-wrapper's own share, p50 / p99 | {} / {} | per change ({} that every watcher and the control watch got): received by the last of the {} watchers − received by the control watch on the simulator (0 when the control was later); the source's own delivery is the row above's last figures |",
        dur(crate::stats::pct(&mut own, 50.0)),
        dur(crate::stats::pct(&mut own, 99.0)),
        own.len(),
        r.watchers,
    );
    let per_event = f.wrapper_cpu * 1e9 / d.delivered.max(1) as f64;
    let _ = writeln!(
        out,
        "| 3 | grid-wrapper CPU per delivered event | {} | utime+stime {:.2} s over {} delivered events ({:.1} µs per upstream change incl. its {} deliveries); window {:.1} s; on loopback the kernel bills the receiving side's TCP work to the sender's writev |",
        dur(per_event as u64),
        f.wrapper_cpu,
        d.delivered,
        f.wrapper_cpu * 1e6 / d.changes.max(1) as f64,
        r.watchers,
        f.window.as_secs_f64(),
    );

    let best = r
        .ramp
        .iter()
        .filter(|s| s.kept_up())
        .max_by(|a, b| a.run.achieved_rate().total_cmp(&b.run.achieved_rate()));
    let limit = r.ramp.iter().find(|s| !s.kept_up() || s.source_bound());
    let best_text = best.map_or_else(
        || "none of the steps".to_string(),
        |s| format!("{:.0}/s (achieved {:.0}/s)", s.rate, s.run.achieved_rate()),
    );
    let limit_text = match limit {
        Some(s) if !s.kept_up() => format!("first failing step {:.0}/s: {}", s.rate, verdict(s)),
        Some(s) => format!(
            "stopped at {:.0}/s: the driver+simulator reached only {:.0}/s (the source, not grid-wrapper, was the bottleneck)",
            s.rate,
            s.run.achieved_rate()
        ),
        None => "every step kept up (the ramp's top rate is a lower bound)".to_string(),
    };
    let _ = writeln!(
        out,
        "| 4 | highest sustained upstream change rate kept up | {best_text} | {} watchers attached; keep up = every watcher got every change and all-watcher p99 < {} s; steps of {:.0} s; {limit_text} |",
        r.watchers,
        KEEP_UP_P99.as_secs(),
        r.step_secs,
    );
    for s in &r.ramp {
        let _ = writeln!(
            out,
            "| 4 | step {:.0}/s | {} | {} |",
            s.rate,
            verdict(s),
            round_detail(s, r.watchers)
        );
    }
    ready_rows(&mut out, &r.first_ready, &r.ready);
    crate::relist::rows(&mut out, &r.writer);
    crate::idle::row(&mut out, &r.idle);
    if !r.notes.is_empty() {
        let _ = writeln!(out, "\nNotes:");
        for n in &r.notes {
            let _ = writeln!(out, "- {n}");
        }
    }
    out
}
