//! Tests for `grid-wrapper check`: the subcommand word, `--output`, and the help text.

use super::*;

fn args(list: &[&str]) -> Vec<OsString> {
    list.iter().map(OsString::from).collect()
}

#[test]
fn check_takes_the_server_flags_and_an_output_format() {
    let want = Config {
        hostname: "edge-1".into(),
        master: Some("http://127.0.0.1:8080".into()),
        ..Config::default()
    };
    let cases: &[(&[&str], OutputFormat)] = &[
        (
            &[
                "check",
                "--hostname=edge-1",
                "--master=http://127.0.0.1:8080",
            ],
            OutputFormat::Text,
        ),
        (
            &[
                "check",
                "--output",
                "json",
                "--hostname=edge-1",
                "--master=http://127.0.0.1:8080",
            ],
            OutputFormat::Json,
        ),
        (
            &[
                "check",
                "--hostname=edge-1",
                "--master=http://127.0.0.1:8080",
                "--output=json",
                "--output=text",
            ],
            OutputFormat::Text,
        ),
    ];
    for (list, format) in cases {
        assert_eq!(
            parse_args(args(list)),
            Ok(Command::Check(want.clone(), *format)),
            "{list:?}"
        );
    }
    // The same validation as a run: --hostname is required.
    let e = parse_args(args(&["check"])).expect_err("no hostname");
    assert!(
        matches!(e.kind(), ConfigErrorKind::Required { flag, .. } if *flag == "--hostname"),
        "{e}"
    );
    assert_eq!(
        parse_args(args(&["check", "--help"])),
        Ok(Command::Help),
        "--help wins"
    );
}

#[test]
fn output_only_with_check_and_only_text_or_json() {
    let e = parse_args(args(&["--hostname=x", "--output=json"])).expect_err("run + --output");
    assert!(
        matches!(e.kind(), ConfigErrorKind::Required { flag, .. } if *flag == "--output"),
        "{e}"
    );
    assert!(e.to_string().contains("check"), "{e}");
    let e = parse_args(args(&["check", "--hostname=x", "--output=yaml"])).expect_err("yaml");
    assert!(
        matches!(e.kind(), ConfigErrorKind::InvalidValue { flag, .. } if *flag == "--output"),
        "{e}"
    );
    // `check` is a subcommand only as the first argument.
    let e = parse_args(args(&["--hostname=x", "check"])).expect_err("check later");
    assert_eq!(
        e.kind(),
        &ConfigErrorKind::UnexpectedArgument("check".into())
    );
    let e = parse_args(args(&["check", "check", "--hostname=x"])).expect_err("twice");
    assert_eq!(
        e.kind(),
        &ConfigErrorKind::UnexpectedArgument("check".into())
    );
}

#[test]
fn help_mentions_check() {
    let text = help_text();
    assert!(
        text.contains("grid-wrapper check --hostname=NODE"),
        "{text}"
    );
    assert!(text.contains("--output FORMAT"), "{text}");
    assert!(text.contains("problem: <tag>"), "{text}");
}
