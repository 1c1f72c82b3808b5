//! TLS settings for the upstream agent: trusted roots (kubeconfig CA, else the system bundle),
//! the optional client certificate, and the insecure flag. Proxied requests get the same settings
//! without the client certificate ([`tls_configs`]): they must not carry grid-wrapper's identity. Everything is checked with rustls
//! (ring provider, given explicitly) when the client is built, so a bad certificate or key is a
//! startup error rather than a failure — or a panic inside ureq — on first connect.

use crate::upstream::error::UpstreamError;
use crate::upstream::kubeconfig::{self, UpstreamConfig};
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::sync::Arc;
use ureq::tls::{Certificate, ClientCert, PrivateKey, RootCerts, TlsConfig, TlsProvider};

/// System CA bundles tried when the kubeconfig names no CA (https only).
const SYSTEM_CA_BUNDLES: [&str; 4] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
];
fn parse_certs(pem: &[u8], what: &str) -> Result<Vec<Certificate<'static>>, UpstreamError> {
    let mut out = Vec::new();
    for item in CertificateDer::pem_slice_iter(pem) {
        let der = item.map_err(|e| UpstreamError::Config(format!("{what}: {e}")))?;
        out.push(Certificate::from_der(der.as_ref()).to_owned());
    }
    if out.is_empty() {
        return Err(UpstreamError::Config(format!(
            "{what}: no PEM certificate found"
        )));
    }
    Ok(out)
}

fn system_roots() -> Result<Vec<Certificate<'static>>, UpstreamError> {
    for path in SYSTEM_CA_BUNDLES {
        if let Ok(pem) = kubeconfig::read_bounded(std::path::Path::new(path)) {
            if let Ok(certs) = parse_certs(&pem, path) {
                return Ok(certs);
            }
        }
    }
    Err(UpstreamError::Config(
        "no certificate-authority configured and no system CA bundle found".into(),
    ))
}

/// Builds ureq's TLS settings for `cfg` (`https`: whether the server URL is https).
pub(crate) fn tls_config(cfg: &UpstreamConfig, https: bool) -> Result<TlsConfig, UpstreamError> {
    tls_configs(cfg, https).map(|c| c.own)
}

/// One side's TLS settings, twice: the same server verification, with and without `cfg`'s
/// client certificate.
pub(crate) struct TlsConfigs {
    /// With the client certificate (if `cfg` has one): grid-wrapper's own requests.
    pub own: TlsConfig,
    /// Without any client certificate: requests proxied for a client, which carry only the
    /// client's own credentials (docs/SEMANTICS.md §8).
    pub anonymous: TlsConfig,
}

/// [`tls_config`] and the same settings without the client certificate (checked once, one
/// insecure WARN).
pub(crate) fn tls_configs(cfg: &UpstreamConfig, https: bool) -> Result<TlsConfigs, UpstreamError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let roots = match &cfg.ca_pem {
        Some(pem) => parse_certs(pem, "certificate-authority")?,
        None if https && !cfg.insecure_skip_tls_verify => system_roots()?,
        None => Vec::new(),
    };
    let mut store = rustls::RootCertStore::empty();
    let (added, _) = store.add_parsable_certificates(
        roots
            .iter()
            .map(|c| CertificateDer::from(c.der()).into_owned()),
    );
    if cfg.ca_pem.is_some() && added == 0 {
        return Err(UpstreamError::Config(
            "certificate-authority: no usable certificate".into(),
        ));
    }
    let check = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| UpstreamError::Tls(e.to_string()))?
        .with_root_certificates(store);
    let client_cert = match (&cfg.client_cert_pem, &cfg.client_key_pem) {
        (None, None) => None,
        (Some(cert), Some(key)) => {
            let chain = parse_certs(cert, "client-certificate")?;
            let bad_key = |e: String| UpstreamError::Config(format!("client-key: {e}"));
            let rustls_key =
                PrivateKeyDer::from_pem_slice(key).map_err(|e| bad_key(e.to_string()))?;
            let ureq_key = PrivateKey::from_pem(key).map_err(|e| bad_key(e.to_string()))?;
            let ders = chain
                .iter()
                .map(|c| CertificateDer::from(c.der()).into_owned())
                .collect();
            check
                .with_client_auth_cert(ders, rustls_key)
                .map_err(|e| UpstreamError::Config(format!("client certificate/key: {e}")))?;
            Some(ClientCert::new_with_certs(&chain, ureq_key))
        }
        _ => {
            return Err(UpstreamError::Config(
                "client certificate and key must be given together".into(),
            ))
        }
    };
    if cfg.insecure_skip_tls_verify {
        log::warn!("insecure-skip-tls-verify: the upstream server certificate is NOT verified");
    }
    let roots = RootCerts::new_with_certs(&roots);
    let base = || {
        TlsConfig::builder()
            .provider(TlsProvider::Rustls)
            .unversioned_rustls_crypto_provider(provider.clone())
            .root_certs(roots.clone())
            // ureq's own dangerous verifier, used only when this flag is set.
            .disable_verification(cfg.insecure_skip_tls_verify)
    };
    Ok(TlsConfigs {
        own: base().client_cert(client_cert).build(),
        anonymous: base().build(),
    })
}
