//! Tests for command-line parsing: defaults, every flag form, every error.

use super::flags::FLAGS;
use super::*;

fn args(list: &[&str]) -> Vec<OsString> {
    list.iter().map(OsString::from).collect()
}

/// Parses `list` plus `--hostname=edge-1` and expects a run.
fn run(list: &[&str]) -> Config {
    let mut all = vec!["--hostname=edge-1"];
    all.extend_from_slice(list);
    match parse_args(args(&all)) {
        Ok(Command::Run(c)) => c,
        other => panic!("{list:?}: expected a run, got {other:?}"),
    }
}

fn fail(list: &[&str]) -> ConfigError {
    match parse_args(args(list)) {
        Err(e) => e,
        Ok(c) => panic!("{list:?}: expected an error, got {c:?}"),
    }
}

#[test]
fn defaults_match_the_original() {
    let c = run(&[]);
    let want = Config {
        hostname: "edge-1".into(),
        ..Config::default()
    };
    assert_eq!(c, want);
    assert_eq!(c.kube_qps, 1000.0);
    assert_eq!(c.kube_burst, 1000);
    assert_eq!(c.kubeconfig, None);
    assert_eq!(c.master, None);
    assert_eq!(c.bind_address, "localhost:51006");
    assert!(c.insecure);
    assert_eq!(
        (c.cert_file.clone(), c.key_file.clone(), c.ca_file.clone()),
        (None, None, None)
    );
    assert!(c.wrapper_in_cluster);
    assert!(c.upstream_gzip);
    assert!(c.upstream_protobuf);
    assert_eq!(c.notify_channel_size, 100);
    assert!(!c.debug);
    assert_eq!(
        c.autonomy,
        Autonomy {
            enabled: false,
            address: "http://localhost:51005/localinfo".into(),
            interval_secs: 30
        }
    );
    assert_eq!(Autonomy::parse(DEFAULT_AUTONOMY), Ok(Autonomy::default()));
    assert_eq!(c.metrics_bind_address, "127.0.0.1:51007");
    assert_eq!(c.verbosity, 0);
    assert!(!c.support_endpointslice_given);
}

#[test]
fn the_daemonset_command_line() {
    let c = match parse_args(args(&[
        "--kubeconfig=/var/lib/application-grid-wrapper/kubeconfig.conf",
        "--bind-address=127.0.0.1:51006",
        "--hostname=node-a",
        "--notify-channel-size=10000",
        "--support-endpointslice=true",
    ])) {
        Ok(Command::Run(c)) => c,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        c.kubeconfig,
        Some(PathBuf::from(
            "/var/lib/application-grid-wrapper/kubeconfig.conf"
        ))
    );
    assert_eq!(c.bind_address, "127.0.0.1:51006");
    assert_eq!(c.hostname, "node-a");
    assert_eq!(c.notify_channel_size, 10000);
    assert!(c.support_endpointslice_given);
}

#[test]
fn value_flag_forms() {
    // Every spelling sets the same field.
    let forms: &[&[&str]] = &[
        &["--kube-qps=5.5"],
        &["--kube-qps", "5.5"],
        &["--kube_qps=5.5"],
        &["--kube_qps", "5.5"],
        &["--kube-qps=1", "--kube-qps=5.5"],
    ];
    for f in forms {
        assert_eq!(run(f).kube_qps, 5.5, "{f:?}");
    }
    let c = run(&[
        "--kube-burst=7",
        "--kubeconfig",
        "/etc/kc",
        "--master=https://10.0.0.1:6443",
        "--bind_address=[::1]:8080",
        "--metrics-bind-address=0.0.0.0:9100",
        "--cert-file=/c.pem",
        "--key_file=/k.pem",
        "--ca-file=/ca.pem",
        "--cache_dir=/var/lib/gw",
        "--notify_channel_size=1",
        "--service-autonomy-enhancement=enabled=true,interval=5",
    ]);
    assert_eq!(c.kube_burst, 7);
    assert_eq!(c.kubeconfig, Some(PathBuf::from("/etc/kc")));
    assert_eq!(c.master.as_deref(), Some("https://10.0.0.1:6443"));
    assert_eq!(c.bind_address, "[::1]:8080");
    assert_eq!(c.metrics_bind_address, "0.0.0.0:9100");
    assert_eq!(c.cert_file, Some(PathBuf::from("/c.pem")));
    assert_eq!(c.key_file, Some(PathBuf::from("/k.pem")));
    assert_eq!(c.ca_file, Some(PathBuf::from("/ca.pem")));
    assert_eq!(c.cache_dir, Some(PathBuf::from("/var/lib/gw")));
    assert_eq!(c.cache_write_interval_secs, 30, "default");
    assert_eq!(c.notify_channel_size, 1);
    assert!(c.autonomy.enabled);
    assert_eq!(c.autonomy.interval_secs, 5);
    assert_eq!(c.autonomy.address, DEFAULT_AUTONOMY_ADDRESS);
    // Empty values mean "unset" for paths and --master, as with pflag's empty strings.
    let c = run(&[
        "--kubeconfig=",
        "--master=",
        "--ca-file",
        "",
        "--cache-dir=",
    ]);
    assert_eq!((c.kubeconfig, c.master, c.ca_file), (None, None, None));
    assert_eq!(c.cache_dir, None);
    // Several upstreams, in order of preference; validated, kept as given.
    let list = "https://10.0.0.1:6443,http://[fd00::2]:8080/prefix,https://cp.example";
    assert_eq!(
        run(&[&format!("--master={list}")]).master.as_deref(),
        Some(list)
    );
    // A path differs: another server as far as the list goes.
    let two = "https://a:6443/x,https://a:6443/y";
    assert_eq!(
        run(&[&format!("--master={two}")]).master.as_deref(),
        Some(two)
    );
    let eight: Vec<String> = (1..=8).map(|i| format!("https://cp{i}")).collect();
    assert!(run(&[&format!("--master={}", eight.join(","))])
        .master
        .is_some());
    let nine = format!("--master={},https://cp9", eight.join(","));
    let e = fail(&["--hostname=x", &nine]);
    assert!(e.to_string().contains("at most 8 URLs"), "{e}");
    // The error names the offending item.
    let e = fail(&["--hostname=x", "--master=https://a,https://b,https://A/"]);
    assert!(e.to_string().contains("\"https://A/\""), "{e}");
    assert!(e.to_string().contains("twice"), "{e}");
    // A value may look like a flag; it is still the value, as in pflag.
    assert_eq!(run(&["--hostname", "--debug"]).hostname, "--debug");
    assert!(!run(&["--hostname", "--debug"]).debug);
}

#[test]
fn boolean_flag_forms() {
    // (args, insecure, debug, wrapper_in_cluster)
    let cases: &[(&[&str], bool, bool, bool)] = &[
        (&["--debug"], true, true, true),
        (&["--debug=true"], true, true, true),
        (&["--debug=1"], true, true, true),
        (&["--debug=T"], true, true, true),
        (&["--debug=True"], true, true, true),
        (&["--debug=TRUE"], true, true, true),
        (&["--debug=t"], true, true, true),
        (&["--debug", "--debug=false"], true, false, true),
        (&["--wrapper-in-cluster=false"], true, false, false),
        (&["--wrapper_in_cluster=0"], true, false, false),
        (&["--wrapper-in-cluster=F"], true, false, false),
        (&["--wrapper-in-cluster=f"], true, false, false),
        (&["--wrapper-in-cluster=FALSE"], true, false, false),
        (&["--wrapper-in-cluster=False"], true, false, false),
        (
            &["--insecure=false", "--cert-file=/c", "--key-file=/k"],
            false,
            false,
            true,
        ),
        (&["--insecure"], true, false, true),
    ];
    for (list, insecure, debug, in_cluster) in cases {
        let c = run(list);
        assert_eq!(
            (c.insecure, c.debug, c.wrapper_in_cluster),
            (*insecure, *debug, *in_cluster),
            "{list:?}"
        );
    }
    assert!(!run(&["--upstream-gzip=false"]).upstream_gzip);
    assert!(!run(&["--upstream_gzip=0"]).upstream_gzip);
    assert!(run(&["--upstream-gzip=false", "--upstream-gzip"]).upstream_gzip);
    assert!(!run(&["--upstream-protobuf=false"]).upstream_protobuf);
    assert!(run(&["--upstream-protobuf=false", "--upstream-protobuf"]).upstream_protobuf);
    assert!(run(&["--support-endpointslice=false"]).support_endpointslice_given);
    assert!(run(&["--support_endpointslice"]).support_endpointslice_given);
}

#[test]
fn verbosity_forms() {
    let forms: &[(&[&str], u8)] = &[
        (&["-v", "4"], 4),
        (&["-v=4"], 4),
        (&["-v4"], 4),
        (&["--v=4"], 4),
        (&["--v", "4"], 4),
        (&["-v=0"], 0),
        (&["-v", "10"], 10),
        (&["-v=2", "-v=3"], 3),
    ];
    for (f, want) in forms {
        assert_eq!(run(f).verbosity, *want, "{f:?}");
    }
}

#[test]
fn help_and_version() {
    let cases: &[(&[&str], Command)] = &[
        (&["--help"], Command::Help),
        (&["-h"], Command::Help),
        (&["--hostname=x", "--help"], Command::Help),
        (&["--help", "--bogus"], Command::Help),
        (&["--version"], Command::Version),
        (&["--insecure=false", "--version"], Command::Version),
    ];
    for (list, want) in cases {
        assert_eq!(parse_args(args(list)).as_ref(), Ok(want), "{list:?}");
    }
    // `--help=false` does not ask for help (the missing hostname is then the error).
    assert!(parse_args(args(&["--help=false"])).is_err());
}

#[test]
fn help_text_lists_every_flag_with_its_default() {
    let text = help_text();
    for f in FLAGS {
        assert!(text.contains(f.long), "{} missing", f.long);
        if !f.default.is_empty() {
            assert!(text.contains(f.default), "default of {} missing", f.long);
        }
    }
    assert!(text.contains("-v, --v N"));
    assert!(text.contains("-h, --help"));
    assert!(text.contains("(default \"localhost:51006\")"));
    assert!(text.contains("(default 1000)"));
    assert!(text.contains("      --hostname NAME"));
    assert!(text.contains("(default true)"));
}

/// Which kind of error, and the flag it names (`""` when none).
fn shape(e: &ConfigError) -> (&'static str, String) {
    match e.kind() {
        ConfigErrorKind::UnknownFlag(f) => ("unknown", f.clone()),
        ConfigErrorKind::MissingValue(f) => ("missing", f.to_string()),
        ConfigErrorKind::InvalidValue { flag, .. } => ("invalid", flag.to_string()),
        ConfigErrorKind::Required { flag, .. } => ("required", flag.to_string()),
        ConfigErrorKind::UnexpectedArgument(a) => ("argument", a.clone()),
        ConfigErrorKind::NotUtf8(a) => ("utf8", a.clone()),
    }
}

#[test]
fn upstream_bounds_and_progress_deadlines() {
    let h = "--hostname=edge-1";
    let c = run(&[h]);
    assert_eq!(
        (
            c.max_object_bytes,
            c.list_progress_timeout_secs,
            c.watch_progress_timeout_secs
        ),
        (4 * 1024 * 1024, 60, 120),
        "defaults"
    );
    let c = run(&[
        h,
        "--max-object-bytes=65536",
        "--list_progress_timeout",
        "5",
        "--watch-progress-timeout=3600",
    ]);
    assert_eq!(
        (
            c.max_object_bytes,
            c.list_progress_timeout_secs,
            c.watch_progress_timeout_secs
        ),
        (65536, 5, 3600)
    );
    for (arg, flag) in [
        ("--max-object-bytes=65535", "--max-object-bytes"),
        ("--max-object-bytes=268435457", "--max-object-bytes"),
        ("--max-object-bytes=4MiB", "--max-object-bytes"),
        ("--list-progress-timeout=0", "--list-progress-timeout"),
        ("--list-progress-timeout=3601", "--list-progress-timeout"),
        ("--watch-progress-timeout=0", "--watch-progress-timeout"),
        ("--watch-progress-timeout=2m", "--watch-progress-timeout"),
    ] {
        assert_eq!(
            shape(&fail(&[h, arg])),
            ("invalid", flag.to_string()),
            "{arg}"
        );
    }
}

#[test]
fn errors_name_the_flag() {
    let h = "--hostname=edge-1";
    // (args, kind, flag or argument)
    let cases: &[(&[&str], &str, &str)] = &[
        (&[], "required", "--hostname"),
        (&["--hostname="], "required", "--hostname"),
        (&["--hostname", ""], "required", "--hostname"),
        (&["--hostname", " "], "required", "--hostname"),
        (&["--hostname"], "missing", "--hostname"),
        (&[h, "--kube-qps"], "missing", "--kube-qps"),
        (&[h, "-v"], "missing", "--v"),
        (&[h, "--insecure=false"], "required", "--cert-file"),
        (
            &[h, "--insecure=false", "--cert-file=/c"],
            "required",
            "--key-file",
        ),
        (
            &[h, "--insecure=false", "--key-file=/k"],
            "required",
            "--cert-file",
        ),
        (
            &[h, "--insecure=false", "--cert-file=", "--key-file=/k"],
            "required",
            "--cert-file",
        ),
        (
            &[h, "--notify-channel-size=0"],
            "invalid",
            "--notify-channel-size",
        ),
        (
            &[h, "--cache-write-interval=3601"],
            "invalid",
            "--cache-write-interval",
        ),
        (
            &[h, "--cache-write-interval=-1"],
            "invalid",
            "--cache-write-interval",
        ),
        (
            &[h, "--cache-write-interval=soon"],
            "invalid",
            "--cache-write-interval",
        ),
        (
            &[h, "--notify-channel-size=-1"],
            "invalid",
            "--notify-channel-size",
        ),
        (
            &[h, "--notify-channel-size=1000001"],
            "invalid",
            "--notify-channel-size",
        ),
        (
            &[h, "--notify-channel-size=ten"],
            "invalid",
            "--notify-channel-size",
        ),
        (&[h, "--kube-qps=0"], "invalid", "--kube-qps"),
        (&[h, "--kube-qps=-1"], "invalid", "--kube-qps"),
        (&[h, "--kube-qps=NaN"], "invalid", "--kube-qps"),
        (&[h, "--kube-qps=inf"], "invalid", "--kube-qps"),
        (&[h, "--kube-qps=fast"], "invalid", "--kube-qps"),
        (&[h, "--kube-burst=0"], "invalid", "--kube-burst"),
        (&[h, "--kube-burst=1.5"], "invalid", "--kube-burst"),
        (&[h, "--bind-address=51006"], "invalid", "--bind-address"),
        (&[h, "--bind-address=:51006"], "invalid", "--bind-address"),
        (
            &[h, "--bind-address=localhost:-1"],
            "invalid",
            "--bind-address",
        ),
        (
            &[h, "--bind-address=localhost:65536"],
            "invalid",
            "--bind-address",
        ),
        (
            &[h, "--bind-address=localhost:http"],
            "invalid",
            "--bind-address",
        ),
        (
            &[h, "--bind-address=localhost:+80"],
            "invalid",
            "--bind-address",
        ),
        (
            &[h, "--bind-address=::1:51006"],
            "invalid",
            "--bind-address",
        ),
        (
            &[h, "--bind-address=[::1]51006"],
            "invalid",
            "--bind-address",
        ),
        (&[h, "--bind-address="], "invalid", "--bind-address"),
        (
            &[h, "--metrics-bind-address=127.0.0.1"],
            "invalid",
            "--metrics-bind-address",
        ),
        (
            &[h, "--metrics-bind-address=localhost:51006"],
            "required",
            "--metrics-bind-address",
        ),
        (&[h, "--master=10.0.0.1:6443"], "invalid", "--master"),
        (&[h, "--master=ftp://x"], "invalid", "--master"),
        (&[h, "--master=https://"], "invalid", "--master"),
        (&[h, "--master=https://:6443"], "invalid", "--master"),
        (&[h, "--master=https://a:0"], "invalid", "--master"),
        (&[h, "--master=https://a b"], "invalid", "--master"),
        (&[h, "--master=https://a,"], "invalid", "--master"),
        (&[h, "--master=,https://a"], "invalid", "--master"),
        (&[h, "--master=https://a,,https://b"], "invalid", "--master"),
        (&[h, "--master=https://a, https://b"], "invalid", "--master"),
        (&[h, "--master=https://a,ftp://b"], "invalid", "--master"),
        (
            &[h, "--master=https://a:6443,https://A:6443/"],
            "invalid",
            "--master",
        ),
        (&[h, "--insecure=yes"], "invalid", "--insecure"),
        (&[h, "--debug="], "invalid", "--debug"),
        (
            &[h, "--support-endpointslice=maybe"],
            "invalid",
            "--support-endpointslice",
        ),
        (&[h, "-v=11"], "invalid", "--v"),
        (&[h, "-v=-1"], "invalid", "--v"),
        (&[h, "-vx"], "invalid", "--v"),
        (&[h, "--bogus"], "unknown", "--bogus"),
        (&[h, "--bogus=1"], "unknown", "--bogus=1"),
        (&[h, "-x"], "unknown", "-x"),
        (&[h, "-hostname"], "unknown", "-hostname"),
        (&[h, "---debug"], "unknown", "---debug"),
        (&[h, "--=x"], "unknown", "--=x"),
        (&[h, "--Hostname=x"], "unknown", "--Hostname=x"),
        (&[h, "--insecure", "false"], "argument", "false"),
        (&[h, "extra"], "argument", "extra"),
        (&[h, "-"], "argument", "-"),
        (&[h, "--", "x"], "argument", "x"),
    ];
    for (list, kind, who) in cases {
        let e = fail(list);
        assert_eq!(shape(&e), (*kind, who.to_string()), "{list:?}: {e}");
        let msg = e.to_string();
        assert!(!msg.contains('\n'), "{msg}");
        assert!(msg.contains(who), "{list:?}: {msg:?} does not name {who:?}");
    }
    // A trailing `--` alone is fine.
    assert!(parse_args(args(&[h, "--"])).is_ok());
}

#[cfg(unix)]
#[test]
fn non_utf8_arguments_are_errors() {
    use std::os::unix::ffi::OsStringExt;
    let bad = OsString::from_vec(vec![b'-', b'-', b'h', 0xff]);
    let e = parse_args(vec![bad]).expect_err("not utf-8");
    assert!(matches!(e.kind(), ConfigErrorKind::NotUtf8(_)), "{e}");
}

#[test]
fn autonomy_is_strict() {
    let ok: &[(&str, Autonomy)] = &[
        (
            "enabled=true,address=https://10.0.0.2:51005/localinfo,interval=10",
            Autonomy {
                enabled: true,
                address: "https://10.0.0.2:51005/localinfo".into(),
                interval_secs: 10,
            },
        ),
        (
            " enabled=1 , interval=60 ",
            Autonomy {
                enabled: true,
                interval_secs: 60,
                ..Autonomy::default()
            },
        ),
        ("enabled=false", Autonomy::default()),
        (
            "address=http://[::1]:51005/x",
            Autonomy {
                address: "http://[::1]:51005/x".into(),
                ..Autonomy::default()
            },
        ),
    ];
    for (s, want) in ok {
        assert_eq!(&Autonomy::parse(s).expect(s), want, "{s:?}");
    }
    let bad = [
        "",
        "enabled",
        "enabled=true,,interval=3",
        "enabled=true,",
        "enabled=yes",
        "enabled=true,enabled=false",
        "interval=0",
        "interval=-5",
        "interval=1.5",
        "interval=",
        "address=localhost:51005",
        "address=",
        "address=http://h/a=b,interval=3=4",
        "Enabled=true",
        "timeout=3",
    ];
    for s in bad {
        let e = Autonomy::parse(s).expect_err(s);
        assert_eq!(shape(&e).1, AUTONOMY_FLAG, "{s:?}");
        let e = fail(&[
            "--hostname=x",
            &format!("--service-autonomy-enhancement={s}"),
        ]);
        assert!(e.to_string().contains(AUTONOMY_FLAG), "{e}");
    }
}

#[test]
fn listening_addresses_take_port_0_each_its_own() {
    let c = run(&[
        "--bind-address=127.0.0.1:0",
        "--metrics-bind-address=127.0.0.1:0",
        "--relay-bind-address=127.0.0.1:0",
        "--relay-cert-file=/r.crt",
        "--relay-key-file=/r.key",
        "--relay-client-ca-file=/site-ca.crt",
    ]);
    assert_eq!(c.bind_address, "127.0.0.1:0");
    assert_eq!(c.metrics_bind_address, "127.0.0.1:0");
    assert_eq!(c.relay_bind_address.as_deref(), Some("127.0.0.1:0"));
}

// ---- the site relay's serving side (docs/SEMANTICS.md §12) ----

#[test]
fn relay_port_is_off_by_default_and_takes_its_three_files() {
    let c = run(&[]);
    assert_eq!(c.relay_bind_address, None);
    let c = run(&[
        "--relay-bind-address=0.0.0.0:51008",
        "--relay-cert-file=/r.crt",
        "--relay_key_file",
        "/r.key",
        "--relay-client-ca-file=/site-ca.crt",
    ]);
    assert_eq!(c.relay_bind_address.as_deref(), Some("0.0.0.0:51008"));
    assert_eq!(c.relay_cert_file, Some(PathBuf::from("/r.crt")));
    assert_eq!(c.relay_key_file, Some(PathBuf::from("/r.key")));
    assert_eq!(c.relay_client_ca_file, Some(PathBuf::from("/site-ca.crt")));
    // Empty is off, as for the other paths.
    assert_eq!(run(&["--relay-bind-address="]).relay_bind_address, None);
}

#[test]
fn relay_port_refuses_to_start_without_each_of_its_files() {
    let all = [
        "--hostname=edge-1",
        "--relay-bind-address=0.0.0.0:51008",
        "--relay-cert-file=/r.crt",
        "--relay-key-file=/r.key",
        "--relay-client-ca-file=/site-ca.crt",
    ];
    for (drop, flag) in [
        (2, "--relay-cert-file"),
        (3, "--relay-key-file"),
        (4, "--relay-client-ca-file"),
    ] {
        let list: Vec<&str> = all
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != drop)
            .map(|(_, a)| *a)
            .collect();
        let e = fail(&list);
        assert_eq!(shape(&e), ("required", flag.to_string()), "{e}");
        assert!(!e.to_string().contains('\n'), "one line: {e}");
    }
    // Without the client CA: says why it is needed.
    let e = fail(&all[..4]);
    assert!(e.to_string().contains("unpruned"), "{e}");
    // The files without the address, an address taken by another port, a bad address.
    let e = fail(&["--hostname=edge-1", "--relay-client-ca-file=/ca"]);
    assert_eq!(shape(&e), ("required", "--relay-bind-address".into()));
    let mut taken = all.to_vec();
    taken.push("--bind-address=0.0.0.0:51008");
    let e = fail(&taken);
    assert_eq!(shape(&e), ("required", "--relay-bind-address".into()));
    let e = fail(&["--hostname=edge-1", "--relay-bind-address=51008"]);
    assert_eq!(shape(&e), ("invalid", "--relay-bind-address".into()));
}

#[test]
fn max_list_items() {
    let h = "--hostname=edge-1";
    assert_eq!(run(&[h]).max_list_items, 40_000, "default");
    assert_eq!(run(&[h, "--max-list-items=1"]).max_list_items, 1);
    assert_eq!(
        run(&[h, "--max-list-items", "100000000"]).max_list_items,
        100_000_000
    );
    for arg in [
        "--max-list-items=0",
        "--max-list-items=100000001",
        "--max-list-items=40k",
    ] {
        assert_eq!(
            shape(&fail(&[h, arg])),
            ("invalid", "--max-list-items".to_string()),
            "{arg}"
        );
    }
}
