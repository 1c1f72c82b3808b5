//! One accepted connection as a blocking byte stream, plain TCP or rustls (ring provider), plus
//! the TLS server configuration built from `--tls-cert`/`--tls-key`/`--client-ca`. The HTTP
//! layer sees only `Read + Write`.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, ServerConnection, StreamOwned};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;

/// A plaintext or TLS connection.
#[derive(Debug)]
pub enum Conn {
    /// Plain HTTP.
    Plain(TcpStream),
    /// HTTPS (boxed: the TLS state is large).
    Tls(Box<StreamOwned<ServerConnection, TcpStream>>),
}

impl Conn {
    /// Wraps an accepted socket, starting a TLS session when `tls` is set.
    pub fn new(sock: TcpStream, tls: Option<&Arc<ServerConfig>>) -> io::Result<Conn> {
        match tls {
            None => Ok(Conn::Plain(sock)),
            Some(cfg) => {
                let sess = ServerConnection::new(Arc::clone(cfg)).map_err(io::Error::other)?;
                Ok(Conn::Tls(Box::new(StreamOwned::new(sess, sock))))
            }
        }
    }

    fn sock(&self) -> &TcpStream {
        match self {
            Conn::Plain(s) => s,
            Conn::Tls(t) => &t.sock,
        }
    }

    /// Whether the peer has closed its side (checked without blocking and without consuming
    /// bytes). Used by idle watches to free themselves on disconnect.
    pub fn peer_closed(&self) -> bool {
        let s = self.sock();
        if s.set_nonblocking(true).is_err() {
            return true;
        }
        let mut b = [0u8; 1];
        let closed = match s.peek(&mut b) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => !matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
            ),
        };
        s.set_nonblocking(false).is_err() || closed
    }

    /// Whether the peer presented a (verified) client certificate.
    pub fn client_certificate(&self) -> bool {
        match self {
            Conn::Plain(_) => false,
            Conn::Tls(t) => t.conn.peer_certificates().is_some_and(|c| !c.is_empty()),
        }
    }

    /// Sends TLS close_notify (if any) and shuts the socket down.
    pub fn shutdown(&mut self) {
        if let Conn::Tls(t) = self {
            t.conn.send_close_notify();
            let _ = t.flush();
        }
        let _ = self.sock().shutdown(std::net::Shutdown::Both);
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.read(buf),
            Conn::Tls(t) => t.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.write(buf),
            Conn::Tls(t) => t.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Conn::Plain(s) => s.flush(),
            Conn::Tls(t) => t.flush(),
        }
    }
}

/// Why the TLS configuration could not be built.
#[derive(Debug)]
pub enum TlsError {
    /// A PEM file could not be read or held nothing usable.
    Pem(String, rustls::pki_types::pem::Error),
    /// The certificate file holds no certificate.
    NoCertificate(String),
    /// rustls refused the configuration.
    Rustls(String),
}

impl std::fmt::Display for TlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TlsError::Pem(path, e) => write!(f, "{path}: {e}"),
            TlsError::NoCertificate(path) => write!(f, "{path}: no certificate found"),
            TlsError::Rustls(e) => write!(f, "TLS configuration: {e}"),
        }
    }
}

impl std::error::Error for TlsError {}

fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let name = path.display().to_string();
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| TlsError::Pem(name.clone(), e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem(name.clone(), e))?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate(name));
    }
    Ok(certs)
}

/// Builds the server config; with `client_ca`, clients must present a certificate it signed
/// (`optional`: a certificate given must be one it signed, but none is required).
pub fn server_config(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
    optional: bool,
) -> Result<Arc<ServerConfig>, TlsError> {
    let chain = certs(cert)?;
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| TlsError::Pem(key.display().to_string(), e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Rustls(e.to_string()))?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for c in certs(ca)? {
                roots.add(c).map_err(|e| TlsError::Rustls(e.to_string()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if optional {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier
                .build()
                .map_err(|e| TlsError::Rustls(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut cfg = builder
        .with_single_cert(chain, key)
        .map_err(|e| TlsError::Rustls(e.to_string()))?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}
