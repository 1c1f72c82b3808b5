//! The table of `--scale x10` (out/loadbench-x10.md).

use std::fmt::Write as _;

use crate::report::round_detail;
use crate::scale::{X10Results, FANOUT_WATCHERS, LIST_REQUESTS, LIST_RUNS, QUIET};
use crate::stats::{bytes, dur};

fn ms_opt(ns: Option<i64>) -> String {
    ns.map_or_else(|| "n/a".into(), |n| format!("{:.1} ms", n as f64 / 1e6))
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len().saturating_sub(1) / 2).copied().unwrap_or(0)
}

/// The table.
pub fn table(r: &X10Results) -> String {
    let m = &r.machine;
    let mut out = String::new();
    let _ = writeln!(out, "## grid-wrapper load bench — scale ×10\n");
    let _ = writeln!(
        out,
        "Machine: nproc {} · {} · Linux {} · {} · {} · sim `{}` (listening {:.1} s after spawn) · whole run {:.0} s\n",
        m.nproc,
        m.cpu,
        m.kernel,
        m.date,
        m.version,
        r.sim_args,
        r.sim_start.as_secs_f64(),
        r.wall.as_secs_f64()
    );
    let _ = writeln!(out, "| # | Measurement | Result | Detail |");
    let _ = writeln!(out, "|---|---|---|---|");
    let s = &r.ready;
    let _ = writeln!(
        out,
        "| x1 | sync: start → `/readyz` 200 | {:.2} s | spawn → first `listed` log line {}; {} `listed` lines, the last for {}; `/readyz` polled every 5 ms |",
        s.start_to_ready as f64 / 1e9,
        ms_opt(s.start_to_first_listed),
        s.listed_lines,
        s.last_listed_kind,
    );
    let _ = writeln!(
        out,
        "| x1 | sync: last upstream `listed` log line → `/readyz` 200 | {} | last `listed` → `cache ready` log line {} (the `listed` line is logged when a list has arrived, before the cache applies it; stderr read in a thread, timestamped on arrival) |",
        ms_opt(s.listed_to_ready),
        ms_opt(s.listed_to_cache_ready),
    );
    let _ = writeln!(
        out,
        "| x1 | grid-wrapper CPU for the sync | {:.2} s | utime+stime from spawn to 0.1 s after `/readyz` 200 ({:.0} % of one core over the sync); the simulator serving the lists: {:.2} s |",
        r.sync_cpu,
        100.0 * r.sync_cpu / (s.start_to_ready as f64 / 1e9).max(1e-9),
        r.sim_sync_cpu,
    );
    let mem = &r.mem;
    let json = mem.json_bytes();
    let _ = writeln!(
        out,
        "| x2 | RSS after sync | {} | VmRSS 1 s after `/readyz` 200; VmHWM then {}; after the four LISTs {}; at the end of the run (after the relabels and the fan-out) {} (VmHWM {}); the simulator: VmRSS {} |",
        bytes(mem.rss_sync * 1024),
        bytes(mem.hwm_sync * 1024),
        bytes(mem.rss_after_lists * 1024),
        bytes(mem.rss_end * 1024),
        bytes(mem.hwm_end * 1024),
        bytes(mem.sim_rss * 1024),
    );
    let _ = writeln!(
        out,
        "| x2 | RSS ÷ JSON after sync | {:.2}× | cached JSON {} = {}; peak (VmHWM at the end) ÷ JSON {:.2}×; end of run ÷ JSON {:.2}× |",
        mem.per_json(mem.rss_sync),
        bytes(json),
        mem.json_parts(bytes),
        mem.per_json(mem.hwm_end),
        mem.per_json(mem.rss_end),
    );
    let (pb, pb_detail) = mem.proto_row(bytes);
    let _ = writeln!(
        out,
        "| x2 | RSS after sync + protobuf kube-proxy (lists + watches) | {pb} | {pb_detail}{} |",
        mem.proto
            .as_ref()
            .map(|p| format!(
                "; its first LIST (endpointslices, the run's first protobuf request: it encodes every slice) took {}",
                dur(p.first_list_ns)
            ))
            .unwrap_or_default(),
    );
    let (up, up_detail) = mem.upstream_row(bytes);
    let _ = writeln!(
        out,
        "| x2 | RSS ÷ upstream JSON after sync | {up} | {up_detail} |"
    );
    let p50 = median(r.list_runs.iter().map(|x| x.p50).collect());
    let p99 = median(r.list_runs.iter().map(|x| x.p99).collect());
    let per_run: Vec<String> = r
        .list_runs
        .iter()
        .map(|x| format!("{} / {}", dur(x.p50), dur(x.p99)))
        .collect();
    let _ = writeln!(
        out,
        "| x3 | LIST all endpointslices (selector L), p50 / p99 | {} / {} | median of {LIST_RUNS} runs × {LIST_REQUESTS} sequential requests (+2 warm-up), each run a fresh keep-alive connection, raw client; per run {}; body {} ({:.2} GiB/s at p50) |",
        dur(p50),
        dur(p99),
        per_run.join(" · "),
        bytes(r.list_bytes as u64),
        r.list_bytes as f64 / (1u64 << 30) as f64 / (p50 as f64 / 1e9).max(1e-9),
    );
    for l in &r.relabels {
        let complete = l.events as usize >= l.changed && l.settled;
        let _ = writeln!(
            out,
            "| x4 | local-node relabel (`zone` → {}): relabel sent → last resulting event at an endpointslices watcher | {} | measured on one watch of the slices (selector L) opened at the LIST's RV just before: first event after {}; {} events received, {} slices differ between a LIST before and one after ({} slices): {}; done = no event for {} s{} |",
            l.to,
            ms_opt(l.to_last_event.map(|x| x as i64)),
            ms_opt(l.to_first_event.map(|x| x as i64)),
            l.events,
            l.changed,
            l.items,
            if complete {
                "the watcher received all of them"
            } else {
                "**fewer events than changed slices, or the wait ended before quiet**"
            },
            QUIET.as_secs(),
            l.ended
                .as_deref()
                .map(|e| format!("; the watch ended: {e}"))
                .unwrap_or_default(),
        );
    }
    let f = &r.fanout;
    let d = &f.delivery;
    let _ = writeln!(
        out,
        "| x5 | fan-out: apply → received by all {FANOUT_WATCHERS} watchers, p50 / p99 | {} / {} | {} changes at {:.0}/s to slices of non-topology Services; {} |",
        dur(d.all_pct(50.0)),
        dur(d.all_pct(99.0)),
        d.changes,
        f.rate,
        round_detail(f, FANOUT_WATCHERS),
    );
    if r.relists > 0 {
        let _ = writeln!(
            out,
            "\nNote: grid-wrapper counted {} relists (`grid_wrapper_upstream_relists_total`) during the run.",
            r.relists
        );
    }
    out
}
