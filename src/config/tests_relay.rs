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
    for bad in [
        "--relay-max-connections=0",
        "--relay-max-connections=65537",
        "--relay-max-connections-per-source=many",
    ] {
        let e = parse_args(args(&[bad])).unwrap_err();
        assert!(
            e.to_string()
                .contains("must be a whole number from 1 to 65536"),
            "{bad}: {e}"
        );
    }
}
