//! Recovery tests of `reflector.rs`: an upstream whose RVs went backwards, RVs that keep failing,
//! failure episodes in the log, and the stats. Uses the fake upstream of `reflector_tests.rs`.

use super::*;
use log::Level;

/// A Nodes reflector (no label selector in the calls) with stats of its own.
fn nodes<'a>(fake: &'a Fake, sink: &Arc<Rec>) -> (Reflector<&'a Fake>, Arc<KindStats>) {
    let stats = Arc::new(KindStats::new());
    let r = Reflector::new(
        fake,
        Resource::Nodes,
        sink.clone(),
        Backoff::without_jitter(),
        stats.clone(),
    );
    (r, stats)
}

/// Steps `r` from `stage` `n` times; the final state and the waits asked for.
fn steps(r: &mut Reflector<&Fake>, mut stage: Stage, n: usize) -> (Stage, Vec<Option<Duration>>) {
    let mut waits = Vec::new();
    for _ in 0..n {
        let (next, wait) = r.step(stage);
        stage = next;
        waits.push(wait);
    }
    (stage, waits)
}

/// The apiserver's "Too large resource version" Status as JSON: with the cause reason (and a
/// message that does not say it), or only the message (servers before 1.18.6).
fn too_large_json(cause: bool) -> String {
    let (message, details) = if cause {
        (
            "Timeout",
            r#","details":{"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}]}"#,
        )
    } else {
        ("Timeout: Too large resource version: 10, current: 3", "")
    };
    format!(
        r#"{{"kind":"Status","apiVersion":"v1","metadata":{{}},"status":"Failure","message":"{message}","reason":"Timeout"{details},"code":504}}"#
    )
}

/// The same as an HTTP 504 answer.
fn too_large_error(cause: bool) -> UpstreamError {
    if cause {
        status(504, "Timeout", "Timeout", &["ResourceVersionTooLarge"])
    } else {
        let m = "Timeout: Too large resource version: 10, current: 3";
        status(504, "Timeout", m, &[])
    }
}

/// A watch stream holding one ERROR event with `status` (JSON).
fn error_stream(status: &str) -> Reply {
    let line = format!("{{\"type\":\"ERROR\",\"object\":{status}}}\n");
    Reply::Watch(Ok((Box::leak(line.into_boxed_str()), false)))
}

const BOOKMARK_7: &str =
    "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"7\"}}}\n";
const EXPIRED: &str =
    r#"{"kind":"Status","code":410,"reason":"Expired","message":"too old resource version"}"#;
const INTERNAL: &str = r#"{"kind":"Status","code":500,"reason":"InternalError","message":"boom"}"#;

fn lists(fake: &Fake) -> Vec<String> {
    fake.calls()
        .into_iter()
        .filter(|c| c.starts_with("LIST"))
        .collect()
}

#[test]
fn rv_too_large_at_watch_start_or_in_the_stream_relists_from_scratch() {
    // (how the refusal arrives, steps from Listed{10} to Empty)
    let cases: Vec<(&str, Reply, usize)> = vec![
        (
            "HTTP 504 with the cause",
            Reply::Watch(Err(too_large_error(true))),
            1,
        ),
        (
            "HTTP 504, message only",
            Reply::Watch(Err(too_large_error(false))),
            1,
        ),
        (
            "ERROR event with the cause",
            error_stream(&too_large_json(true)),
            2,
        ),
        (
            "ERROR event, message only",
            error_stream(&too_large_json(false)),
            2,
        ),
    ];
    for (what, refusal, n) in cases {
        let fake = Fake::new(vec![list("10", &["a"]), refusal, list("3", &["a", "b"])]);
        let sink = Arc::new(Rec::default());
        let (mut r, stats) = nodes(&fake, &sink);
        let (stage, waits) = steps(&mut r, Stage::Empty, 1 + n);
        assert_eq!(stage.describe(), ("Empty", ""), "{what}");
        assert_eq!(
            waits.last(),
            Some(&None),
            "{what}: the first one relists at once"
        );
        assert_eq!(r.list_from, ListFrom::Latest, "{what}");
        let (stage, _) = r.step(stage);
        assert_eq!(stage.describe(), ("Listed", "3"), "{what}");
        assert_eq!(
            lists(&fake),
            ["LIST /api/v1/nodes?resourceVersion=0", "LIST /api/v1/nodes"],
            "{what}: the relist names no resourceVersion"
        );
        assert_eq!(
            sink.take(),
            vec![
                Got::List(vec![item("a")]),
                Got::List(vec![item("a"), item("b")])
            ],
            "{what}: the cache gets the new list to diff"
        );
        assert_eq!(stats.relists_for(RelistReason::TooLarge), 1, "{what}");
        assert_eq!(stats.relists(), 1, "{what}");
        assert_eq!(stats.watch_errors(), 1, "{what}");
        assert!(
            stats.failing(),
            "{what}: not recovered before the watch works"
        );
        assert!(stats.last_error().contains("Timeout"), "{what}");
    }
}

#[test]
fn rv_too_large_again_without_progress_backs_off_and_progress_restores_the_budget() {
    let fake = Fake::new(vec![
        list("10", &[]),
        Reply::Watch(Err(too_large_error(true))),
        list("3", &[]),
        Reply::Watch(Err(too_large_error(true))),
        list("3", &[]),
        Reply::Watch(Ok((BOOKMARK_7, false))),
        Reply::Watch(Err(too_large_error(false))),
    ]);
    let sink = Arc::new(Rec::default());
    let (mut r, stats) = nodes(&fake, &sink);
    // list, refused, list, refused again: no hot loop, the second relist waits
    let (stage, waits) = steps(&mut r, Stage::Empty, 4);
    assert_eq!(stage.describe(), ("Empty", ""));
    assert_eq!(waits, [None, None, None, Some(Duration::from_millis(800))]);
    // list, watch, bookmark (progress), EOF, refused: at once again
    let (stage, waits) = steps(&mut r, stage, 5);
    assert_eq!(stage.describe(), ("Empty", ""));
    assert_eq!(waits, [None, None, None, None, None]);
    assert_eq!(
        lists(&fake),
        [
            "LIST /api/v1/nodes?resourceVersion=0",
            "LIST /api/v1/nodes",
            "LIST /api/v1/nodes"
        ]
    );
    assert_eq!(stats.relists_for(RelistReason::TooLarge), 3);
}

/// A watch failing at once, in each of the ways a watch fails.
fn failing_watch(how: usize) -> Reply {
    match how {
        0 => Reply::Watch(Err(down())),
        1 => error_stream(INTERNAL),
        2 => Reply::Watch(Ok(("", false))), // ends at once, empty
        3 => Reply::Watch(Ok(("", true))),  // read error
        4 => Reply::Watch(Err(status(403, "Forbidden", "no watch", &[]))),
        _ => Reply::Watch(Err(UpstreamError::Tls("unknown issuer".into()))),
    }
}

#[test]
fn an_rv_that_keeps_failing_is_dropped_after_max_failures() {
    assert_eq!(MAX_FAILURES_WITHOUT_PROGRESS, 3);
    for how in 0..6 {
        let mut replies = vec![list("5", &["a"])];
        replies.extend((0..3).map(|_| failing_watch(how)));
        replies.push(list("6", &["a"]));
        let fake = Fake::new(replies);
        let sink = Arc::new(Rec::default());
        let (mut r, stats) = nodes(&fake, &sink);
        let (mut stage, _) = steps(&mut r, Stage::Empty, 1);
        let mut waits = Vec::new();
        for _ in 0..20 {
            if lists(&fake).len() == 2 {
                break;
            }
            let (next, wait) = r.step(stage);
            stage = next;
            waits.push(wait);
        }
        assert_eq!(
            lists(&fake),
            ["LIST /api/v1/nodes?resourceVersion=0", "LIST /api/v1/nodes"],
            "case {how}: {:?}",
            fake.calls()
        );
        assert_eq!(stage.describe(), ("Listed", "6"), "case {how}");
        // Every failed attempt waited (the relist from scratch too); the list did not.
        let backed_off = waits.iter().filter(|w| w.is_some()).count();
        assert_eq!(backed_off, 3, "case {how}: {waits:?}");
        assert_eq!(waits.last(), Some(&None), "case {how}");
        assert_eq!(stats.relists_for(RelistReason::Repeated), 1, "case {how}");
        assert_eq!(stats.watch_errors(), 3, "case {how}");
        assert!(stats.failing(), "case {how}");
        assert!(!stats.last_error().is_empty(), "case {how}");
    }
}

#[test]
fn watch_progress_restarts_the_failure_count() {
    let fake = Fake::new(vec![
        list("5", &[]),
        failing_watch(0),
        failing_watch(1),
        Reply::Watch(Ok((BOOKMARK_7, false))),
        failing_watch(0),
        failing_watch(1),
        failing_watch(0),
        list("8", &[]),
    ]);
    let sink = Arc::new(Rec::default());
    let (mut r, stats) = nodes(&fake, &sink);
    // list, ✗ (start), ✗ (watch + ERROR), watch, bookmark, EOF, ✗, ✗ (watch + ERROR)
    let (stage, _) = steps(&mut r, Stage::Empty, 10);
    assert_eq!(stage.describe(), ("Listed", "7"));
    assert_eq!(
        lists(&fake).len(),
        1,
        "two failures since progress: no relist"
    );
    assert_eq!(stats.watch_errors(), 4);
    // The third failure since the bookmark drops RV 7.
    let (stage, _) = steps(&mut r, stage, 2);
    assert_eq!(stage.describe(), ("Listed", "8"));
    assert_eq!(lists(&fake)[1], "LIST /api/v1/nodes");
    assert!(
        fake.calls()[6].contains("&resourceVersion=7&"),
        "{:?}",
        fake.calls()
    );
}

#[test]
fn error_410_still_relists_at_the_rv_and_repeats_back_off() {
    let fake = Fake::new(vec![
        list("10", &[]),
        error_stream(EXPIRED),
        list("11", &[]),
        error_stream(EXPIRED),
        list("12", &[]),
        error_stream(EXPIRED),
        list("13", &[]),
    ]);
    let sink = Arc::new(Rec::default());
    let (mut r, stats) = nodes(&fake, &sink);
    // list, watch, ERROR 410 → relist at 10 at once
    let (stage, waits) = steps(&mut r, Stage::Empty, 3);
    assert_eq!(stage.describe(), ("Empty", ""));
    assert_eq!(waits, [None, None, None]);
    assert_eq!(r.list_from, ListFrom::NotOlderThan("10".into()));
    // list at 10, watch, ERROR 410 again without progress → relist at 11 after a backoff
    let (stage, waits) = steps(&mut r, stage, 3);
    assert_eq!(waits, [None, None, Some(Duration::from_millis(800))]);
    assert_eq!(r.list_from, ListFrom::NotOlderThan("11".into()));
    // the third: from scratch
    let (stage, _) = steps(&mut r, stage, 4);
    assert_eq!(stage.describe(), ("Listed", "13"));
    assert_eq!(
        lists(&fake),
        [
            "LIST /api/v1/nodes?resourceVersion=0",
            "LIST /api/v1/nodes?resourceVersion=10",
            "LIST /api/v1/nodes?resourceVersion=11",
            "LIST /api/v1/nodes"
        ]
    );
    assert_eq!(stats.relists_for(RelistReason::Expired), 2);
    assert_eq!(stats.relists_for(RelistReason::Repeated), 1);
    assert_eq!(stats.watch_errors(), 3);
    assert!(!stats.failing(), "410 is routine, no failure episode");
    assert_eq!(stats.last_error(), "");
}

#[test]
fn a_relist_at_an_rv_that_keeps_failing_drops_the_rv() {
    let fake = Fake::new(vec![
        list("10", &[]),
        error_stream(EXPIRED),
        Reply::List(Err(status(500, "InternalError", "etcd", &[]))),
        Reply::List(Err(down())),
        list("2", &[]),
    ]);
    let sink = Arc::new(Rec::default());
    let (mut r, _) = nodes(&fake, &sink);
    let (stage, waits) = steps(&mut r, Stage::Empty, 6);
    assert_eq!(stage.describe(), ("Listed", "2"));
    assert_eq!(waits.iter().filter(|w| w.is_some()).count(), 2);
    // ERROR 410 (1), then two failed relists at 10 (2, 3): the RV is dropped
    assert_eq!(
        lists(&fake),
        [
            "LIST /api/v1/nodes?resourceVersion=0",
            "LIST /api/v1/nodes?resourceVersion=10",
            "LIST /api/v1/nodes?resourceVersion=10",
            "LIST /api/v1/nodes"
        ]
    );
}

#[test]
fn stats_follow_contact_failures_and_recovery() {
    let fake = Fake::new(vec![
        Reply::List(Err(down())),
        list("5", &[]),
        failing_watch(0),
        Reply::Watch(Ok((BOOKMARK_7, false))),
    ]);
    let sink = Arc::new(Rec::default());
    let (mut r, stats) = nodes(&fake, &sink);
    let (stage, _) = steps(&mut r, Stage::Empty, 1);
    assert_eq!(stats.last_contact(), 0, "never reached");
    assert!(stats.failing());
    assert!(
        stats.last_error().contains("unreachable"),
        "{}",
        stats.last_error()
    );
    let before = unix_now();
    let (stage, _) = steps(&mut r, stage, 1);
    assert!(stats.last_contact() >= before);
    assert!(!stats.failing(), "a list ends a list-only episode");
    let (stage, _) = steps(&mut r, stage, 1);
    assert!(stats.failing());
    assert_eq!(stats.watch_errors(), 1);
    let (stage, _) = steps(&mut r, stage, 1);
    assert!(stats.failing(), "a watch that starts is not yet progress");
    let (stage, _) = steps(&mut r, stage, 1);
    assert_eq!(stage.describe(), ("Watching", "7"));
    assert!(!stats.failing(), "a bookmark is");
    assert_eq!(stats.relists(), 0);
}

/// Captures the log records of the reflector, per test thread.
struct Capture(Mutex<Vec<(Option<String>, Level, String)>>);
static CAPTURE: Capture = Capture(Mutex::new(Vec::new()));

impl log::Log for Capture {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.target().starts_with("grid_wrapper::upstream::reflector")
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            let thread = std::thread::current().name().map(str::to_string);
            let mut v = self.0.lock().unwrap_or_else(|p| p.into_inner());
            v.push((thread, r.level(), r.args().to_string()));
        }
    }
    fn flush(&self) {}
}

/// This thread's captured records since the last call (installs the logger on first use).
fn take_logs() -> Vec<(Level, String)> {
    if log::set_logger(&CAPTURE).is_ok() {
        log::set_max_level(log::LevelFilter::Debug);
    }
    let me = std::thread::current().name().map(str::to_string);
    let mut all = CAPTURE.0.lock().unwrap_or_else(|p| p.into_inner());
    let (mine, others) = all.drain(..).partition(|(t, _, _)| *t == me);
    *all = others;
    mine.into_iter().map(|(_, l, m)| (l, m)).collect()
}

#[test]
fn failure_episodes_warn_once_then_debug_and_report_recovery() {
    take_logs();
    let fake = Fake::new(vec![
        Reply::List(Err(down())),
        Reply::List(Err(down())),
        list("5", &[]),
        failing_watch(0),
        failing_watch(4),
        failing_watch(4),
        list("6", &[]),
        Reply::Watch(Ok((BOOKMARK_7, false))),
    ]);
    let sink = Arc::new(Rec::default());
    let (mut r, _) = nodes(&fake, &sink);
    let (stage, _) = steps(&mut r, Stage::Empty, 3);
    let logs = take_logs();
    let levels: Vec<Level> = logs.iter().map(|(l, _)| *l).collect();
    assert_eq!(
        levels,
        [Level::Warn, Level::Debug, Level::Info, Level::Info],
        "{logs:?}"
    );
    assert!(
        logs[0].1.contains("list failed: upstream unreachable"),
        "{logs:?}"
    );
    assert!(
        logs[3].1.contains("recovered after 2 failures in "),
        "{logs:?}"
    );
    // A watch episode: unreachable (WARN), 403 (WARN: new cause, with the RBAC hint), 403
    // again (DEBUG, and the relist from scratch at INFO); the list does not end it, the
    // bookmark does.
    let (stage, _) = steps(&mut r, stage, 6);
    assert_eq!(stage.describe(), ("Watching", "7"));
    let logs = take_logs();
    let want: [(Level, &str); 6] = [
        (Level::Warn, "watch failed to start: upstream unreachable"),
        (Level::Warn, "answered 403 Forbidden: no watch; check RBAC"),
        (Level::Debug, "watch failed to start: upstream answered 403"),
        (
            Level::Info,
            "relisting from scratch (without resourceVersion): 3 failures",
        ),
        (Level::Info, "relisted Nodes"),
        (Level::Info, "recovered after 3 failures in "),
    ];
    assert_eq!(logs.len(), want.len(), "{logs:#?}");
    for ((level, msg), (want_level, part)) in logs.iter().zip(want) {
        assert_eq!(*level, want_level, "{msg}");
        assert!(msg.contains(part), "{msg:?} lacks {part:?}");
    }
}

const BOOKMARK_6: &str =
    "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"6\"}}}\n";

fn deadlines(fake: &Fake) -> Vec<bool> {
    fake.deadlines.lock().unwrap().clone()
}

#[test]
fn a_watch_silent_after_a_bookmark_is_a_stall_and_is_restarted_after_a_backoff() {
    let fake = Fake::new(vec![
        list("5", &["a"]),
        Reply::Silent(BOOKMARK_6),
        Reply::Watch(Ok((BOOKMARK_6, false))),
    ]);
    let sink = Arc::new(Rec::default());
    let (mut r, stats) = nodes(&fake, &sink);
    // list, watch (held to the progress deadline), bookmark, silence past the deadline
    let (stage, waits) = steps(&mut r, Stage::Empty, 4);
    assert_eq!(
        stage.describe(),
        ("Listed", "6"),
        "rewatch at the bookmark's RV"
    );
    assert_eq!(waits, [None, None, None, Some(Duration::from_millis(800))]);
    assert_eq!(stats.stalls(), 1);
    assert!(stats.failing() && stats.failing_since() > 0);
    assert!(
        stats.last_error().contains("silent"),
        "{}",
        stats.last_error()
    );
    // The next watch is held to the deadline too; its bookmark ends the episode.
    let (_, _) = steps(&mut r, stage, 2);
    assert_eq!(deadlines(&fake), [true, true]);
    assert!(!stats.failing() && stats.failing_since() == 0);
}

#[test]
fn a_watch_without_any_bookmark_is_renewed_quietly_and_later_ones_get_the_idle_limit() {
    let fake = Fake::new(vec![
        list("5", &["a"]),
        Reply::Silent(""),
        Reply::Silent(""),
        Reply::Watch(Ok((BOOKMARK_6, false))),
        Reply::Watch(Ok(("", false))),
    ]);
    let sink = Arc::new(Rec::default());
    let (mut r, stats) = nodes(&fake, &sink);
    // list, watch, silence without a bookmark: no failure, renewed at once
    let (stage, waits) = steps(&mut r, Stage::Empty, 3);
    assert_eq!(stage.describe(), ("Listed", "5"));
    assert_eq!(waits, [None, None, None]);
    assert_eq!((stats.stalls(), stats.failing()), (0, false));
    // The next watch waits for the idle limit; silence past that is a failure.
    let (stage, waits) = steps(&mut r, stage, 2);
    assert_eq!(stage.describe(), ("Listed", "5"));
    assert_eq!(waits, [None, Some(Duration::from_millis(800))]);
    assert_eq!(stats.stalls(), 1);
    assert!(stats.failing());
    // A bookmark shows the upstream sends them: the watch after it is held to the deadline.
    let (stage, _) = steps(&mut r, stage, 3);
    assert_eq!(stage.describe(), ("Listed", "6"));
    let (_, _) = steps(&mut r, stage, 1);
    assert_eq!(deadlines(&fake), [true, false, false, true]);
}

const BOOKMARK_5001: &str =
    "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"5001\"}}}\n";

/// Steps `r` from `stage` until the fake has served `n` lists (at most 20 steps).
fn until_lists(r: &mut Reflector<&Fake>, fake: &Fake, mut stage: Stage, n: usize) -> Stage {
    for _ in 0..20 {
        if lists(fake).len() >= n {
            break;
        }
        stage = r.step(stage).0;
    }
    stage
}

/// An upstream whose RVs went back (etcd restored, control plane replaced) accepts a watch
/// from its future and sends nothing on it: before watching again from its RV after a broken,
/// short, empty or silent watch, the reflector reads the upstream's current RV, and relists from
/// scratch (at once, WARN, counted `went_back`) when it is lower. An RV that is no number, or
/// one not passed, is watched from as before.
#[test]
fn a_rewatch_reads_the_current_rv_first_and_relists_from_scratch_when_it_went_back() {
    // (how the watch at RV 5000 ended: steps from Listed{5000}, then what it reads)
    let cases: Vec<(&str, Vec<Reply>, usize)> = vec![
        ("broken", vec![Reply::Watch(Ok(("", true)))], 1),
        ("refused", vec![Reply::Watch(Err(down()))], 0),
        // Ended at once with nothing: a failure too; ended early with a bookmark: no failure.
        ("empty", vec![Reply::Watch(Ok(("", false)))], 1),
        ("short", vec![Reply::Watch(Ok((BOOKMARK_5001, false)))], 2),
        // Held to the progress deadline, silent: renewed without a failure.
        ("silent", vec![Reply::Silent("")], 1),
    ];
    for (how, replies, n) in cases {
        take_logs();
        let mut all = vec![list("5000", &["a"])];
        all.extend(replies);
        all.push(list("40", &["b"]));
        let fake = Fake::new(all);
        fake.current_rvs(vec![Ok("37".into())]);
        let sink = Arc::new(Rec::default());
        let (mut r, stats) = nodes(&fake, &sink);
        // list, watch start, then the stream's end.
        let (stage, _) = steps(&mut r, Stage::Empty, 2 + n);
        assert_eq!(stage.describe().0, "Listed", "{how}");
        let held = stage.describe().1.to_string();
        assert!(fake.checks().is_empty(), "{how}: nothing read yet");
        // The re-watch reads the current RV first: 37 < 5000, so no watch from 5000.
        let (stage, wait) = r.step(stage);
        assert_eq!(
            (stage.describe(), wait.is_none()),
            (("Empty", ""), true),
            "{how}"
        );
        assert_eq!(fake.checks().len(), 1, "{how}");
        assert_eq!(stats.relists_for(RelistReason::WentBack), 1, "{how}");
        let (stage, _) = r.step(stage);
        assert_eq!(stage.describe(), ("Listed", "40"), "{how}");
        assert_eq!(lists(&fake)[1], "LIST /api/v1/nodes", "{how}: from scratch");
        let watches = fake
            .calls()
            .iter()
            .filter(|c| c.starts_with("WATCH"))
            .count();
        assert_eq!(watches, 1, "{how}: no watch from 5000 after the first");
        let logs = take_logs();
        let said: Vec<&(Level, String)> = logs
            .iter()
            .filter(|(_, m)| m.contains("went back"))
            .collect();
        assert_eq!(said.len(), 1, "{how}: {logs:?}");
        assert_eq!(said[0].0, Level::Warn, "{how}");
        assert!(
            said[0].1.contains(&format!(
                "the upstream's resourceVersion went back from \"{held}\" to \"37\" (etcd restored or control plane replaced?)"
            )),
            "{how}: {said:?}"
        );
        // Right after that list, the next watch reads nothing first.
        let _ = r.step(stage);
        assert_eq!(
            fake.checks().len(),
            1,
            "{how}: a fresh RV is not read again"
        );
    }

    // Not gone back (the same RV, a later one, one that is no number): the watch goes on from
    // the RV held; nothing relisted.
    for current in ["5000", "5009", "opaque"] {
        let fake = Fake::new(vec![
            list("5000", &["a"]),
            Reply::Watch(Ok(("", true))),
            Reply::Watch(Ok((BOOKMARK_5001, false))),
        ]);
        fake.current_rvs(vec![Ok(current.into())]);
        let sink = Arc::new(Rec::default());
        let (mut r, stats) = nodes(&fake, &sink);
        let (stage, _) = steps(&mut r, Stage::Empty, 4);
        assert_eq!(stage.describe(), ("Watching", "5000"), "{current}");
        assert_eq!(fake.checks().len(), 1, "{current}");
        assert_eq!(stats.relists(), 0, "{current}");
        assert!(
            fake.calls()[2].contains("&resourceVersion=5000&"),
            "{current}: {:?}",
            fake.calls()
        );
    }
}

/// The read of the current RV failing is a failure like a watch's: backoff, read again at the
/// next attempt, and the third failure in a row without progress relists from scratch (no
/// storm of lists, no hot loop). A `Retry-After` on it is waited for.
#[test]
fn a_failed_read_of_the_current_rv_backs_off_and_counts_toward_the_failures() {
    let fake = Fake::new(vec![
        list("5000", &["a"]),
        Reply::Watch(Ok(("", true))),
        list("40", &["a"]),
    ]);
    let throttled = retry_after(429, 4);
    fake.current_rvs(vec![Err(down()), Err(throttled)]);
    let sink = Arc::new(Rec::default());
    let (mut r, stats) = nodes(&fake, &sink);
    // list, watch, broken (1st failure), read fails (2nd), read throttled (3rd: from scratch).
    let (stage, waits) = steps(&mut r, Stage::Empty, 5);
    assert_eq!(stage.describe(), ("Empty", ""));
    let ms: Vec<Option<u128>> = waits.iter().map(|w| w.map(|d| d.as_millis())).collect();
    assert_eq!(&ms[..4], [None, None, Some(800), Some(1600)]);
    assert!(ms[4].is_some_and(|w| w >= 4000), "the Retry-After: {ms:?}");
    assert_eq!(fake.checks().len(), 2);
    assert_eq!(stats.relists_for(RelistReason::Repeated), 1);
    assert_eq!(stats.throttled(), 1);
    assert!(
        stats.last_error().contains("current resourceVersion"),
        "{}",
        stats.last_error()
    );
    let watches = fake
        .calls()
        .iter()
        .filter(|c| c.starts_with("WATCH"))
        .count();
    assert_eq!(
        watches,
        1,
        "no watch while the read fails: {:?}",
        fake.calls()
    );
    let stage = until_lists(&mut r, &fake, stage, 2);
    assert_eq!(stage.describe(), ("Listed", "40"));
    assert_eq!(lists(&fake)[1], "LIST /api/v1/nodes");
}

/// A relay (another grid-wrapper) answers a watch from its future with 410, never silently,
/// and serves whole lists whatever `limit` says: a follower's re-watch from a relay's RV reads
/// nothing first, and the relay's 410 relists at the RV (the relay answers with its current
/// state). The cloud's RVs are read first; a read that finds the selected server of another
/// domain relists from scratch at once, as a watch start does.
#[test]
fn a_relays_rv_is_not_read_first_and_a_domain_move_found_by_the_read_relists_from_scratch() {
    use crate::upstream::domain::Role;
    let relay = RvOrigin {
        server: 0,
        domain: 0,
        role: Role::Relay,
    };
    let fake = Fake::new(vec![
        list("1099511627800", &["a"]),
        Reply::Watch(Ok(("", true))),
        error_stream(EXPIRED),
        list("549755813900", &["a"]),
    ]);
    fake.serve(relay);
    let sink = Arc::new(Rec::default());
    let (mut r, stats) = nodes(&fake, &sink);
    // list, watch, broken, watch again at once (no read), 410, relist at the RV.
    let stage = until_lists(&mut r, &fake, Stage::Empty, 2);
    assert_eq!(stage.describe(), ("Listed", "549755813900"));
    assert!(fake.checks().is_empty(), "a relay's RV is never read first");
    assert!(
        lists(&fake)[1].contains("resourceVersion=1099511627800"),
        "{:?}",
        lists(&fake)
    );
    assert_eq!(stats.relists_for(RelistReason::Expired), 1);

    // The cloud: a broken watch, and by the re-watch a relay (another domain) is selected.
    let fake = Fake::new(vec![
        list("5000", &["a"]),
        Reply::Watch(Ok(("", true))),
        list("1099511627800", &["a"]),
    ]);
    fake.serve_from(1, 1);
    let sink = Arc::new(Rec::default());
    let (mut r, stats) = nodes(&fake, &sink);
    let (stage, _) = steps(&mut r, Stage::Empty, 3);
    fake.serve(relay);
    let (stage, wait) = r.step(stage);
    assert_eq!((stage.describe(), wait), (("Empty", ""), None));
    assert_eq!(stats.relists_for(RelistReason::ServerSwitch), 1);
    assert!(fake.checks().is_empty(), "refused before it was sent");
    let (stage, _) = r.step(stage);
    assert_eq!(stage.describe(), ("Listed", "1099511627800"));
}
