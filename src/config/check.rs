//! Value checks of `crate::config`: Go booleans, ports, `host:port` and http(s) URLs.

/// Go `strconv.ParseBool`.
pub(super) fn parse_go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// A port: decimal 1–65535.
pub(super) fn check_port(port: &str) -> Result<(), &'static str> {
    match port.parse::<u16>() {
        Ok(p) if p > 0 && port.bytes().all(|b| b.is_ascii_digit()) => Ok(()),
        _ => Err("the port must be a number from 1 to 65535"),
    }
}

/// `host:port` with a non-empty host (`[v6]:port` for IPv6), like Go `net.SplitHostPort`.
pub(super) fn check_host_port(s: &str) -> Result<(), &'static str> {
    const SHAPE: &str = "must be host:port (e.g. 127.0.0.1:51006 or [::1]:51006)";
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or(SHAPE)?;
        (host, after.strip_prefix(':').ok_or(SHAPE)?)
    } else {
        let (host, port) = s.rsplit_once(':').ok_or(SHAPE)?;
        if host.contains(':') {
            return Err(SHAPE);
        }
        (host, port)
    };
    if host.is_empty() || host.contains(|c: char| c.is_whitespace() || "[]/@".contains(c)) {
        return Err(SHAPE);
    }
    check_port(port)
}

/// An `http://` or `https://` URL with a host and, if given, a valid port.
pub(super) fn check_url(s: &str) -> Result<(), &'static str> {
    const SHAPE: &str = "must be an http:// or https:// URL with a host";
    let rest = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"))
        .ok_or(SHAPE)?;
    if s.contains(char::is_whitespace) {
        return Err(SHAPE);
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
    let port = match host_port.strip_prefix('[') {
        Some(v6) => {
            let (host, after) = v6.split_once(']').ok_or(SHAPE)?;
            if host.is_empty() {
                return Err(SHAPE);
            }
            match after {
                "" => None,
                a => Some(a.strip_prefix(':').ok_or(SHAPE)?),
            }
        }
        None => {
            let (host, port) = match host_port.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (host_port, None),
            };
            if host.is_empty() {
                return Err(SHAPE);
            }
            port
        }
    };
    match port {
        Some(p) => check_port(p).map_err(|_| "the URL's port must be a number from 1 to 65535"),
        None => Ok(()),
    }
}
