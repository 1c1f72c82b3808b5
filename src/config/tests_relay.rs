//! Tests of the flags that follow site relays (`--relay-kubeconfig`, `--relay-servers`).

use super::*;

fn args(list: &[&str]) -> Vec<OsString> {
    std::iter::once("--hostname=edge-1")
        .chain(list.iter().copied())
        .map(OsString::from)
        .collect()
}

#[test]
fn relay_flags_parse_and_the_servers_need_the_kubeconfig() {
    let Ok(Command::Run(c)) = parse_args(args(&[])) else {
        panic!("defaults");
    };
    assert_eq!((c.relay_kubeconfig, c.relay_servers), (None, None));
    let Ok(Command::Run(c)) = parse_args(args(&[
        "--relay-kubeconfig",
        "/etc/relay/kubeconfig",
        "--relay_servers=https://r1:51010,https://r2:51010",
    ])) else {
        panic!("both flags");
    };
    assert_eq!(
        c.relay_kubeconfig.as_deref(),
        Some(std::path::Path::new("/etc/relay/kubeconfig"))
    );
    assert_eq!(
        c.relay_servers.as_deref(),
        Some("https://r1:51010,https://r2:51010")
    );
    // The kubeconfig alone: its server is the one relay.
    let Ok(Command::Run(c)) = parse_args(args(&["--relay-kubeconfig=/k"])) else {
        panic!("kubeconfig alone");
    };
    assert_eq!(c.relay_servers, None);
    // The servers alone: one clear error line.
    let e = parse_args(args(&["--relay-servers=https://r1:51010"])).unwrap_err();
    assert!(
        matches!(
            e.kind(),
            ConfigErrorKind::Required {
                flag: "--relay-servers",
                ..
            }
        ),
        "{e:?}"
    );
    let text = e.to_string();
    assert!(text.contains("requires --relay-kubeconfig"), "{text}");
    assert!(!text.contains('\n'), "{text}");
    // Validated as --master is.
    for bad in [
        "--relay-servers=ftp://r1",
        "--relay-servers=https://r1,",
        "--relay-servers=https://r1,https://R1/",
    ] {
        let e = parse_args(args(&["--relay-kubeconfig=/k", bad])).unwrap_err();
        assert!(
            matches!(
                e.kind(),
                ConfigErrorKind::InvalidValue {
                    flag: "--relay-servers",
                    ..
                }
            ),
            "{bad}: {e:?}"
        );
    }
    // `grid-wrapper check` takes them too.
    let mut check = vec![OsString::from("check")];
    check.extend(args(&["--relay-kubeconfig=/k"]));
    assert!(matches!(
        parse_args(check),
        Ok(Command::Check(c, _)) if c.relay_kubeconfig.is_some()
    ));
}

#[test]
fn the_relay_ports_budgets_parse_within_their_bounds() {
    let Ok(Command::Run(c)) = parse_args(args(&[])) else {
        panic!("defaults");
    };
    assert_eq!(
        (c.relay_max_connections, c.relay_max_per_source),
        (1024, 128)
    );
    let Ok(Command::Run(c)) = parse_args(args(&[
        "--relay-max-connections=4096",
        "--relay-max-connections-per-source",
        "2048",
    ])) else {
        panic!("both budgets");
    };
    assert_eq!(
        (c.relay_max_connections, c.relay_max_per_source),
        (4096, 2048)
    );
    assert_each_refused(
        &[
            "--relay-max-connections=0",
            "--relay-max-connections=65537",
            "--relay-max-connections-per-source=many",
        ],
        "must be a whole number from 1 to 65536",
    );
}

/// Each of `flags` alone is refused with an error that says `why`.
fn assert_each_refused(flags: &[&str], why: &str) {
    for bad in flags {
        let e = parse_args(args(&[bad])).unwrap_err();
        assert!(e.to_string().contains(why), "{bad}: {e}");
    }
}

#[test]
fn the_relay_ports_connection_rate_parses_and_zero_turns_it_off() {
    let Ok(Command::Run(c)) = parse_args(args(&[])) else {
        panic!("defaults");
    };
    assert_eq!(c.relay_connection_rate, 10);
    for (flag, want) in [
        ("--relay-connection-rate-per-source=40", 40),
        ("--relay-connection-rate-per-source=0", 0),
        ("--relay_connection_rate_per_source=65536", 65536),
    ] {
        let Ok(Command::Run(c)) = parse_args(args(&[flag])) else {
            panic!("{flag}");
        };
        assert_eq!(c.relay_connection_rate, want, "{flag}");
    }
    assert_each_refused(
        &[
            "--relay-connection-rate-per-source=65537",
            "--relay-connection-rate-per-source=-1",
            "--relay-connection-rate-per-source=1.5",
            "--relay-connection-rate-per-source=",
        ],
        "must be a whole number from 0 (no limit) to 65536",
    );
}
