//! The runtime's endpoint, written as the kubelet's `--container-runtime-endpoint` takes it:
//! `unix:///path/to/socket`, or a bare absolute path (which the kubelet still accepts, read as
//! `unix://` + path). Any other scheme, and `unix://host/...`, is refused with a clear message.

use std::path::PathBuf;

/// A parsed endpoint: the socket's path and the text it was given as (for messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub path: PathBuf,
    pub text: String,
}

/// Why an endpoint was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointError {
    pub text: String,
    pub reason: &'static str,
}

impl std::fmt::Display for EndpointError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "container runtime endpoint {:?}: {}",
            self.text, self.reason
        )
    }
}

/// Parses an endpoint.
pub fn parse(text: &str) -> Result<Endpoint, EndpointError> {
    let err = |reason| EndpointError {
        text: text.to_owned(),
        reason,
    };
    let path = match text.split_once("://") {
        Some(("unix", path)) => {
            if !path.starts_with('/') {
                return Err(err(
                    "a unix endpoint is unix:///absolute/path (three slashes)",
                ));
            }
            path
        }
        Some(_) => {
            return Err(err(
                "only unix sockets are supported (unix:///path/to/socket)",
            ))
        }
        None => {
            if !text.starts_with('/') {
                return Err(err("expected unix:///path/to/socket or an absolute path"));
            }
            text
        }
    };
    if path.len() <= 1 {
        return Err(err("the socket path is empty"));
    }
    if path.contains(['?', '#', '\0']) {
        return Err(err("the socket path has a '?', '#' or NUL"));
    }
    Ok(Endpoint {
        path: PathBuf::from(path),
        text: text.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_urls_and_bare_paths_parse() {
        for (text, path) in [
            (
                "unix:///run/containerd/containerd.sock",
                "/run/containerd/containerd.sock",
            ),
            (
                "unix:///run/k3s/containerd/containerd.sock",
                "/run/k3s/containerd/containerd.sock",
            ),
            ("/var/run/crio/crio.sock", "/var/run/crio/crio.sock"),
        ] {
            assert_eq!(parse(text).unwrap().path, PathBuf::from(path), "{text}");
        }
    }

    #[test]
    fn other_forms_are_refused_clearly() {
        for text in [
            "tcp://127.0.0.1:1234",
            "npipe:////./pipe/x",
            "unix://run/x.sock",
            "run/x.sock",
            "unix:///",
            "",
            "/x?y",
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.to_string().contains("container runtime endpoint"), "{e}");
        }
        assert!(parse("tcp://127.0.0.1:1")
            .unwrap_err()
            .to_string()
            .contains("only unix sockets"));
    }
}
