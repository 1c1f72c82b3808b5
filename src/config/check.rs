//! Value checks of `crate::config`: Go booleans, ports, `host:port`, http(s) URLs and rates.

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

/// A listening address's port: decimal 0–65535, 0 letting the system pick one (the startup log
/// names the address bound).
fn check_listen_port(port: &str) -> Result<(), &'static str> {
    match port.parse::<u16>() {
        Ok(_) if port.bytes().all(|b| b.is_ascii_digit()) => Ok(()),
        _ => Err("the port must be a number from 0 to 65535"),
    }
}

/// A listening `host:port` with a non-empty host (`[v6]:port` for IPv6), like Go
/// `net.SplitHostPort`.
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
    check_listen_port(port)
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

/// Most URLs `--master` accepts.
pub(super) const MAX_MASTERS: usize = 8;

/// The scheme and authority of an http(s) URL in lower case, the rest as given, without trailing
/// `/`: two `--master` items with the same key name the same server.
fn url_key(url: &str) -> String {
    let url = url.trim_end_matches('/');
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let end = url
        .get(after_scheme..)
        .and_then(|rest| rest.find(['/', '?', '#']))
        .map_or(url.len(), |i| after_scheme + i);
    let (head, tail) = url.split_at(end);
    format!("{}{tail}", head.to_ascii_lowercase())
}

/// A comma-separated list of http(s) URLs (`--master`): each item checked by [`check_url`], no
/// empty item, no URL twice (scheme and host compared case-insensitively, a trailing `/`
/// ignored), at most [`MAX_MASTERS`]. On error: the offending item and why.
pub(super) fn check_url_list(s: &str) -> Result<(), (String, &'static str)> {
    let mut seen: Vec<String> = Vec::new();
    for item in s.split(',') {
        if item.is_empty() {
            return Err((
                s.to_string(),
                "an item of the comma-separated list is empty",
            ));
        }
        check_url(item).map_err(|reason| (item.to_string(), reason))?;
        let key = url_key(item);
        if seen.contains(&key) {
            return Err((item.to_string(), "the list names this server twice"));
        }
        seen.push(key);
    }
    if seen.len() > MAX_MASTERS {
        return Err((s.to_string(), "at most 8 URLs"));
    }
    Ok(())
}

/// A whole number of events a second from 0 (no limit) to `max`.
pub(super) fn check_rate(s: &str, max: u32) -> Option<u32> {
    s.parse::<u32>().ok().filter(|&v| v <= max)
}
