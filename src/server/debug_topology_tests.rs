//! `/debug/topology` answers: query and path checks, JSON and text over a loaded cache.

use serde_json::Value;

use super::*;
use crate::cache::collection::Retention;
use crate::cache::store::test_support::texts;
use crate::cache::store::{Settings, State};
use crate::cache::topology::fixtures::*;
use crate::k8s::Resource;

fn loaded_writer() -> WriterHandle {
    let f = fixture_f();
    let mut st = State::new(
        Settings {
            hostname: "h".into(),
            wrapper_in_cluster: true,
            retention: Retention::for_queue(10),
        },
        1,
    );
    st.apply_list(Resource::Nodes, texts(&f.node_objects()), 0);
    st.apply_list(Resource::Services, texts(&f.services), 0);
    st.apply_list(Resource::Endpoints, texts(&f.endpoints), 0);
    st.apply_list(Resource::SlicesV1, texts(&[]), 0);
    WriterHandle::started(st)
}

fn status(answer: (u16, &'static str, String), code: u16) -> Value {
    assert_eq!(answer.0, code, "{}", answer.2);
    assert_eq!(answer.1, JSON);
    let v: Value = serde_json::from_str(&answer.2).expect("JSON Status");
    assert_eq!(
        (v["kind"].as_str(), v["code"].as_u64()),
        (Some("Status"), Some(u64::from(code)))
    );
    v
}

#[test]
fn options_are_checked() {
    let ok = |q: &str| Options::parse(q).expect(q);
    assert_eq!(
        ok(""),
        Options {
            format: Format::Json,
            limit: DEFAULT_LIMIT
        }
    );
    assert_eq!(
        ok("format=text&limit=7"),
        Options {
            format: Format::Text,
            limit: 7
        }
    );
    assert_eq!(
        ok("format=text&format=bogus").format,
        Format::Text,
        "first wins"
    );
    assert_eq!(ok("limit=5000").limit, MAX_LIMIT);
    for bad in [
        "format=yaml",
        "limit=0",
        "limit=5001",
        "limit=-1",
        "limit=x",
        "verbose=1",
        "format=%zz",
        "a;b",
    ] {
        assert_eq!(Options::parse(bad).map_err(|e| e.code), Err(400), "{bad}");
    }
}

#[test]
fn paths_are_checked() {
    assert_eq!(target("/debug/topology").map_err(|e| e.code), Ok(None));
    assert_eq!(target("/debug/topology/").map_err(|e| e.code), Ok(None));
    assert_eq!(
        target("/debug/topology/default/web").map_err(|e| e.code),
        Ok(Some(ObjectKey::new("default", "web")))
    );
    assert_eq!(
        target("/debug/topology/de%66ault/web").map_err(|e| e.code),
        Ok(Some(ObjectKey::new("default", "web")))
    );
    for (path, code) in [
        ("/debug/topology/default", 404),
        ("/debug/topology/default/web/x", 404),
        ("/debug/topology/default/web/", 404),
        ("/debug/topologyx", 404),
        ("/debug/topology/default/%zz", 400),
        ("/debug/topology/default/a%2Fb", 400),
        ("/debug/topology//web", 400),
        ("/debug/topology/default/%ff", 400),
    ] {
        assert_eq!(target(path).map_err(|e| e.code), Err(code), "{path}");
    }
    let long = format!("/debug/topology/default/{}", "a".repeat(254));
    assert_eq!(target(&long).map_err(|e| e.code), Err(400));
}

#[test]
fn json_answers() {
    let writer = loaded_writer();
    let (code, ct, body) = answer("/debug/topology", "", &writer);
    assert_eq!((code, ct), (200, JSON));
    let v: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(v["services"][0]["name"], "s");
    assert_eq!(v["services"][0]["endpoints"]["kept"], 2);
    assert_eq!(v["services"][0]["localValues"]["zone"], "a");
    let (code, _, body) = answer("/debug/topology/default/s", "", &writer);
    assert_eq!(code, 200);
    let v: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(v["objects"][0]["endpoints"][2]["reason"], "NoKeyMatches");
    assert_eq!(v["objects"][0]["endpoints"][2]["nodeValues"]["zone"], "b");
    let v = status(answer("/debug/topology/default/nope", "", &writer), 404);
    assert_eq!(v["reason"], "NotFound");
    assert!(
        v["message"].as_str().unwrap_or("").contains("default/nope"),
        "{v}"
    );
    status(
        answer("/debug/topology/default/s", "format=xml", &writer),
        400,
    );
    status(answer("/debug/topology/a/b/c", "format=text", &writer), 404);
}

#[test]
fn text_answers_are_aligned_tables() {
    let writer = loaded_writer();
    let (code, ct, body) = answer("/debug/topology/default/s", "format=text", &writer);
    assert_eq!((code, ct), (200, TEXT));
    assert!(
        body.starts_with("Service default/s: topology Service, keys zone (from topologyKeys)\n"),
        "{body}"
    );
    let lines: Vec<&str> = body.lines().collect();
    let head = lines
        .iter()
        .position(|l| l.starts_with("OBJECT"))
        .expect("header");
    let col = lines[head].find("VERDICT").expect("VERDICT column");
    for row in &lines[head + 1..] {
        assert!(row.starts_with("endpoints/s"), "{row}");
        assert!(
            row[col..].starts_with("kept") || row[col..].starts_with("pruned"),
            "{row}"
        );
    }
    assert_eq!(lines.len() - head - 1, 6);
    let (_, _, body) = answer("/debug/topology/default/s", "format=text&limit=2", &writer);
    assert!(
        body.contains("(truncated: 2 endpoint rows listed, 4 more not shown"),
        "{body}"
    );
    let (_, _, body) = answer("/debug/topology", "format=text", &writer);
    assert!(body.contains("NAMESPACE  SERVICE"), "{body}");
    assert!(
        body.lines()
            .any(|l| l.starts_with("default    s") && l.contains("2/6")),
        "{body}"
    );
}

#[test]
fn table_cells_are_cleaned_and_cut() {
    let rows = vec![vec![
        "a\u{1b}[31m".to_string(),
        "x".repeat(100),
        "last\ncell".to_string(),
    ]];
    let t = table(&["A", "B", "C"], &rows);
    assert!(!t.contains('\u{1b}') && t.contains("\\u{1b}"), "{t}");
    assert_eq!(t.lines().count(), 2, "no raw newline from a cell: {t}");
    assert!(t.contains(&format!("{}…", "x".repeat(MAX_CELL - 1))), "{t}");
    assert_eq!(cut("short"), "short");
}

/// A writer busy past the debug pages' wait (a long relist): the page answers a 503 `Status`
/// saying so, instead of holding its client.
#[test]
fn a_busy_writer_gets_a_503_status_not_a_wait() {
    let writer = loaded_writer();
    let busy = writer.hold();
    let v = status(answer("/debug/topology/default/s", "", &writer), 503);
    drop(busy);
    assert_eq!(v["kind"], "Status");
    assert!(
        v["message"]
            .as_str()
            .unwrap_or("")
            .contains("writer is busy"),
        "{v}"
    );
    // Released, the same page answers.
    assert_eq!(answer("/debug/topology/default/s", "", &writer).0, 200);
}
