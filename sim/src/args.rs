//! Command-line flags of `grid-wrapper-sim` (hand-parsed: `--flag value` or `--flag=value`) and
//! the `--help` text. Validation only; nothing here touches the system.

use crate::fault::{TooLarge, MAX_REFUSE_SECS};
use crate::fixture::{Fixture, ScaleParams, Shape};
use crate::load::MAX_LOAD_SECS;
use crate::routes::SliceVersions;
use crate::store::DEFAULT_HISTORY;
use std::path::PathBuf;

/// `--help` text.
pub const HELP: &str = "\
grid-wrapper-sim: a simulated Kubernetes apiserver for grid-wrapper demos, tests and benchmarks

USAGE: grid-wrapper-sim [FLAGS]

  --listen ADDR              bind address (default 127.0.0.1:0); prints
                             'grid-wrapper-sim listening on http(s)://127.0.0.1:<port>'.
                             Repeat it to serve the same store (same objects, same RVs) on
                             several addresses, like apiservers of one cluster: one such line
                             per address, in order, all written before serving
  --fixture demo|empty|scale initial objects (default demo)
  --nodes N                  scale: nodes (default 500)
  --services N               scale: services, one Endpoints + one EndpointSlice each (default 2000)
  --zones N                  scale: zones (default 20)
  --endpoints-per-slice N    scale: endpoints per slice (default 10)
  --shape flat|real          scale: how the objects look (default flat, or the environment's
                             GRID_WRAPPER_SIM_SHAPE; a flag wins). flat: minimal objects (a
                             Node of about 1 KB). real: the same cluster with each object as
                             its owner writes it: kubelet-shaped Nodes of 10-15 KB (labels,
                             CNI/CSI annotations, managedFields, capacity, five conditions,
                             nodeInfo, 30-50 images with digests), EndpointSlices and
                             Endpoints as their controllers write them (generateName, owner
                             reference, trigger-time annotation, targetRef with uid, zone,
                             managedFields), Services with managedFields. Seeded: the same
                             objects every run. Other fixtures ignore it
  --list-bytes               load the fixture, print the bytes of each kind's JSON LIST (as
                             served without a selector, before gzip) on one line, and exit
                             without listening
  --slice-version v1|v1beta1|both
                             EndpointSlice versions served (default v1); others 404
  --kube-version 1.N         the Kubernetes version GET /version reports (default 1.28;
                             gitVersion v1.N.0-sim)
  --no-servicecidrs          serve no ServiceCIDRs (404, as an apiserver older than 1.33);
                             by default networking.k8s.io/v1 servicecidrs are served
                             (v1beta1 is 404, as on a 1.33+ apiserver's defaults)
  --no-protobuf              answer lists, watches and GETs in JSON whatever the Accept (as
                             an upstream that does not serve protobuf); by default a client
                             preferring application/vnd.kubernetes.protobuf gets protobuf
  --history N                events kept for watch resumption (default 1000)
  --bookmark-interval SECS   BOOKMARK period for allowWatchBookmarks watches (default 5; 0 = never)
  --tls-cert FILE --tls-key FILE [--client-ca FILE [--client-cert-optional]]
                             serve HTTPS (client certificate required with --client-ca)
  --client-cert-optional     with --client-ca: a client certificate is verified when given but
                             not required, and authenticates a request as an apiserver's
                             --client-ca-file does (with --token: the token or a certificate);
                             each recorded request says whether its connection presented one
  --token T                  require 'Authorization: Bearer T' (not on /sim/)
  --too-large http|event|silent
                             answer a resourceVersion above the current one from the start
                             (watch: HTTP 504, one ERROR 504 event, or silent: accepted, and
                             nothing sent, no bookmark either, until the counter passes it, as a
                             real apiserver's watch cache does; LIST: HTTP 504), and the default
                             form of /sim/reset-rv (default: off until a reset, future RVs get
                             410; reset form http)
  --start-refusing S         print the listening line, then refuse connections for S seconds
                             (1..=600) before serving, on every address; use fixed --listen ports
  --max-in-flight N          load like an apiserver's APF: 429 TooManyRequests with Retry-After
                             (and Status details.retryAfterSeconds) when N short requests are
                             already in flight (watches are not counted, but a watch start is
                             refused while at the limit); default off. Also POST /sim/load
  --max-per-second N         429 likewise when more than N requests arrived this second
  --retry-after S            the Retry-After of those 429s and 503s (default 1)
  -h, --help                 this text

The listener sets SO_REUSEADDR: a restarted or re-listening simulator can take the same
--listen port at once.

CONTROL API (JSON, never recorded; on any address): POST /sim/apply, /sim/delete,
/sim/label-node, /sim/pad-node {\"name\", \"bytes\"} (a Node grown by an image name that
long, to test object size bounds), /sim/compact, /sim/close-watches, /sim/requests/clear (and
the served log); GET /sim/requests
(each with the 'listen' address it arrived on and 'clientCertificate': whether its connection
presented one), /sim/served (each list and watch served from
the store: verb, path, query, acceptEncoding, contentEncoding, bytes as sent, plainBytes;
a list over 128 KiB is gzip'd, as by an apiserver, when its Accept-Encoding names gzip),
/sim/state (resourceVersion, horizon, counts,
openWatches, served {lists, watches, gets, listBytes, watchBytes, listPlainBytes, gzippedLists}, recorded, too_large, edge_health_polls, refusals, and listens: per
address {listen, refusing, refusals, openWatches, requests}). GET /readyz, /livez and
/healthz answer 200 'ok' (not recorded). Fault injection:
  POST /sim/reset-rv {\"rv\": N, \"too_large\": \"http\"|\"event\"|\"silent\",
                     \"watches\": \"end\"|\"cut\"|\"keep\"}
      the upstream restarts its RV counter at N (a control plane restored from an older etcd
      state): objects are re-stamped N+1..=N+k in key order (k objects; N >= 1 and N+k below
      the current RV, else 400), history is cleared (horizon = new current), open watches end
      (end, the default), are cut without their terminating chunk (cut) or stay open (keep),
      and from then on a numeric resourceVersion above the current one is 'too large': a
      watch gets HTTP 504 (http) or 200 + one ERROR event (event) with Status {code 504,
      reason Timeout, message 'Too large resource version: R, current: C',
      details.causes[0].reason ResourceVersionTooLarge, retryAfterSeconds 1}, or 200 and
      nothing until the counter passes R (silent: what a real apiserver does; no bookmark
      either, and none on a kept watch); a LIST gets that HTTP 504. Below the horizon: 410
      as before. Answers {previous, resourceVersion, rv, horizon, restamped, too_large,
      watches, closed, epoch}.
  POST /sim/edge-health {\"status\": 200, \"body\": <JSON, or a string sent verbatim>}
      sets what GET /sim/edge-health answers (default 200 {}); status 200..=599 except
      204/304. GET /sim/edge-health is counted in /sim/state edge_health_polls.
  POST /sim/refuse {\"seconds\": S, \"listen\": \"HOST:PORT\"}   (S in 1..=600; listen optional)
      closes the listener of that --listen address, or every listener without 'listen'
      (new connections: ECONNREFUSED), cuts its open connections (watches end without
      their last chunk, keep-alive connections close), answers {refusing, listen (the
      first refused), listens, closedConnections, closedWatches} and closes; after S
      seconds it listens again on the same address and port with the same store. The
      other addresses keep serving. 400 for an unknown address, 409 if already refusing.
  POST /sim/load {\"maxInFlight\": N|null, \"maxPerSecond\": N|null, \"next\": N,
                  \"retryAfter\": S, \"shuttingDown\": S}   (every field optional)
      a loaded apiserver: 429 TooManyRequests + Retry-After S (Status with
      details.retryAfterSeconds S) over maxInFlight short requests in flight, over
      maxPerSecond requests this second, or to the next N requests; 503 ServiceUnavailable +
      Retry-After to every request for shuttingDown seconds (0 ends it). /sim/ is never
      refused. GET /sim/load: the settings, inFlight, totals {requests, throttled,
      unavailable} and perSecond rows [unix second, requests, throttled, unavailable]
      (perSecondColumns), the last 3600 seconds.
";

/// Most `--listen` addresses.
pub const MAX_LISTEN: usize = 8;

/// Parsed flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flags {
    /// `--listen`, in order (at least one).
    pub listen: Vec<String>,
    /// `--fixture` (with scale sizes).
    pub fixture: Fixture,
    /// `--slice-version`.
    pub slices: SliceVersions,
    /// `--kube-version`: the minor version `GET /version` reports (major 1).
    pub kube_minor: u32,
    /// Not `--no-servicecidrs`: networking.k8s.io/v1 servicecidrs are served.
    pub cidrs: bool,
    /// Not `--no-protobuf`: protobuf is served to clients that prefer it.
    pub protobuf: bool,
    /// `--history`.
    pub history: usize,
    /// `--bookmark-interval` in seconds (0 = never).
    pub bookmark_secs: u64,
    /// `--tls-cert`.
    pub tls_cert: Option<PathBuf>,
    /// `--tls-key`.
    pub tls_key: Option<PathBuf>,
    /// `--client-ca`.
    pub client_ca: Option<PathBuf>,
    /// `--client-cert-optional`.
    pub client_cert_optional: bool,
    /// `--token`.
    pub token: Option<String>,
    /// `--too-large`.
    pub too_large: Option<TooLarge>,
    /// `--start-refusing`, in seconds.
    pub start_refusing: Option<u64>,
    /// `--max-in-flight`.
    pub max_in_flight: Option<usize>,
    /// `--max-per-second`.
    pub max_per_second: Option<u64>,
    /// `--retry-after`, in seconds.
    pub retry_after: u64,
    /// `--list-bytes`: print the fixture's list sizes and exit.
    pub list_bytes: bool,
}

impl Default for Flags {
    fn default() -> Self {
        Flags {
            listen: vec!["127.0.0.1:0".into()],
            fixture: Fixture::Demo,
            slices: SliceVersions::V1,
            kube_minor: crate::api::DEFAULT_KUBE_MINOR,
            cidrs: true,
            protobuf: true,
            history: DEFAULT_HISTORY,
            bookmark_secs: 5,
            tls_cert: None,
            tls_key: None,
            client_ca: None,
            client_cert_optional: false,
            token: None,
            too_large: None,
            start_refusing: None,
            max_in_flight: None,
            max_per_second: None,
            retry_after: 1,
            list_bytes: false,
        }
    }
}

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Run with these flags.
    Run(Box<Flags>),
    /// Print [`HELP`] and exit 0.
    Help,
}

fn num<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("{flag}: not a valid number: {v:?}"))
}

/// Parses the arguments after the program name. Errors are messages for stderr.
pub fn parse(args: &[String]) -> Result<Parsed, String> {
    let mut f = Flags::default();
    let mut scale = ScaleParams::default();
    let mut fixture = "demo".to_string();
    let mut listen = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        if arg == "-h" || arg == "--help" {
            return Ok(Parsed::Help);
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((k, v)) if k.starts_with("--") => (k, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag {
            "--listen" => listen.push(value()?),
            "--fixture" => fixture = value()?,
            "--nodes" => scale.nodes = num(flag, &value()?)?,
            "--services" => scale.services = num(flag, &value()?)?,
            "--zones" => scale.zones = num(flag, &value()?)?,
            "--endpoints-per-slice" => scale.endpoints_per_slice = num(flag, &value()?)?,
            "--shape" => {
                let v = value()?;
                scale.shape = Shape::parse(&v)
                    .ok_or_else(|| format!("--shape: unknown {v:?} (flat or real)"))?;
            }
            "--list-bytes" => f.list_bytes = true,
            "--slice-version" => {
                f.slices = match value()?.as_str() {
                    "v1" => SliceVersions::V1,
                    "v1beta1" => SliceVersions::V1beta1,
                    "both" => SliceVersions::Both,
                    other => return Err(format!("--slice-version: unknown {other:?}")),
                }
            }
            "--kube-version" => {
                let v = value()?;
                f.kube_minor = v
                    .strip_prefix("1.")
                    .and_then(|m| m.parse().ok())
                    .ok_or_else(|| format!("--kube-version: {v:?} is not 1.N"))?;
            }
            "--no-servicecidrs" => f.cidrs = false,
            "--no-protobuf" => f.protobuf = false,
            "--history" => f.history = num(flag, &value()?)?,
            "--bookmark-interval" => f.bookmark_secs = num(flag, &value()?)?,
            "--tls-cert" => f.tls_cert = Some(value()?.into()),
            "--tls-key" => f.tls_key = Some(value()?.into()),
            "--client-ca" => f.client_ca = Some(value()?.into()),
            "--client-cert-optional" => f.client_cert_optional = true,
            "--token" => f.token = Some(value()?),
            "--too-large" => {
                let v = value()?;
                f.too_large = Some(TooLarge::parse(&v).ok_or_else(|| {
                    format!("--too-large: unknown {v:?} (http, event or silent)")
                })?);
            }
            "--max-in-flight" => f.max_in_flight = Some(num(flag, &value()?)?),
            "--max-per-second" => f.max_per_second = Some(num(flag, &value()?)?),
            "--retry-after" => {
                f.retry_after = num(flag, &value()?)?;
                if f.retry_after > MAX_LOAD_SECS {
                    return Err(format!("--retry-after must be at most {MAX_LOAD_SECS}"));
                }
            }
            "--start-refusing" => {
                let secs: u64 = num(flag, &value()?)?;
                if !(1..=MAX_REFUSE_SECS).contains(&secs) {
                    return Err(format!("--start-refusing must be in 1..={MAX_REFUSE_SECS}"));
                }
                f.start_refusing = Some(secs);
            }
            other => return Err(format!("unknown argument {other:?} (see --help)")),
        }
    }
    if !listen.is_empty() {
        f.listen = listen;
    }
    if f.listen.len() > MAX_LISTEN {
        return Err(format!("--listen: at most {MAX_LISTEN} addresses"));
    }
    f.fixture = match fixture.as_str() {
        "demo" => Fixture::Demo,
        "empty" => Fixture::Empty,
        "scale" => Fixture::Scale(scale),
        other => return Err(format!("--fixture: unknown {other:?}")),
    };
    if f.tls_cert.is_some() != f.tls_key.is_some() {
        return Err("--tls-cert and --tls-key go together".into());
    }
    if f.client_ca.is_some() && f.tls_cert.is_none() {
        return Err("--client-ca needs --tls-cert and --tls-key".into());
    }
    if f.client_cert_optional && f.client_ca.is_none() {
        return Err("--client-cert-optional needs --client-ca".into());
    }
    if f.history == 0 {
        return Err("--history must be at least 1".into());
    }
    Ok(Parsed::Run(Box::new(f)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Flags, String> {
        let v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        match parse(&v)? {
            Parsed::Run(f) => Ok(*f),
            Parsed::Help => Err("help".into()),
        }
    }

    #[test]
    fn defaults_and_values() {
        assert_eq!(run(&[]), Ok(Flags::default()));
        let f = run(&[
            "--listen=127.0.0.1:8080",
            "--fixture",
            "scale",
            "--nodes",
            "3",
            "--zones=2",
            "--slice-version",
            "both",
            "--history",
            "5",
            "--bookmark-interval",
            "0",
            "--token",
            "t0k",
            "--too-large=event",
            "--start-refusing",
            "3",
            "--kube-version=1.35",
            "--shape",
            "real",
        ])
        .expect("parse");
        assert_eq!(f.kube_minor, 35);
        assert_eq!(f.listen, ["127.0.0.1:8080"]);
        let two = run(&["--listen", "127.0.0.1:1", "--listen=127.0.0.1:2"]).expect("two");
        assert_eq!(two.listen, ["127.0.0.1:1", "127.0.0.1:2"]);
        assert_eq!(
            f.fixture,
            Fixture::Scale(ScaleParams {
                nodes: 3,
                zones: 2,
                shape: Shape::Real,
                ..ScaleParams::default()
            })
        );
        let flat = run(&[
            "--shape=real",
            "--fixture=scale",
            "--shape=flat",
            "--list-bytes",
        ])
        .expect("flat");
        assert_eq!(flat.fixture, Fixture::Scale(ScaleParams::default()));
        assert!(flat.list_bytes);
        assert!(f.protobuf, "protobuf is served by default");
        assert!(!run(&["--no-protobuf"]).expect("no-protobuf").protobuf);
        assert_eq!(f.slices, SliceVersions::Both);
        assert_eq!((f.history, f.bookmark_secs), (5, 0));
        assert_eq!(f.token.as_deref(), Some("t0k"));
        assert_eq!(f.too_large, Some(TooLarge::Event));
        assert_eq!(f.start_refusing, Some(3));
    }

    #[test]
    fn errors_and_help() {
        for bad in [
            &["--nodes", "x"][..],
            &["--fixture", "big"],
            &["--slice-version", "v2"],
            &["--shape", "round"],
            &["--kube-version", "2.0"],
            &["--kube-version", "1.x"],
            &["--tls-cert", "a"],
            &["--client-ca", "a"],
            &[
                "--tls-cert",
                "a",
                "--tls-key",
                "b",
                "--client-cert-optional",
            ],
            &["--history", "0"],
            &["--too-large", "gone"],
            &["--start-refusing", "0"],
            &["--start-refusing", "601"],
            &["--listen"],
            &["--bogus"],
        ] {
            assert!(run(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse(&["--help".to_string()]), Ok(Parsed::Help));
        let nine: Vec<String> = (1..=9).map(|p| format!("--listen=127.0.0.1:{p}")).collect();
        assert!(parse(&nine).is_err(), "at most 8 addresses");
    }
}
