//! Plain TCP or TLS (rustls) under one type, so the HTTP layer only ever sees plaintext bytes
//! (`--insecure=false` serves TLS with `--cert-file`/`--key-file`, and `--ca-file` requires and
//! verifies client certificates; the relay port, `--relay-bind-address`, always requires them).

use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::Arc;

use log::debug;
use mio::net::TcpStream;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, ServerConnection};

use crate::server::outbound::Outbound;

/// Plaintext a TLS session may buffer ahead of the socket; beyond it writes report `WouldBlock`.
const TLS_BUFFER: usize = 256 * 1024;

/// The flags a TLS configuration's files come from, named in its errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TlsFlags {
    /// The certificate's flag.
    pub cert: &'static str,
    /// The key's flag.
    pub key: &'static str,
    /// The client CA's flag.
    pub ca: &'static str,
}

impl TlsFlags {
    /// The kube-proxy port's: `--cert-file`, `--key-file`, `--ca-file`.
    pub const SERVING: TlsFlags = TlsFlags {
        cert: "--cert-file",
        key: "--key-file",
        ca: "--ca-file",
    };
    /// The relay port's (docs/SEMANTICS.md §12).
    pub const RELAY: TlsFlags = TlsFlags {
        cert: "--relay-cert-file",
        key: "--relay-key-file",
        ca: "--relay-client-ca-file",
    };
}

/// Builds the serving TLS configuration (ring provider, TLS 1.2 and 1.3); with `client_ca`, a
/// client certificate chaining to it is required. Errors name the file and its flag (`flags`).
pub fn server_config(
    flags: TlsFlags,
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
) -> Result<Arc<ServerConfig>, String> {
    let TlsFlags {
        cert: cert_flag,
        key: key_flag,
        ca: ca_flag,
    } = flags;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{cert_flag} {}: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "{cert_flag} {}: no certificate found",
            cert.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("{key_flag} {}: {e}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS configuration: {e}"))?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for c in CertificateDer::pem_file_iter(ca)
                .map_err(|e| format!("{ca_flag} {}: {e}", ca.display()))?
            {
                let c = c.map_err(|e| format!("{ca_flag} {}: {e}", ca.display()))?;
                roots
                    .add(c)
                    .map_err(|e| format!("{ca_flag} {}: {e}", ca.display()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| format!("{ca_flag} {}: {e}", ca.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let cfg = builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("{cert_flag}/{key_flag}: {e}"))?;
    Ok(Arc::new(cfg))
}

/// What a read round ended with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadEnd {
    /// Nothing more to read now.
    Blocked,
    /// The peer will send no more (FIN or TLS close_notify).
    Eof,
}

/// A connection's byte transport.
#[derive(Debug)]
pub enum Transport {
    /// Plain HTTP.
    Plain(TcpStream),
    /// HTTPS.
    Tls {
        /// The socket.
        sock: TcpStream,
        /// The rustls session.
        tls: Box<ServerConnection>,
    },
}

/// Writes plaintext into a TLS session up to its buffer limit.
struct Plaintext<'a>(&'a mut ServerConnection);

impl Write for Plaintext<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.0.writer().write(buf)? {
            0 if !buf.is_empty() => Err(io::ErrorKind::WouldBlock.into()),
            n => Ok(n),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Transport {
    /// Wraps an accepted socket, with TLS when a configuration is given.
    pub fn new(sock: TcpStream, tls: Option<&Arc<ServerConfig>>) -> io::Result<Transport> {
        Ok(match tls {
            None => Transport::Plain(sock),
            Some(cfg) => {
                let mut conn = ServerConnection::new(cfg.clone()).map_err(io::Error::other)?;
                conn.set_buffer_limit(Some(TLS_BUFFER));
                Transport::Tls {
                    sock,
                    tls: Box::new(conn),
                }
            }
        })
    }

    /// The socket, for (de)registration.
    pub fn socket(&mut self) -> &mut TcpStream {
        match self {
            Transport::Plain(s) => s,
            Transport::Tls { sock, .. } => sock,
        }
    }

    /// Whether a TLS handshake is still under way (never for plain TCP).
    pub fn is_handshaking(&self) -> bool {
        match self {
            Transport::Plain(_) => false,
            Transport::Tls { tls, .. } => tls.is_handshaking(),
        }
    }

    /// Whether a TLS handshake has completed with a client certificate, which the configuration
    /// verified (the relay port requires one chaining to `--relay-client-ca-file`).
    pub fn has_client_certificate(&self) -> bool {
        match self {
            Transport::Plain(_) => false,
            Transport::Tls { tls, .. } => {
                !tls.is_handshaking() && tls.peer_certificates().is_some_and(|c| !c.is_empty())
            }
        }
    }

    /// Whether encrypted bytes wait for the socket (handshake, alerts).
    pub fn wants_write(&self) -> bool {
        match self {
            Transport::Plain(_) => false,
            Transport::Tls { tls, .. } => tls.wants_write(),
        }
    }

    /// Reads until the socket would block, handing each piece of plaintext to `sink`
    /// (which returns false to stop reading).
    pub fn read(&mut self, sink: &mut dyn FnMut(&[u8]) -> bool) -> io::Result<ReadEnd> {
        let mut buf = [0u8; 16 * 1024];
        match self {
            Transport::Plain(sock) => loop {
                match sock.read(&mut buf) {
                    Ok(0) => return Ok(ReadEnd::Eof),
                    Ok(n) => {
                        if !sink(&buf[..n]) {
                            return Ok(ReadEnd::Blocked);
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(ReadEnd::Blocked),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            },
            Transport::Tls { sock, tls } => loop {
                match tls.read_tls(sock) {
                    Ok(0) => return Ok(ReadEnd::Eof),
                    Ok(_) => {
                        if let Err(e) = tls.process_new_packets() {
                            // Last gasp: let the peer see the alert.
                            let _ = tls.write_tls(sock);
                            return Err(io::Error::new(io::ErrorKind::InvalidData, e));
                        }
                        loop {
                            match tls.reader().read(&mut buf) {
                                Ok(0) => return Ok(ReadEnd::Eof),
                                Ok(n) => {
                                    if !sink(&buf[..n]) {
                                        return Ok(ReadEnd::Blocked);
                                    }
                                }
                                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                                Err(e) => return Err(e),
                            }
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(ReadEnd::Blocked),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            },
        }
    }

    /// Moves queued plaintext out (through TLS when on) until done or the socket would block.
    pub fn write(&mut self, out: &mut Outbound) -> io::Result<()> {
        match self {
            Transport::Plain(sock) => out.write_to(sock),
            Transport::Tls { sock, tls } => loop {
                out.write_to(&mut Plaintext(tls))?;
                let mut blocked = false;
                while tls.wants_write() {
                    match tls.write_tls(sock) {
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            blocked = true;
                            break;
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
                if blocked || out.is_empty() {
                    if blocked {
                        debug!("tls: socket full, {} plaintext bytes wait", out.len());
                    }
                    return Ok(());
                }
            },
        }
    }
}
