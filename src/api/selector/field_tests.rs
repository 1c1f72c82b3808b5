//! Table-driven tests for field selectors.

use super::*;

const SERVICES: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "spec.clusterIP",
    "spec.type",
];

/// An object as `field=value` pairs (test helper; values may not contain `,`).
fn getter(spec: &'static str) -> impl Fn(&str) -> Option<&'static str> {
    move |field: &str| {
        spec.split(',')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == field)
            .map(|(_, v)| v)
    }
}

#[test]
fn valid_selectors_match_as_apimachinery() {
    // (selector, object fields, expected match)
    let cases: &[(&str, &'static str, bool)] = &[
        ("", "", true),
        ("", "metadata.name=x", true),
        (",", "metadata.name=x", true),
        ("metadata.name=edge-1", "metadata.name=edge-1", true),
        ("metadata.name=edge-1", "metadata.name=edge-2", false),
        ("metadata.name=edge-1", "", false),
        ("metadata.name==edge-1", "metadata.name=edge-1", true),
        ("metadata.name!=edge-1", "metadata.name=edge-2", true),
        ("metadata.name!=edge-1", "metadata.name=edge-1", false),
        ("spec.clusterIP!=None", "spec.clusterIP=10.0.0.1", true),
        ("spec.clusterIP!=None", "spec.clusterIP=None", false),
        ("spec.clusterIP!=None", "", true),
        ("spec.clusterIP=", "", true),
        ("spec.clusterIP=", "spec.clusterIP=1.2.3.4", false),
        ("spec.clusterIP!=", "", false),
        (
            "metadata.namespace=default,metadata.name=web",
            "metadata.namespace=default,metadata.name=web",
            true,
        ),
        (
            "metadata.namespace=default,metadata.name=web",
            "metadata.namespace=kube-system,metadata.name=web",
            false,
        ),
        (
            "metadata.name=a,,metadata.namespace=b",
            "metadata.name=a,metadata.namespace=b",
            true,
        ),
        ("metadata.name=a,metadata.name=b", "metadata.name=a", false),
        (
            "spec.type!=ClusterIP,spec.type!=NodePort",
            "spec.type=LoadBalancer",
            true,
        ),
        (
            "spec.type!=ClusterIP,spec.type!=NodePort",
            "spec.type=NodePort",
            false,
        ),
        // Values are taken literally: no trimming.
        ("metadata.name= a", "metadata.name= a", true),
        ("metadata.name= a", "metadata.name=a", false),
        // `!` inside a value after `=`.
        ("metadata.name=!x", "metadata.name=!x", true),
    ];
    for (sel, obj, want) in cases {
        let s = match FieldSelector::parse(sel, SERVICES) {
            Ok(s) => s,
            Err(e) => panic!("{sel:?} should parse: {e}"),
        };
        assert_eq!(s.matches(getter(obj)), *want, "{sel:?} against {obj:?}");
    }
}

#[test]
fn escapes_are_decoded() {
    // (selector, expected unescaped value of metadata.name)
    let cases: &[(&str, &str)] = &[
        (r"metadata.name=a\,b", "a,b"),
        (r"metadata.name=a\=b", "a=b"),
        (r"metadata.name=a\\b", r"a\b"),
        (r"metadata.name=\\\,\=", r"\,="),
        ("metadata.name=ünï", "ünï"),
    ];
    for (sel, want) in cases {
        let s = FieldSelector::parse(sel, SERVICES).expect(sel);
        assert_eq!(s.required("metadata.name"), Some(*want), "{sel:?}");
        let want = *want;
        assert!(s.matches(|_| Some(want)), "{sel:?}");
    }
    // An escaped comma does not split terms.
    let s = FieldSelector::parse(r"metadata.name=a\,spec.type\=b", SERVICES).expect("parses");
    assert_eq!(s.required("metadata.name"), Some("a,spec.type=b"));
    assert_eq!(s.required("spec.type"), None);
}

#[derive(Debug, PartialEq)]
enum Fam {
    NoOp,
    Escape,
    Unescaped,
    Unsupported,
}

#[test]
fn invalid_selectors_are_rejected() {
    use Fam::*;
    let cases: &[(&str, Fam)] = &[
        ("metadata.name", NoOp),
        ("metadata.name=a,b", NoOp),
        ("metadata.name!a", NoOp),
        (r"metadata.name=a\n", Escape),
        (r"metadata.name=a\", Escape),
        (r"metadata.name=\ a", Escape),
        ("metadata.name=a=b", Unescaped),
        ("metadata.name===b", Unescaped),
        ("metadata.name!==b", Unescaped),
        (r"metadata.name=a\,spec.type=b", Unescaped),
        ("status.phase=Running", Unsupported),
        ("=x", Unsupported),
        ("metadata.name =x", Unsupported),
        ("metadata.labels=x", Unsupported),
        ("metadata.name=a,spec.nodeName=b", Unsupported),
    ];
    for (sel, fam) in cases {
        let e = match FieldSelector::parse(sel, SERVICES) {
            Ok(s) => panic!("{sel:?} should fail, parsed as {s:?}"),
            Err(e) => e,
        };
        let got = match e.kind() {
            SelectorErrorKind::NoOperator { .. } => NoOp,
            SelectorErrorKind::InvalidEscape { .. } => Escape,
            SelectorErrorKind::UnescapedChar { .. } => Unescaped,
            SelectorErrorKind::UnsupportedField { .. } => Unsupported,
            other => panic!("{sel:?}: unexpected kind {other:?}"),
        };
        assert_eq!(&got, fam, "{sel:?}: {e}");
        assert_eq!(e.lang(), SelectorLang::Field);
    }
}

#[test]
fn supported_fields_depend_on_the_resource() {
    let nodes: &[&str] = &["metadata.name"];
    assert!(FieldSelector::parse("metadata.name=edge-1", nodes).is_ok());
    let e = FieldSelector::parse("spec.clusterIP!=None", nodes).expect_err("nodes");
    assert_eq!(e.to_string(), "field label not supported: spec.clusterIP");
    let e = FieldSelector::parse("metadata.namespace=x", nodes).expect_err("nodes");
    assert_eq!(
        e.to_string(),
        "field label not supported: metadata.namespace"
    );
    assert!(FieldSelector::parse("spec.clusterIP!=None", SERVICES).is_ok());
}

#[test]
fn error_messages_name_the_bad_input() {
    let cases: &[(&str, &str)] = &[
        (r"metadata.name=a\n", r"invalid escape sequence: \n"),
        (r"metadata.name=a\n", r#""metadata.name=a\\n""#),
        ("metadata.name", r#"can't understand "metadata.name""#),
        ("metadata.name=a=b", "unescaped character in value: '='"),
    ];
    for (sel, want) in cases {
        let msg = FieldSelector::parse(sel, SERVICES)
            .expect_err(sel)
            .to_string();
        assert!(msg.contains(want), "{sel:?}: {msg:?} lacks {want:?}");
    }
}

#[test]
fn required_reports_equality_terms_only() {
    let s = FieldSelector::parse("metadata.name=edge-1", &["metadata.name"]).expect("parses");
    assert_eq!(s.required("metadata.name"), Some("edge-1"));
    assert_eq!(s.required("metadata.namespace"), None);
    let s = FieldSelector::parse("metadata.name==edge-1", &["metadata.name"]).expect("parses");
    assert_eq!(s.required("metadata.name"), Some("edge-1"));
    let s = FieldSelector::parse("metadata.name!=edge-1", &["metadata.name"]).expect("parses");
    assert_eq!(s.required("metadata.name"), None);
    let s = FieldSelector::parse("metadata.name=", &["metadata.name"]).expect("parses");
    assert_eq!(s.required("metadata.name"), Some(""));
}

#[test]
fn empty_selectors_are_empty() {
    for sel in ["", ",", ",,"] {
        let s = FieldSelector::parse(sel, &[]).expect("empty parses");
        assert!(s.is_empty(), "{sel:?}");
        assert!(s.matches(|_| None));
    }
    assert_eq!(
        FieldSelector::default(),
        FieldSelector::parse("", &[]).expect("empty")
    );
    let s = FieldSelector::parse("metadata.name=x", &["metadata.name"]).expect("parses");
    assert!(!s.is_empty());
}
