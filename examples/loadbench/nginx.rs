//! The static-file baseline: nginx (if installed) serving saved response bodies (the JSON LIST
//! at [`PATH`], its protobuf form at [`PB_PATH`] typed `application/vnd.kubernetes.protobuf`)
//! from a temp directory on a free loopback port, one worker, daemon off, its own pid/log/temp paths.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::http::{free_port, get_once};
use crate::procs::{wait_until, Children};

/// URL path of the served file.
pub const PATH: &str = "/body.json";
/// URL path of the served protobuf body (`Content-Type: application/vnd.kubernetes.protobuf`).
pub const PB_PATH: &str = "/body.pb";

/// A running nginx; its temp directory is removed on drop (the process by [`Children`]).
#[derive(Debug)]
pub struct Nginx {
    /// Process id of the master.
    pub pid: u32,
    /// Where it listens.
    pub addr: SocketAddr,
    /// `nginx -v` text.
    pub version: String,
    dir: PathBuf,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The nginx binary: `explicit` if given, else `nginx` on `$PATH` or in `/usr/sbin`.
pub fn find(explicit: Option<&str>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/local/sbin")])
        .map(|d| d.join("nginx"))
        .find(|p| p.is_file())
}

fn config(dir: &Path, port: u16) -> String {
    let d = dir.display();
    format!(
        "worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_requests 100000;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    types {{ application/json json; application/vnd.kubernetes.protobuf pb; }}
    server {{
        listen 127.0.0.1:{port};
        root {d}/www;
    }}
}}
"
    )
}

/// Starts `bin` serving `body` at [`PATH`] (and `pb` at [`PB_PATH`]); waits (bounded) until it
/// answers 200.
pub fn start(
    children: &Children,
    bin: &Path,
    body: &[u8],
    pb: Option<&[u8]>,
) -> Result<Nginx, String> {
    let dir = std::env::temp_dir().join(format!("loadbench-nginx-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("www")).map_err(|e| format!("temp dir: {e}"))?;
    let port = free_port().map_err(|e| format!("free port: {e}"))?;
    let conf = dir.join("nginx.conf");
    let version = Command::new(bin)
        .arg("-v")
        .output()
        .map(|o| {
            let text = String::from_utf8_lossy(&o.stderr);
            let text = text.trim();
            text.strip_prefix("nginx version: ")
                .unwrap_or(text)
                .to_string()
        })
        .unwrap_or_default();
    std::fs::write(&conf, config(&dir, port))
        .and_then(|()| std::fs::write(dir.join("www").join(&PATH[1..]), body))
        .and_then(|()| match pb {
            Some(pb) => std::fs::write(dir.join("www").join(&PB_PATH[1..]), pb),
            None => Ok(()),
        })
        .map_err(|e| format!("writing nginx files: {e}"))?;
    let spawned = children.spawn(
        Command::new(bin)
            .arg("-p")
            .arg(&dir)
            .arg("-c")
            .arg(&conf)
            .arg("-e")
            .arg(dir.join("error.log")),
        false,
    );
    let ng = Nginx {
        pid: spawned.as_ref().map_or(0, |s| s.pid),
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
        version,
        dir: dir.clone(),
    };
    let spawned = spawned.map_err(|e| format!("spawn {}: {e}", bin.display()))?;
    let ok = wait_until(
        Duration::from_secs(10),
        Duration::from_millis(20),
        || matches!(get_once(ng.addr, PATH, Duration::from_secs(2)), Ok(r) if r.code == 200),
    );
    if !ok {
        let err = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
        children.terminate(ng.pid, Duration::from_secs(3));
        return Err(format!(
            "nginx did not serve {PATH}: {} {}",
            spawned.log.tail(5),
            err.trim()
        ));
    }
    Ok(ng)
}
