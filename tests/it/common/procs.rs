//! Helpers for tests that drive external programs (kubectl, openssl) and capture logs.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::Proc;

/// A private temporary directory, removed on drop.
pub struct TempDir {
    pub path: std::path::PathBuf,
}

impl TempDir {
    /// Creates `$TMPDIR/grid-wrapper-<tag>-<pid>-<n>`.
    pub fn new(tag: &str) -> TempDir {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let path =
            std::env::temp_dir().join(format!("grid-wrapper-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create temp dir");
        TempDir { path }
    }

    /// `path/name` as a string.
    pub fn file(&self, name: &str) -> String {
        self.path.join(name).to_string_lossy().into_owned()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Writes `dir/kubeconfig`: `server` and a bearer token, nothing else; returns its path.
pub fn token_kubeconfig(dir: &TempDir, server: &str, token: &str) -> String {
    let path = dir.file("kubeconfig");
    let text = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: edge\n\
         contexts:\n- name: edge\n  context:\n    cluster: sim\n    user: wrapper\n\
         clusters:\n- name: sim\n  cluster:\n    server: {server}\n\
         users:\n- name: wrapper\n  user:\n    token: {token}\n"
    );
    std::fs::write(&path, text).expect("write kubeconfig");
    path
}

/// Everything a child printed on stdout and stderr (interleaved by arrival), shared with the
/// reader threads.
#[derive(Clone, Default)]
pub struct LogSink(pub std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl LogSink {
    /// The output so far, lossily decoded.
    pub fn text(&self) -> String {
        let buf = self.0.lock().unwrap_or_else(|p| p.into_inner());
        String::from_utf8_lossy(&buf).into_owned()
    }

    /// The output once `needle` appears in it: a line logged after the effect a test observed
    /// (or still in the pipe) gets up to `timeout` to arrive. Panics with the output otherwise.
    pub fn wait_for_text(&self, needle: &str, timeout: Duration) -> String {
        self.wait_until(&format!("{needle:?}"), timeout, |text| {
            text.contains(needle)
        })
    }

    /// The output once a line of it satisfies `wanted` (described by `what`), as
    /// [`LogSink::wait_for_text`] does for a plain substring.
    pub fn wait_for_line(
        &self,
        what: &str,
        timeout: Duration,
        wanted: impl Fn(&str) -> bool,
    ) -> String {
        self.wait_until(what, timeout, |text| text.lines().any(&wanted))
    }

    /// The output once `done` holds for it, polled until `timeout`; panics with the output
    /// otherwise.
    fn wait_until(&self, what: &str, timeout: Duration, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let text = self.text();
            if done(&text) {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "{what} not logged within {timeout:?}:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn drain_from(&self, mut r: impl Read + Send + 'static) {
        let sink = self.clone();
        std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n) = r.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                sink.0
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .extend_from_slice(&chunk[..n]);
            }
        });
    }
}

/// Spawns `cmd` with stdout and stderr captured into a [`LogSink`]; the child is killed on drop.
pub fn spawn_captured(cmd: &mut Command) -> (Proc, LogSink) {
    let (proc, stdout, sink) = spawn_streaming(cmd);
    sink.drain_from(stdout);
    (proc, sink)
}

/// Spawns `cmd` with stdin closed and stdout/stderr piped.
fn spawn_piped(cmd: &mut Command) -> std::process::Child {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"))
}

/// Spawns `cmd` with stdout piped to the caller and stderr captured into a [`LogSink`]; the
/// child is killed on drop.
pub fn spawn_streaming(cmd: &mut Command) -> (Proc, std::process::ChildStdout, LogSink) {
    let mut child = spawn_piped(cmd);
    let sink = LogSink::default();
    if let Some(err) = child.stderr.take() {
        sink.drain_from(err);
    }
    let stdout = child.stdout.take().expect("piped stdout");
    (Proc { child }, stdout, sink)
}

/// What a bounded run produced.
pub struct RunOutput {
    pub status: std::process::ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl RunOutput {
    /// Whether the program exited 0.
    pub fn ok(&self) -> bool {
        self.status.success()
    }

    /// stderr, lossily decoded.
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

/// Runs `cmd` to completion with stdin closed, killing it after `timeout` (then `None`).
pub fn run_bounded(cmd: &mut Command, timeout: Duration) -> Option<RunOutput> {
    let mut child = spawn_piped(cmd);
    let collect = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut out = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut out);
            }
            out
        })
    };
    let out = collect(
        child
            .stdout
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
    );
    let err = collect(
        child
            .stderr
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    };
    Some(RunOutput {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    })
}

/// The first executable file called `name` in a directory of `$PATH`.
pub fn find_in_path(name: &str) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}
