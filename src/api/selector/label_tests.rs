//! Table-driven tests for label selectors.

use super::*;

/// `"a=1,b=2"` → a label map (test helper; `""` = no labels).
fn labels(spec: &str) -> BTreeMap<String, String> {
    spec.split(',')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (k.to_string(), v.to_string())
        })
        .collect()
}

const KUBE_PROXY: &str =
    "!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name";

#[test]
fn valid_selectors_match_as_apimachinery() {
    // (selector, labels, expected match)
    let cases: &[(&str, &str, bool)] = &[
        ("", "", true),
        ("", "a=b", true),
        ("   ", "a=b", true),
        (KUBE_PROXY, "", true),
        (KUBE_PROXY, "app=web", true),
        (KUBE_PROXY, "service.kubernetes.io/headless=", false),
        (
            KUBE_PROXY,
            "service.kubernetes.io/service-proxy-name=cilium",
            false,
        ),
        (KUBE_PROXY, "service.kubernetes.io/headlessx=1", true),
        ("a", "a=", true),
        ("a", "a=x", true),
        ("a", "b=x", false),
        ("!a", "b=x", true),
        ("!a", "a=", false),
        ("a=b", "a=b", true),
        ("a=b", "a=c", false),
        ("a=b", "", false),
        ("a==b", "a=b", true),
        ("a==b", "a=c", false),
        ("a!=b", "a=c", true),
        ("a!=b", "a=b", false),
        ("a!=b", "", true),
        ("a=", "a=", true),
        ("a=", "a=x", false),
        ("a=", "", false),
        ("a!=", "", true),
        ("a!=", "a=", false),
        ("a=,b", "a=,b=1", true),
        ("a==", "a=", true),
        ("a in (x,y)", "a=y", true),
        ("a in (x,y)", "a=z", false),
        ("a in (x,y)", "", false),
        ("a notin (x,y)", "a=z", true),
        ("a notin (x,y)", "a=x", false),
        ("a notin (x,y)", "", true),
        ("a in (x)", "a=x", true),
        ("a in (x,x)", "a=x", true),
        ("a in (,x)", "a=", true),
        ("a in (x,)", "a=", true),
        ("a in (x,,y)", "a=", true),
        ("a in (x,,y)", "a=y", true),
        ("a in (,)", "a=", true),
        ("a in (x,y)", "a=", false),
        ("a notin (x,,y)", "a=", false),
        // Keywords are only operators in operator position.
        ("in in (in)", "in=in", true),
        ("notin notin (notin,in)", "notin=x", true),
        ("in", "in=1", true),
        ("a=in", "a=in", true),
        // Whitespace tolerated around every token.
        ("  a = b ,  c  ", "a=b,c=1", true),
        ("a\tin\t(\tx\t,\ty\t)", "a=x", true),
        ("a in(x,y)", "a=x", true),
        ("a notin(x)", "a=y", true),
        ("! a", "", true),
        ("a\r\n=\nb", "a=b", true),
        // AND of several requirements.
        ("a=1,b=2", "a=1,b=2", true),
        ("a=1,b=2", "a=1,b=3", false),
        ("a=1,!b", "a=1", true),
        ("a=1,!b", "a=1,b=", false),
        ("a=1,a=2", "a=1", false),
        // Integer comparisons.
        ("a>5", "a=6", true),
        ("a>5", "a=5", false),
        ("a>5", "a=x", false),
        ("a>5", "", false),
        ("a<5", "a=4", true),
        ("a<5", "a=10", false),
        // Qualified keys and values.
        (
            "example.com/My_Name-1.x=Val_1.2-3",
            "example.com/My_Name-1.x=Val_1.2-3",
            true,
        ),
        ("k8s.io/a", "k8s.io/a=1", true),
        ("a.b-c.d/e", "a.b-c.d/e=1", true),
        ("1=2", "1=2", true),
        (&"k".repeat(63), "", false),
    ];
    for (sel, lbls, want) in cases {
        let parsed = LabelSelector::parse(sel);
        let s = match parsed {
            Ok(s) => s,
            Err(e) => panic!("{sel:?} should parse: {e}"),
        };
        assert_eq!(s.matches(&labels(lbls)), *want, "{sel:?} against {lbls:?}");
    }
}

#[test]
fn empty_selectors_are_empty() {
    for sel in ["", " ", "\t\n"] {
        let s = LabelSelector::parse(sel).expect("blank parses");
        assert!(s.is_empty(), "{sel:?}");
        assert_eq!(s, LabelSelector::default());
    }
    assert!(!LabelSelector::parse("a").expect("parses").is_empty());
    assert!(LabelSelector::default().matches(&labels("x=y")));
}

#[test]
fn long_names_and_values_at_the_limit() {
    let name63 = format!("a{}", "b".repeat(62));
    let name64 = format!("a{}", "b".repeat(63));
    let prefix253 = format!("{}.io", "p".repeat(250));
    let prefix254 = format!("{}.io", "p".repeat(251));
    let ok = [
        name63.clone(),
        format!("{prefix253}/{name63}"),
        format!("a={name63}"),
        format!("a in ({name63})"),
    ];
    for sel in &ok {
        assert!(LabelSelector::parse(sel).is_ok(), "{sel}");
    }
    let bad = [
        name64.clone(),
        format!("{prefix254}/a"),
        format!("a={name64}"),
        format!("a notin (x,{name64})"),
    ];
    for sel in &bad {
        assert!(LabelSelector::parse(sel).is_err(), "{sel}");
    }
}

/// Which family an error belongs to (the tables check the family, not the wording).
#[derive(Debug, PartialEq)]
enum Fam {
    Syntax,
    Key,
    Value,
    EmptySet,
    NotInt,
}

fn family(e: &SelectorError) -> Fam {
    match e.kind() {
        SelectorErrorKind::Syntax { .. } => Fam::Syntax,
        SelectorErrorKind::InvalidKey { .. } => Fam::Key,
        SelectorErrorKind::InvalidValue { .. } => Fam::Value,
        SelectorErrorKind::EmptyValueSet { .. } => Fam::EmptySet,
        SelectorErrorKind::NotAnInteger { .. } => Fam::NotInt,
        other => panic!("unexpected label error kind {other:?}"),
    }
}

#[test]
fn invalid_selectors_are_rejected() {
    use Fam::*;
    let cases: &[(&str, Fam)] = &[
        ("a,,b", Syntax),
        (",a", Syntax),
        ("a,", Syntax),
        (",", Syntax),
        ("a b", Syntax),
        ("a=b c", Syntax),
        ("a=b=c", Syntax),
        ("a===", Syntax),
        ("a in (x", Syntax),
        ("a in (x,y", Syntax),
        ("a in (", Syntax),
        ("a in x", Syntax),
        ("a in (x))", Syntax),
        ("a in ((x)", Syntax),
        ("a in (x y)", Syntax),
        ("a in (=)", Syntax),
        ("a in", Syntax),
        ("a notin", Syntax),
        ("a in ()", EmptySet),
        ("a notin ()", EmptySet),
        ("a in ( )", EmptySet),
        ("!a=b", Syntax),
        ("!a in (b)", Syntax),
        ("!!a", Syntax),
        ("!", Syntax),
        ("!,a", Syntax),
        ("=a", Syntax),
        ("(a)", Syntax),
        (")", Syntax),
        ("a=(b)", Syntax),
        ("a!b", Syntax),
        ("a@b", Key),
        ("-a", Key),
        ("a-", Key),
        ("_a=b", Key),
        ("a/b/c", Key),
        ("/a", Key),
        ("a/", Key),
        ("Example.com/a", Key),
        ("exa_mple.com/a", Key),
        ("-example.com/a", Key),
        ("example..com/a", Key),
        ("ünï=x", Key),
        ("a=b@c", Value),
        ("a=-b", Value),
        ("a=b-", Value),
        ("a=b/c", Value),
        ("a in (x,-y)", Value),
        ("a!=ü", Value),
        ("a>b", NotInt),
        ("a<", NotInt),
        ("a>-1", Value),
        ("a>>1", Syntax),
        ("a<=1", Syntax),
    ];
    for (sel, fam) in cases {
        match LabelSelector::parse(sel) {
            Ok(s) => panic!("{sel:?} should fail, parsed as {s:?}"),
            Err(e) => {
                assert_eq!(&family(&e), fam, "{sel:?}: {e}");
                assert_eq!(e.lang(), SelectorLang::Label);
            }
        }
    }
}

#[test]
fn error_messages_name_the_bad_input() {
    let cases: &[(&str, &str)] = &[
        (
            "a,,b",
            r#"unable to parse label selector "a,,b": found ',', expected: identifier after ','"#,
        ),
        (
            "a in (x",
            r#"unable to parse label selector "a in (x": found 'end of string', expected: ',' or ')'"#,
        ),
        ("a@b=c", r#"invalid label key "a@b""#),
        ("a=b@c", r#"invalid label value "b@c" for key "a""#),
        ("x in ()", "values set can't be empty"),
        ("a b", "found 'b', expected: '='"),
    ];
    for (sel, want) in cases {
        let e = LabelSelector::parse(sel).expect_err(sel);
        let msg = e.to_string();
        assert!(msg.contains(want), "{sel:?}: {msg:?} lacks {want:?}");
    }
}

#[test]
fn error_input_is_bounded() {
    let sel = format!("{}@", "a".repeat(10_000));
    let msg = LabelSelector::parse(&sel).expect_err("bad key").to_string();
    assert!(
        msg.len() < 3 * super::super::MAX_ERROR_INPUT_LEN + 400,
        "{}",
        msg.len()
    );
}

#[test]
fn kube_proxy_selector_parses_to_two_absence_requirements() {
    let s = LabelSelector::parse(KUBE_PROXY).expect("kube-proxy selector");
    assert_eq!(s.reqs.len(), 2);
    assert!(s.reqs.iter().all(|r| r.op == Op::DoesNotExist));
    assert_eq!(s.reqs[0].key, "service.kubernetes.io/headless");
    assert_eq!(s.reqs[1].key, "service.kubernetes.io/service-proxy-name");
}

#[test]
fn only_absence_of_accepts_absences_of_the_given_keys_only() {
    const KEYS: [&str; 2] = [
        "service.kubernetes.io/headless",
        "service.kubernetes.io/service-proxy-name",
    ];
    let only = |s: &str| {
        LabelSelector::parse(s)
            .map(|l| l.only_absence_of(&KEYS))
            .unwrap_or(false)
    };
    assert!(only(KUBE_PROXY));
    assert!(only(""), "the empty selector: vacuously");
    assert!(only("!service.kubernetes.io/headless"));
    assert!(only(
        "!service.kubernetes.io/headless, !service.kubernetes.io/headless"
    ));
    assert!(!only("!service.kubernetes.io/other"));
    assert!(!only("!SERVICE.kubernetes.io/headless"), "keys are exact");
    assert!(
        !only("service.kubernetes.io/headless"),
        "exists is not absence"
    );
    assert!(!only("service.kubernetes.io/headless notin (a)"));
    assert!(!only("service.kubernetes.io/headless!=a"));
    assert!(!only(&format!("{KUBE_PROXY},app=web")));
    assert!(!only(&format!("{KUBE_PROXY},!app")));
}
