//! The built `grid-wrapper-sim` binary starts, prints its listening line and answers over HTTP.
//!
//! Being an integration test of this package, it also makes `cargo test` build the binary
//! (target/<profile>/grid-wrapper-sim) before any test runs: the root package's integration
//! tests start that file.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The child, killed on drop (also when an assertion fails).
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn starts_prints_its_address_and_answers() {
    let mut sim = Killed(
        Command::new(env!("CARGO_BIN_EXE_grid-wrapper-sim"))
            .args(["--fixture", "demo", "--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start grid-wrapper-sim"),
    );
    let mut line = String::new();
    BufReader::new(sim.0.stdout.take().expect("sim stdout"))
        .read_line(&mut line)
        .expect("sim banner");
    let addr = line
        .strip_prefix("grid-wrapper-sim listening on http://")
        .unwrap_or_else(|| panic!("unexpected banner {line:?}"))
        .trim();

    let mut conn = TcpStream::connect(addr).expect("connect to the sim");
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    conn.write_all(b"GET /version HTTP/1.1\r\nHost: sim\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut resp = String::new();
    conn.read_to_string(&mut resp).expect("a response");
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(resp.contains("\"gitVersion\""), "{resp}");
}

#[test]
fn help_exits_zero() {
    let out = Command::new(env!("CARGO_BIN_EXE_grid-wrapper-sim"))
        .arg("--help")
        .output()
        .expect("run grid-wrapper-sim --help");
    assert!(out.status.success(), "{out:?}");
    assert!(!out.stdout.is_empty(), "{out:?}");
}
