//! State-machine tests of `reflector.rs` against a fake upstream that replays canned answers.

use super::*;
use crate::handoff::{ListApply, Texts};
use crate::upstream::discovery::discover_with;
use std::collections::VecDeque;
use std::io::{self, Cursor, Read};
use std::sync::Mutex;

/// One canned answer, consumed in order.
enum Reply {
    List(Result<ListResult, UpstreamError>),
    /// A watch stream: its bytes, then optionally an I/O error (a broken connection) instead of
    /// EOF.
    Watch(Result<(&'static str, bool), UpstreamError>),
    /// A watch stream: its bytes, then a read that times out (silence past the read limit).
    Silent(&'static str),
    Get(Result<Value, UpstreamError>),
}

#[derive(Default)]
struct Fake {
    replies: Mutex<VecDeque<Reply>>,
    calls: Mutex<Vec<String>>,
    /// The `bookmarks_expected` of each watch asked for.
    deadlines: Mutex<Vec<bool>>,
    /// The server answering now (`None`: unknown, as a fake without servers). A request naming
    /// an RV of another domain is refused as the client refuses it, without being sent (not
    /// recorded in `calls`).
    serving: Mutex<Option<RvOrigin>>,
    /// What the reads of the current resourceVersion answer, in order; once empty, `""` (an RV
    /// that is not a number, never compared).
    current: Mutex<VecDeque<Result<String, UpstreamError>>>,
    /// The reads of the current resourceVersion made: the RV issued by whom.
    checks: Mutex<Vec<Option<RvOrigin>>>,
}

impl Fake {
    fn new(replies: Vec<Reply>) -> Self {
        Fake {
            replies: Mutex::new(replies.into()),
            calls: Mutex::default(),
            deadlines: Mutex::default(),
            serving: Mutex::default(),
            current: Mutex::default(),
            checks: Mutex::default(),
        }
    }
    /// Server `server` of domain `domain`, a cloud server, answers from now on.
    fn serve_from(&self, server: usize, domain: usize) {
        self.serve(RvOrigin {
            server,
            domain,
            role: crate::upstream::domain::Role::Cloud,
        });
    }
    /// `origin` answers from now on.
    fn serve(&self, origin: RvOrigin) {
        *self.serving.lock().unwrap() = Some(origin);
    }
    /// The next reads of the current resourceVersion answer these.
    fn current_rvs(&self, answers: Vec<Result<String, UpstreamError>>) {
        self.current.lock().unwrap().extend(answers);
    }
    fn checks(&self) -> Vec<Option<RvOrigin>> {
        self.checks.lock().unwrap().clone()
    }
    /// The client's domain check ([`crate::upstream::failover`]'s `Failover::call`).
    fn foreign(&self, rv_from: Option<RvOrigin>) -> Result<Option<RvOrigin>, UpstreamError> {
        let now = *self.serving.lock().unwrap();
        match (rv_from, now) {
            (Some(from), Some(now)) if from.domain != now.domain => {
                Err(UpstreamError::ForeignResourceVersion {
                    issued_by: format!("server #{}", from.server),
                    now: format!("server #{}", now.server),
                })
            }
            _ => Ok(now),
        }
    }
    fn next(&self, call: String) -> Option<Reply> {
        self.calls.lock().unwrap().push(call);
        self.replies.lock().unwrap().pop_front()
    }
    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
}

fn down() -> UpstreamError {
    UpstreamError::Unreachable("connection refused".into())
}

/// Reader that yields its bytes, then fails with `kind`.
struct Broken(Cursor<&'static [u8]>, io::ErrorKind);
impl Read for Broken {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.0.read(buf)? {
            0 => Err(io::Error::new(self.1, "stream failed")),
            n => Ok(n),
        }
    }
}

impl ListWatch for &Fake {
    fn list(&self, q: &str, rv_from: Option<RvOrigin>) -> Result<ListResult, UpstreamError> {
        let origin = self.foreign(rv_from)?;
        match self.next(format!("LIST {q}")) {
            Some(Reply::List(r)) => r.map(|l| ListResult {
                origin: l.origin.or(origin),
                ..l
            }),
            _ => Err(down()),
        }
    }
    fn watch(
        &self,
        q: &str,
        deadline: bool,
        rv_from: Option<RvOrigin>,
    ) -> Result<WatchStream, UpstreamError> {
        let origin = self.foreign(rv_from)?;
        let lines = self.watch_lines(q, deadline)?;
        Ok(WatchStream { lines, origin })
    }
    fn get_json(&self, p: &str) -> Result<Value, UpstreamError> {
        match self.next(format!("GET {p}")) {
            Some(Reply::Get(r)) => r,
            _ => Err(down()),
        }
    }
    fn current_resource_version(
        &self,
        _: Resource,
        rv_from: Option<RvOrigin>,
    ) -> Result<String, UpstreamError> {
        self.foreign(rv_from)?;
        self.checks.lock().unwrap().push(rv_from);
        let next = self.current.lock().unwrap().pop_front();
        next.unwrap_or_else(|| Ok(String::new()))
    }
}

impl Fake {
    fn watch_lines(
        &self,
        q: &str,
        deadline: bool,
    ) -> Result<Box<dyn BufRead + Send>, UpstreamError> {
        self.deadlines.lock().unwrap().push(deadline);
        let broken = |body: &'static str, kind| -> Box<dyn BufRead + Send> {
            Box::new(io::BufReader::new(Broken(
                Cursor::new(body.as_bytes()),
                kind,
            )))
        };
        match self.next(format!("WATCH {q}")) {
            Some(Reply::Watch(Ok((body, false)))) => Ok(Box::new(Cursor::new(body.as_bytes()))),
            Some(Reply::Watch(Ok((body, true)))) => {
                Ok(broken(body, io::ErrorKind::ConnectionReset))
            }
            Some(Reply::Silent(body)) => Ok(broken(body, io::ErrorKind::TimedOut)),
            Some(Reply::Watch(Err(e))) => Err(e),
            _ => Err(down()),
        }
    }
}

/// What a reflector handed the recording sink.
#[derive(Debug, PartialEq)]
enum Got {
    /// A watch event's change.
    One(Change),
    /// A complete list: its items' texts, in the order read.
    List(Vec<Box<str>>),
}

/// A sink that records what it is handed.
#[derive(Default)]
struct Rec(Mutex<Vec<(Resource, Got)>>);
impl Sink for Rec {
    fn apply(&self, kind: Resource, change: Change) {
        // The object's text as `Change::upsert` writes it (the fake's members come in another
        // order), so that the tests compare what it means.
        let change = match change {
            Change::Upsert(w) => Change::Upsert(crate::handoff::Watched {
                text: serde_json::from_str::<Value>(&w.text)
                    .unwrap()
                    .to_string()
                    .into(),
                key: w.key,
            }),
            other => other,
        };
        self.0.lock().unwrap().push((kind, Got::One(change)));
    }
    fn list_items(&self, kind: Resource) -> Box<dyn ListApply + '_> {
        Box::new(RecList {
            rec: self,
            kind,
            texts: Texts::default(),
        })
    }
}
impl Rec {
    fn take(&self) -> Vec<Got> {
        self.0.lock().unwrap().drain(..).map(|(_, c)| c).collect()
    }
}

/// The recording sink's list taker: a list is recorded once it is applied, as one [`Got::List`].
struct RecList<'a> {
    rec: &'a Rec,
    kind: Resource,
    texts: Texts,
}
impl ListItems for RecList<'_> {
    fn push(&mut self, text: Box<str>) {
        self.texts.push(text);
    }
    fn clear(&mut self) {
        self.texts.clear();
    }
    fn len(&self) -> usize {
        self.texts.len()
    }
}
impl ListApply for RecList<'_> {
    fn apply(self: Box<Self>) {
        let list = Got::List(self.texts.0);
        self.rec.0.lock().unwrap().push((self.kind, list));
    }
}

/// A list item as the apiserver sends it (no kind/apiVersion), as JSON text.
fn item(name: &str) -> Box<str> {
    serde_json::json!({"metadata": {"name": name, "namespace": "default"}})
        .to_string()
        .into()
}

fn list(rv: &str, names: &[&str]) -> Reply {
    let items = names.iter().map(|n| item(n)).collect();
    Reply::List(Ok(ListResult {
        items,
        resource_version: rv.into(),
        continue_token: None,
        origin: None,
    }))
}

/// An upstream `Status` error.
fn status(code: u16, reason: &str, message: &str, causes: &[&str]) -> UpstreamError {
    UpstreamError::Status {
        code,
        reason: reason.into(),
        message: message.into(),
        causes: causes.iter().map(|c| c.to_string()).collect(),
        retry_after: None,
    }
}

fn gone() -> UpstreamError {
    status(410, "Expired", "too old resource version", &[])
}

fn svc(name: &str, rv: &str) -> Value {
    serde_json::json!({"kind": "Service", "apiVersion": "v1", "metadata": {"name": name, "namespace": "default", "resourceVersion": rv}})
}

/// Runs `n` steps from `Empty`, returning the final state and every wait asked for.
fn run_steps(r: &mut Reflector<&Fake>, n: usize) -> (Stage, Vec<Option<Duration>>) {
    let mut stage = Stage::Empty;
    let mut waits = Vec::new();
    for _ in 0..n {
        let (next, wait) = r.step(stage);
        stage = next;
        waits.push(wait);
    }
    (stage, waits)
}

fn reflector<'a>(fake: &'a Fake, kind: Resource, sink: &Arc<Rec>) -> Reflector<&'a Fake> {
    Reflector::new(
        fake,
        kind,
        sink.clone(),
        Backoff::without_jitter(),
        Arc::new(KindStats::new()),
    )
}

const SEL: &str = "labelSelector=%21service.kubernetes.io%2Fheadless%2C%21service.kubernetes.io%2Fservice-proxy-name";

#[test]
fn list_watch_events_bookmark_and_rewatch_after_stream_end() {
    let stream = concat!(
        r#"{"type":"ADDED","object":{"kind":"Service","apiVersion":"v1","metadata":{"name":"c","namespace":"default","resourceVersion":"11"}}}"#,
        "\n",
        "\n",
        r#"{"type":"MODIFIED","object":{"kind":"Service","apiVersion":"v1","metadata":{"name":"a","namespace":"default","resourceVersion":"12"}}}"#,
        "\n",
        r#"{"type":"BOOKMARK","object":{"kind":"Service","apiVersion":"v1","metadata":{"resourceVersion":"15"}}}"#,
        "\n",
        r#"{"type":"DELETED","object":{"kind":"Service","apiVersion":"v1","metadata":{"name":"b","namespace":"default","resourceVersion":"16"}}}"#,
        "\n",
        r#"{"type":"BOOKMARK","object":{"kind":"Service","apiVersion":"v1","metadata":{"resourceVersion":"20"}}}"#,
        "\n",
    );
    let fake = Fake::new(vec![
        list("10", &["a", "b"]),
        Reply::Watch(Ok((stream, false))),
        Reply::Watch(Ok(("", false))),
    ]);
    let sink = Arc::new(Rec::default());
    let mut r = reflector(&fake, Resource::Services, &sink);
    // list, watch start, 6 lines, EOF, rewatch
    let (stage, waits) = run_steps(&mut r, 10);
    assert_eq!(stage.describe(), ("Watching", "20"));
    assert!(
        waits.iter().all(Option::is_none),
        "a normal stream end must not back off: {waits:?}"
    );
    assert_eq!(
        sink.take(),
        vec![
            Got::List(vec![item("a"), item("b")]),
            Got::One(Change::upsert(&svc("c", "11"))),
            Got::One(Change::upsert(&svc("a", "12"))),
            Got::One(Change::delete(&svc("b", "16"))),
        ]
    );
    let calls = fake.calls();
    assert_eq!(
        calls[0],
        format!("LIST /api/v1/services?{SEL}&resourceVersion=0")
    );
    let is_watch = |c: &str, rv: &str| {
        let prefix = format!("WATCH /api/v1/services?allowWatchBookmarks=true&{SEL}&resourceVersion={rv}&timeoutSeconds=");
        let Some(rest) = c.strip_prefix(&prefix) else {
            return false;
        };
        let Some(secs) = rest.strip_suffix("&watch=true") else {
            return false;
        };
        (300..600).contains(&secs.parse::<u64>().unwrap())
    };
    assert!(is_watch(&calls[1], "10"), "{}", calls[1]);
    assert!(is_watch(&calls[2], "20"), "{}", calls[2]);
    assert_eq!(calls.len(), 3);
}

#[test]
fn error_410_relists_at_last_rv_then_without_rv_when_that_is_gone_too() {
    let stream = concat!(
        r#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"30"}}}"#,
        "\n",
        r#"{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old"}}"#,
        "\n",
    );
    let fake = Fake::new(vec![
        list("10", &[]),
        Reply::Watch(Ok((stream, false))),
        Reply::List(Err(gone())),
        list("40", &["x"]),
        Reply::Watch(Err(gone())),
        list("41", &["x", "y"]),
    ]);
    let sink = Arc::new(Rec::default());
    let mut r = reflector(&fake, Resource::Nodes, &sink);
    // list, watch, bookmark, ERROR → Empty, list 410 → Empty, list ok, watch 410 → Empty, list ok
    let (stage, waits) = run_steps(&mut r, 8);
    assert_eq!(stage.describe(), ("Listed", "41"));
    assert!(
        waits.iter().all(Option::is_none),
        "410 handling relists at once: {waits:?}"
    );
    assert_eq!(
        sink.take(),
        vec![
            Got::List(vec![]),
            Got::List(vec![item("x")]),
            Got::List(vec![item("x"), item("y")])
        ]
    );
    let calls = fake.calls();
    assert_eq!(calls[0], "LIST /api/v1/nodes?resourceVersion=0");
    assert!(calls[1].starts_with(
        "WATCH /api/v1/nodes?allowWatchBookmarks=true&resourceVersion=10&timeoutSeconds="
    ));
    assert_eq!(calls[2], "LIST /api/v1/nodes?resourceVersion=30");
    assert_eq!(calls[3], "LIST /api/v1/nodes");
    assert!(calls[4].contains("resourceVersion=40&"));
    assert_eq!(calls[5], "LIST /api/v1/nodes?resourceVersion=40");
}

#[test]
fn upstream_loss_backs_off_and_never_replaces_with_nothing() {
    let fake = Fake::new(vec![
        Reply::List(Err(down())),
        Reply::List(Err(status(403, "Forbidden", "rbac", &[]))),
        list("5", &["a"]),
        Reply::Watch(Err(down())),
        Reply::Watch(Ok(("{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"6\"}}}\n{\"type\":\"ADD", true))),
    ]);
    let sink = Arc::new(Rec::default());
    let mut r = reflector(&fake, Resource::Endpoints, &sink);
    // list ✗, list ✗, list ok, watch ✗, watch ok, bookmark, read error → Listed{6}
    let (stage, waits) = run_steps(&mut r, 7);
    assert_eq!(stage.describe(), ("Listed", "6"));
    let ms: Vec<Option<u128>> = waits.iter().map(|w| w.map(|d| d.as_millis())).collect();
    assert_eq!(
        ms,
        [
            Some(800),
            Some(1600),
            None,
            Some(3200),
            None,
            None,
            Some(6400)
        ]
    );
    let changes = sink.take();
    assert_eq!(changes.len(), 1);
    assert!(matches!(&changes[0], Got::List(items) if items.len() == 1));
    assert_eq!(
        fake.calls()[2],
        format!("LIST /api/v1/endpoints?{SEL}&resourceVersion=0")
    );
    // The broken stream is resumed from the last RV, not relisted.
    let (stage, _) = r.step(stage);
    assert_eq!(
        stage.describe(),
        ("Listed", "6"),
        "exhausted fake: watch fails, stays Listed"
    );
    assert!(
        fake.calls()[5].contains("&resourceVersion=6&"),
        "{:?}",
        fake.calls()
    );
}

#[test]
fn non_410_watch_errors_rewatch_with_backoff() {
    let fake = Fake::new(vec![
        list("1", &[]),
        Reply::Watch(Ok(("{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":500,\"reason\":\"InternalError\"}}\n", false))),
        Reply::Watch(Err(status(429, "TooManyRequests", "", &[]))),
    ]);
    let sink = Arc::new(Rec::default());
    let mut r = reflector(&fake, Resource::SlicesV1, &sink);
    let (stage, waits) = run_steps(&mut r, 4);
    assert_eq!(stage.describe(), ("Listed", "1"));
    assert_eq!(
        waits,
        [
            None,
            None,
            Some(Duration::from_millis(800)),
            Some(Duration::from_millis(1600))
        ]
    );
    assert_eq!(
        fake.calls()
            .iter()
            .filter(|c| c.starts_with("LIST"))
            .count(),
        1,
        "no relist"
    );
    assert!(
        fake.calls()[0].starts_with("LIST /apis/discovery.k8s.io/v1/endpointslices?labelSelector=")
    );
}

#[test]
fn very_short_empty_watch_backs_off() {
    let fake = Fake::new(vec![list("1", &[]), Reply::Watch(Ok(("", false)))]);
    let sink = Arc::new(Rec::default());
    let mut r = reflector(&fake, Resource::Services, &sink);
    let (stage, waits) = run_steps(&mut r, 3);
    assert_eq!(stage.describe(), ("Listed", "1"));
    assert_eq!(waits[2], Some(Duration::from_millis(800)));
}

#[test]
fn garbage_and_truncated_lines() {
    // (stream after list at RV 1, steps while watching, final state, backed off, dropped, relist RV)
    type Case = (
        &'static str,
        usize,
        (&'static str, &'static str),
        bool,
        u64,
        Option<&'static str>,
    );
    let added = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"namespace\":\"d\",\"resourceVersion\":\"7\"}}}\n";
    let table: Vec<Case> = vec![
        // garbage: relist at the last good RV, after a backoff
        (
            Box::leak(format!("{added}not json\n").into_boxed_str()),
            2,
            ("Empty", ""),
            true,
            1,
            Some("7"),
        ),
        (
            "{\"type\":\"NOPE\",\"object\":{}}\n",
            1,
            ("Empty", ""),
            true,
            1,
            Some("1"),
        ),
        // truncated last line: the stream ended mid-event → rewatch from the last RV
        (
            Box::leak(format!("{added}{{\"type\":\"ADDED\",\"obj").into_boxed_str()),
            2,
            ("Listed", "7"),
            false,
            0,
            None,
        ),
        // nameless object: dropped and counted, the stream goes on
        (
            "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"resourceVersion\":\"8\"}}}\n",
            1,
            ("Watching", "8"),
            false,
            1,
            None,
        ),
    ];
    for (stream, steps, want, backoff, dropped, relist_rv) in table {
        let fake = Fake::new(vec![list("1", &[]), Reply::Watch(Ok((stream, false)))]);
        let sink = Arc::new(Rec::default());
        let mut r = reflector(&fake, Resource::Services, &sink);
        let (mut stage, _) = run_steps(&mut r, 2);
        let mut last_wait = None;
        for _ in 0..steps {
            (stage, last_wait) = r.step(stage);
        }
        assert_eq!(stage.describe(), want, "{stream}");
        assert_eq!(last_wait.is_some(), backoff, "{stream}");
        assert_eq!(r.dropped, dropped, "{stream}");
        if let Some(rv) = relist_rv {
            assert_eq!(r.list_from, ListFrom::NotOlderThan(rv.into()), "{stream}");
        }
        let upserts = sink
            .take()
            .into_iter()
            .filter(|c| matches!(c, Got::One(Change::Upsert(_))))
            .count();
        assert_eq!(upserts, usize::from(stream.starts_with(added)), "{stream}");
    }
}

#[test]
fn over_long_line_relists() {
    let fake = Fake::new(vec![list("1", &[])]);
    let sink = Arc::new(Rec::default());
    let mut r = reflector(&fake, Resource::Services, &sink);
    let big: &'static [u8] =
        Box::leak(vec![b'x'; decode::MAX_WATCH_LINE_BYTES + 1].into_boxed_slice());
    let stage = Stage::Watching {
        rv: "3".into(),
        stream: Stream::new(Box::new(Cursor::new(big)), true, Duration::from_secs(300)),
    };
    let (stage, wait) = r.step(stage);
    assert_eq!(stage.describe(), ("Empty", ""));
    assert!(wait.is_some());
    assert_eq!(r.list_from, ListFrom::NotOlderThan("3".into()));
}

#[test]
fn paginated_lists_are_followed_and_replace_once() {
    let page1 = Reply::List(Ok(ListResult {
        items: vec![svc("a", "1").to_string().into()],
        resource_version: "9".into(),
        continue_token: Some("tok/1=".into()),
        origin: None,
    }));
    let fake = Fake::new(vec![page1, list("9", &["b"]), Reply::Watch(Err(down()))]);
    let sink = Arc::new(Rec::default());
    let mut r = reflector(&fake, Resource::Services, &sink);
    let (stage, _) = run_steps(&mut r, 1);
    assert_eq!(stage.describe(), ("Listed", "9"));
    assert_eq!(
        fake.calls()[1],
        format!("LIST /api/v1/services?continue=tok%2F1%3D&{SEL}")
    );
    assert_eq!(
        sink.take(),
        vec![Got::List(vec![svc("a", "1").to_string().into(), item("b")])]
    );

    // A failing second page: no list applied at all.
    let page1 = Reply::List(Ok(ListResult {
        items: vec![],
        resource_version: "9".into(),
        continue_token: Some("t".into()),
        origin: None,
    }));
    let fake = Fake::new(vec![page1]);
    let mut r = reflector(&fake, Resource::Services, &sink);
    let (stage, waits) = run_steps(&mut r, 1);
    assert_eq!(
        (stage.describe(), waits[0].is_some()),
        (("Empty", ""), true)
    );
    assert!(sink.take().is_empty());
}

#[test]
fn slice_version_discovery() {
    let group = |vs: &[&str]| {
        let versions: Vec<Value> = vs
            .iter()
            .map(|v| serde_json::json!({"version": v}))
            .collect();
        Reply::Get(Ok(
            serde_json::json!({"kind": "APIGroup", "versions": versions}),
        ))
    };
    let nonempty = || list("1", &["s"]);
    let empty = || list("1", &[]);
    let table: Vec<(Vec<Reply>, Resource)> = vec![
        (vec![group(&["v1", "v1beta1"])], Resource::SlicesV1),
        (vec![group(&["v1beta1"])], Resource::SlicesV1beta1),
        (vec![group(&[])], Resource::SlicesV1),
        // discovery fails → probe
        (
            vec![Reply::Get(Err(down())), nonempty()],
            Resource::SlicesV1,
        ),
        (
            vec![Reply::Get(Err(down())), empty(), nonempty()],
            Resource::SlicesV1beta1,
        ),
        (
            vec![Reply::Get(Err(down())), empty(), empty()],
            Resource::SlicesV1,
        ),
        (
            vec![Reply::Get(Err(down())), Reply::List(Err(down())), empty()],
            Resource::SlicesV1beta1,
        ),
        (
            vec![
                Reply::Get(Err(down())),
                Reply::List(Err(down())),
                Reply::List(Err(down())),
            ],
            Resource::SlicesV1,
        ),
    ];
    let last = table.len() - 1;
    for (i, (replies, want)) in table.into_iter().enumerate() {
        let fake = Fake::new(replies);
        let (kind, answered) = discover_with(&&fake);
        assert_eq!(kind, want, "case {i}: {:?}", fake.calls());
        // Only the all-down case is a guess that must be re-checked later.
        assert_eq!(answered, i != last, "case {i}: answered");
    }
    let fake = Fake::new(vec![Reply::Get(Err(down())), empty(), empty()]);
    discover_with(&&fake);
    assert_eq!(
        fake.calls(),
        [
            "GET /apis/discovery.k8s.io",
            "LIST /apis/discovery.k8s.io/v1/endpointslices?limit=1",
            "LIST /apis/discovery.k8s.io/v1beta1/endpointslices?limit=1"
        ]
    );
}

/// A `ListWatch` that owns its fake, for the thread test.
struct Owned(Arc<Fake>);
impl ListWatch for Owned {
    fn list(&self, q: &str, rv_from: Option<RvOrigin>) -> Result<ListResult, UpstreamError> {
        (&*self.0).list(q, rv_from)
    }
    fn watch(
        &self,
        q: &str,
        _: bool,
        rv_from: Option<RvOrigin>,
    ) -> Result<WatchStream, UpstreamError> {
        (&*self.0).watch(q, true, rv_from)
    }
    fn get_json(&self, p: &str) -> Result<Value, UpstreamError> {
        (&*self.0).get_json(p)
    }
    fn current_resource_version(
        &self,
        kind: Resource,
        rv_from: Option<RvOrigin>,
    ) -> Result<String, UpstreamError> {
        (&*self.0).current_resource_version(kind, rv_from)
    }
}

#[test]
fn spawned_thread_applies_and_stops() {
    let fake = Arc::new(Fake::new(vec![list("1", &["a"])]));
    let sink = Arc::new(Rec::default());
    let stop = Arc::new(AtomicBool::new(false));
    let stats = Arc::new(KindStats::new());
    let h = spawn_with(
        Owned(fake.clone()),
        Resource::Services,
        sink.clone(),
        stop.clone(),
        stats.clone(),
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while sink.0.lock().unwrap().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(stats.active(), "a running reflector is rendered");
    assert!(stats.last_contact() > 0);
    // The exhausted fake now fails every watch: the thread sits in backoff until stopped.
    stop.store(true, Ordering::Relaxed);
    let t = Instant::now();
    h.join().unwrap();
    assert!(!stats.active(), "a stopped reflector is not rendered");
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "stop must interrupt the backoff sleep"
    );
    assert_eq!(sink.take(), vec![Got::List(vec![item("a")])]);
}

#[path = "reflector_recovery_tests.rs"]
mod recovery;

#[test]
fn servicecidr_detection() {
    let status = |code: u16| Reply::List(Err(status(code, "", "", &[])));
    let ok = || list("1", &[]);
    // (replies, the answer: `None` when it is not known).
    type Case = (Vec<Reply>, Option<Option<Resource>>);
    let table: Vec<Case> = vec![
        (vec![ok()], Some(Some(Resource::CidrsV1))),
        (vec![status(404), ok()], Some(Some(Resource::CidrsV1beta1))),
        // Older than 1.33 (or the API off): neither version; proxied.
        (vec![status(404), status(404)], Some(None)),
        // RBAC without them: proxied with the client's own credentials.
        (vec![status(403), status(403)], Some(None)),
        // Offline, or any other failure: not known, asked again later.
        (vec![Reply::List(Err(down()))], None),
        (vec![status(500)], None),
        (vec![status(404), status(503)], None),
    ];
    for (i, (replies, want)) in table.into_iter().enumerate() {
        let fake = Fake::new(replies);
        let got = discover_cidr_kind(&&fake).ok();
        assert_eq!(got, want, "case {i}: {:?}", fake.calls());
    }
    let fake = Fake::new(vec![status(404), status(404)]);
    let _ = discover_cidr_kind(&&fake);
    assert_eq!(
        fake.calls(),
        [
            "LIST /apis/networking.k8s.io/v1/servicecidrs?limit=1",
            "LIST /apis/networking.k8s.io/v1beta1/servicecidrs?limit=1"
        ]
    );
}

/// Following relays: an RV issued by one server's domain (a relay's own, or the cloud's) is
/// never sent to a server of another; the reflector relists from scratch instead, at once,
/// and the next list's RV is the new server's.
#[test]
fn an_rv_of_another_domain_is_never_sent_the_reflector_relists_from_scratch() {
    let ev = r#"{"type":"ADDED","object":{"kind":"Service","apiVersion":"v1","metadata":{"name":"c","namespace":"default","resourceVersion":"11"}}}
"#;
    let fake = Fake::new(vec![
        list("10", &["a"]),
        Reply::Watch(Ok((ev, false))),
        list("5000", &["a", "c"]),
        Reply::Watch(Err(gone())),
        list("6000", &["a", "c"]),
    ]);
    // Relay #0 (its own domain) answers first.
    fake.serve_from(0, 0);
    let sink = Arc::new(Rec::default());
    let stats = Arc::new(KindStats::new());
    let mut r = Reflector::new(
        &fake,
        Resource::Services,
        sink.clone(),
        Backoff::without_jitter(),
        stats.clone(),
    );
    // list, watch, one event, EOF.
    let (stage, _) = run_steps(&mut r, 4);
    assert_eq!(stage.describe(), ("Listed", "11"));
    assert_eq!(stats.server(), Some(0));
    // The relay dies: the cloud (server #2, domain 2) is selected. The watch at the relay's RV
    // is not sent; the reflector relists from scratch at once.
    fake.serve_from(2, 2);
    let (stage, wait) = r.step(stage);
    assert_eq!((stage.describe(), wait), (("Empty", ""), None));
    assert_eq!(stats.relists_for(RelistReason::ServerSwitch), 1);
    let (stage, _) = r.step(stage);
    assert_eq!(stage.describe(), ("Listed", "5000"));
    assert_eq!(stats.server(), Some(2));
    // A 410 on the cloud: a relist at the cloud's RV... but relay #1 is selected by then: the
    // relist is not sent with that RV either.
    let (stage, _) = r.step(stage);
    assert_eq!(stage.describe(), ("Empty", ""));
    fake.serve_from(1, 1);
    let (stage, wait) = r.step(stage);
    assert_eq!((stage.describe(), wait), (("Empty", ""), None));
    let (stage, _) = r.step(stage);
    assert_eq!(stage.describe(), ("Listed", "6000"));
    assert_eq!(stats.server(), Some(1));
    let calls = fake.calls();
    let base = format!("LIST /api/v1/services?{SEL}");
    assert_eq!(calls[0], format!("{base}&resourceVersion=0"));
    assert!(calls[1].contains("resourceVersion=10&"), "{}", calls[1]);
    // Only the lists from scratch reached the other servers: no RV 11 to the cloud, no RV
    // 5000 to relay #1.
    assert_eq!(calls[2], base);
    assert!(calls[3].contains("resourceVersion=5000&"), "{}", calls[3]);
    assert_eq!(calls[4], base);
    assert_eq!(calls.len(), 5, "{calls:?}");
    let changes = sink.take();
    assert_eq!(changes.len(), 4, "three lists and the event: {changes:?}");
}

/// A relist past `--max-list-items` is abandoned: nothing of it reaches the sink (the last
/// complete list stays served), each one is a failure with a growing backoff, and one WARN
/// covers them (the episode's).
#[test]
fn a_list_over_the_item_bound_changes_nothing_and_backs_off() {
    let over: Vec<String> = (0..=crate::upstream::client::DEFAULT_MAX_LIST_ITEMS)
        .map(|i| format!("n{i}"))
        .collect();
    let over: Vec<&str> = over.iter().map(String::as_str).collect();
    let stream = concat!(
        r#"{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old"}}"#,
        "\n",
    );
    let fake = Fake::new(vec![
        list("5", &["a"]),
        Reply::Watch(Ok((stream, false))),
        list("9", &over),
        list("9", &over),
        list("9", &over),
    ]);
    let sink = Arc::new(Rec::default());
    let mut r = reflector(&fake, Resource::Nodes, &sink);
    // list ok, watch, ERROR 410 → Empty, three lists over the bound.
    let (stage, waits) = run_steps(&mut r, 6);
    assert_eq!(stage.describe(), ("Empty", ""));
    let ms: Vec<Option<u128>> = waits.iter().map(|w| w.map(|d| d.as_millis())).collect();
    assert_eq!(ms, [None, None, None, Some(800), Some(1600), Some(3200)]);
    let changes = sink.take();
    assert_eq!(changes.len(), 1, "only the first list was applied");
    assert!(matches!(&changes[0], Got::List(items) if items.len() == 1));
    let last = r.stats.last_error();
    assert!(
        last.contains("more than 40000 items (--max-list-items=40000)"),
        "{last}"
    );
}

/// A 429 or 5xx `Status` carrying a `Retry-After` of `secs`.
fn retry_after(code: u16, secs: u64) -> UpstreamError {
    UpstreamError::Status {
        code,
        reason: "TooManyRequests".into(),
        message: "Too many requests, please try again later.".into(),
        causes: vec![],
        retry_after: Some(Duration::from_secs(secs)),
    }
}

#[test]
fn a_retry_after_is_waited_for_and_the_backoff_continues_from_there() {
    let fake = Fake::new(vec![
        Reply::List(Err(retry_after(429, 3))),
        Reply::List(Err(down())),
        list("5", &["a"]),
        Reply::Watch(Err(retry_after(503, 60))),
        Reply::Watch(Err(down())),
    ]);
    let sink = Arc::new(Rec::default());
    let stats = Arc::new(KindStats::new());
    let mut r = Reflector::new(
        &fake,
        Resource::Nodes,
        sink.clone(),
        Backoff::without_jitter(),
        stats.clone(),
    );
    let (_, waits) = run_steps(&mut r, 5);
    let w: Vec<Duration> = waits.iter().map(|w| w.unwrap_or_default()).collect();
    // The list's 429: at least its 3 s, jittered upward by less than a tenth.
    assert!(
        w[0] >= Duration::from_secs(3) && w[0] < Duration::from_millis(3300),
        "{w:?}"
    );
    // Then the backoff where it stood (the 429 was its first step), no Retry-After left over.
    assert_eq!(w[1], Duration::from_millis(1600));
    assert_eq!(w[2], Duration::ZERO);
    // The watch's 503 asks for the cap.
    assert!(
        w[3] >= Duration::from_secs(60) && w[3] < Duration::from_secs(66),
        "{w:?}"
    );
    assert_eq!(w[4], Duration::from_millis(6400));
    assert_eq!(stats.throttled(), 1);
}

#[path = "reflector_proto_tests.rs"]
mod proto;
