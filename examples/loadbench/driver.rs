//! The upstream change driver: per-slice JSON templates carrying a sequence annotation, applied
//! to the simulator's `/sim/apply` at a fixed rate over one keep-alive connection, with the
//! instant each change was sent.

use std::net::SocketAddr;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::http::Client;
use crate::watchers::SEQ_KEY;

/// Placeholder replaced by the sequence number in a template.
const HOLE: &str = "@@LOADBENCH_SEQ@@";
/// Most changes sent in one `/sim/apply` request when the driver is behind its schedule.
pub const MAX_BATCH: usize = 64;

/// An object serialised around the place where its sequence number goes.
#[derive(Clone, Debug)]
pub struct Template {
    head: String,
    tail: String,
}

impl Template {
    fn render(&self, seq: u64, out: &mut Vec<u8>) {
        out.extend_from_slice(self.head.as_bytes());
        out.extend_from_slice(seq.to_string().as_bytes());
        out.extend_from_slice(self.tail.as_bytes());
    }
}

/// Templates for the given upstream objects (annotation [`SEQ_KEY`] added; server-set
/// metadata dropped).
pub fn templates(objects: &[Value]) -> Vec<Template> {
    objects
        .iter()
        .filter_map(|o| {
            let mut o = o.clone();
            let meta = o.get_mut("metadata")?.as_object_mut()?;
            for k in [
                "resourceVersion",
                "uid",
                "creationTimestamp",
                "generation",
                "managedFields",
            ] {
                meta.remove(k);
            }
            let ann = meta.entry("annotations").or_insert_with(|| json!({}));
            ann.as_object_mut()?.insert(SEQ_KEY.into(), json!(HOLE));
            let text = serde_json::to_string(&o).ok()?;
            let (head, tail) = text.split_once(HOLE)?;
            Some(Template {
                head: head.to_string(),
                tail: tail.to_string(),
            })
        })
        .collect()
}

/// What one paced run sent.
#[derive(Debug, Default)]
pub struct ApplyRun {
    /// First sequence number.
    pub first_seq: u64,
    /// Send instant (ns since the bench's base) of change `first_seq + i`.
    pub sent_ns: Vec<u64>,
    /// `/sim/apply` requests made.
    pub requests: u64,
    /// Failed requests and the first failure.
    pub errors: u64,
    /// First failure text.
    pub first_error: Option<String>,
    /// From the first send to the last answer.
    pub elapsed: Duration,
}

impl ApplyRun {
    /// Changes per second actually applied.
    pub fn achieved_rate(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.sent_ns.len() as f64 / secs
        } else {
            0.0
        }
    }
}

/// Applies `count` changes at `rate` per second: change `seq` modifies template
/// `seq % templates.len()`. Changes that fell behind schedule go out together (≤ [`MAX_BATCH`]).
pub fn apply_paced(
    sim: SocketAddr,
    templates: &[Template],
    first_seq: u64,
    count: usize,
    rate: f64,
    base: Instant,
) -> ApplyRun {
    let mut run = ApplyRun {
        first_seq,
        sent_ns: Vec::with_capacity(count),
        ..ApplyRun::default()
    };
    if templates.is_empty() || rate <= 0.0 {
        run.first_error = Some("nothing to apply".into());
        return run;
    }
    let mut client = Client::new(sim);
    let start = Instant::now();
    let mut body = Vec::with_capacity(MAX_BATCH * 4096);
    let mut sent = 0usize;
    while sent < count {
        let due = ((start.elapsed().as_secs_f64() * rate) as usize + 1).min(count);
        if due <= sent {
            let next = start + Duration::from_secs_f64(sent as f64 / rate);
            if let Some(wait) = next.checked_duration_since(Instant::now()) {
                thread::sleep(wait);
            }
            continue;
        }
        let n = (due - sent).min(MAX_BATCH);
        body.clear();
        if n > 1 {
            body.push(b'[');
        }
        for i in 0..n {
            if i > 0 {
                body.push(b',');
            }
            let seq = first_seq + (sent + i) as u64;
            templates[seq as usize % templates.len()].render(seq, &mut body);
        }
        if n > 1 {
            body.push(b']');
        }
        let ts = base.elapsed().as_nanos() as u64;
        run.sent_ns.extend(std::iter::repeat_n(ts, n));
        run.requests += 1;
        match client.request("POST", "/sim/apply", &body) {
            Ok(r) if r.code < 300 => {}
            Ok(r) => {
                run.errors += 1;
                run.first_error.get_or_insert_with(|| {
                    format!("HTTP {}: {}", r.code, String::from_utf8_lossy(&r.body))
                });
            }
            Err(e) => {
                run.errors += 1;
                run.first_error.get_or_insert_with(|| e.to_string());
            }
        }
        sent += n;
    }
    run.elapsed = start.elapsed();
    run
}
