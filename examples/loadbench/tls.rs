//! TLS for the relay bench: the addresses that are a relay port (TLS, a client certificate
//! required) and the rustls client configuration each is reached with (the site CA, the
//! followers' certificate), so that the watch client, its connections and the one-shot GETs of
//! the bench speak TLS there and plain HTTP everywhere else.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

use crate::http::read_head;
use crate::BenchResult;

fn registry() -> &'static Mutex<HashMap<SocketAddr, Arc<ClientConfig>>> {
    static TLS: OnceLock<Mutex<HashMap<SocketAddr, Arc<ClientConfig>>>> = OnceLock::new();
    TLS.get_or_init(Default::default)
}

/// From now on `addr` is reached over TLS with `config`.
pub fn register(addr: SocketAddr, config: Arc<ClientConfig>) {
    registry()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(addr, config);
}

/// The TLS configuration `addr` is reached with, if it is a registered TLS address.
pub fn for_addr(addr: SocketAddr) -> Option<Arc<ClientConfig>> {
    registry()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&addr)
        .cloned()
}

/// A client configuration trusting the CA in `ca` and presenting `cert`/`key` (PEM files).
pub fn client_config(ca: &str, cert: &str, key: &str) -> BenchResult<Arc<ClientConfig>> {
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca)? {
        roots.add(c?)?;
    }
    let chain = CertificateDer::pem_file_iter(cert)?.collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_file(key)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)?;
    Ok(Arc::new(config))
}

/// A blocking TLS stream to `addr` (its handshake done on first use).
pub fn connect(
    addr: SocketAddr,
    config: Arc<ClientConfig>,
) -> io::Result<StreamOwned<ClientConnection, TcpStream>> {
    let sock = TcpStream::connect(addr)?;
    sock.set_nodelay(true)?;
    sock.set_read_timeout(Some(Duration::from_secs(30)))?;
    let name = ServerName::IpAddress(addr.ip().into());
    let conn = ClientConnection::new(config, name).map_err(io::Error::other)?;
    Ok(StreamOwned::new(conn, sock))
}

/// One GET of `path` on the TLS address `addr` (`Connection: close`): status and body (which
/// must come with a Content-Length).
pub fn get(addr: SocketAddr, config: Arc<ClientConfig>, path: &str) -> BenchResult<(u16, Vec<u8>)> {
    let mut s = connect(addr, config)?;
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json\r\nConnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes())?;
    let mut r = BufReader::new(s);
    let (code, headers) = read_head(&mut r)?;
    let len = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse::<usize>().ok())
        .ok_or("a TLS answer without Content-Length")?;
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    let _ = r.fill_buf();
    Ok((code, body))
}
