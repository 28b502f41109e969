//! TLS material made fresh for each test: nothing secret is checked in.

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A CA and a server certificate for `name` signed by it, written as PEM into `dir`.
pub struct TestPki {
    /// The CA certificate file.
    pub ca_file: PathBuf,
    /// Acceptor presenting the server certificate.
    pub acceptor: tokio_rustls::TlsAcceptor,
    /// The server certificate and its key as PEM files, for servers of other languages.
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

/// Generates a fresh CA and server certificate (nothing is checked in).
pub fn test_pki(dir: &Path, name: &str) -> TestPki {
    test_pki_with(dir, name, |_| {})
}

/// [`test_pki`] with the server certificate's parameters changed by `leaf` (e.g. its
/// validity period).
pub fn test_pki_with(
    dir: &Path,
    name: &str,
    leaf: impl FnOnce(&mut rcgen::CertificateParams),
) -> TestPki {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let leaf_key = KeyPair::generate().unwrap();
    let mut leaf_params = CertificateParams::new(vec![name.to_owned()]).unwrap();
    leaf(&mut leaf_params);
    let leaf = leaf_params.signed_by(&leaf_key, &ca, &ca_key).unwrap();
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, ca.pem()).unwrap();
    let (cert_file, key_file) = (dir.join("server.pem"), dir.join("server.key"));
    std::fs::write(&cert_file, leaf.pem()).unwrap();
    std::fs::write(&key_file, leaf_key.serialize_pem()).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into());
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![leaf.der().clone()], key)
    .unwrap();
    TestPki {
        ca_file,
        acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        cert_file,
        key_file,
    }
}
