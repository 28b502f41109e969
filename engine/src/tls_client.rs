//! The one way this program makes TLS client configurations: https probes and the HTTP
//! sinks (PowerDNS, webhook) trust the same roots, read CA files the same way and mean the
//! same thing by `insecure = true`.

use std::path::PathBuf;
use std::sync::Arc;

use ho_config::TlsCheck;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

/// Why TLS trust could not be set up (at start-up, not per probe).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// The CA file cannot be read or holds no certificate.
    #[error("ca_file {path}: {reason}")]
    CaFile {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The system trust store has no usable certificate.
    #[error("no system CA certificates found ({0}); set ca_file or insecure = true")]
    NoSystemRoots(String),
    /// The `host` is not a valid TLS server name.
    #[error("host {0:?} is not a valid TLS server name")]
    ServerName(String),
    /// The client certificate or its key cannot be read or do not go together.
    #[error("client_cert {path}: {reason}")]
    ClientCert {
        /// The certificate file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A rustls client configuration for `trust` (system roots, a CA file, or any certificate
/// when insecure; a client certificate when given), ALPN http/1.1.
pub fn client_config(trust: &TlsCheck) -> Result<ClientConfig, TlsError> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions");
    let builder = if trust.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
    } else {
        builder.with_root_certificates(roots(trust)?)
    };
    let mut config = match (&trust.client_cert, &trust.client_key) {
        (Some(cert), Some(key)) => {
            let err = |reason: String| TlsError::ClientCert {
                path: cert.clone(),
                reason,
            };
            let chain = CertificateDer::pem_file_iter(cert)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| err(e.to_string()))?;
            if chain.is_empty() {
                return Err(err("no PEM certificate in the file".into()));
            }
            let key = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| err(format!("client_key {}: {e}", key.display())))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| err(format!("does not go with client_key: {e}")))?
        }
        _ => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

fn roots(trust: &TlsCheck) -> Result<RootCertStore, TlsError> {
    let mut store = RootCertStore::empty();
    match &trust.ca_file {
        Some(path) => {
            let ca_err = |reason: String| TlsError::CaFile {
                path: path.clone(),
                reason,
            };
            let certs = CertificateDer::pem_file_iter(path)
                .map_err(|e| ca_err(e.to_string()))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| ca_err(e.to_string()))?;
            let (added, _) = store.add_parsable_certificates(certs);
            if added == 0 {
                return Err(ca_err("no PEM certificate in the file".into()));
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                let why = found
                    .errors
                    .first()
                    .map(|e| e.to_string())
                    .unwrap_or_else(|| "empty store".into());
                return Err(TlsError::NoSystemRoots(why));
            }
        }
    }
    Ok(store)
}

/// `insecure = true`: accepts any certificate chain, but still checks the handshake
/// signatures so the session itself is sound.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
