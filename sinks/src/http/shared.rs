//! The connection pools the sinks share: sinks that trust the same way (same roots, same
//! client certificate) get one hyper client, so one TLS configuration (one copy of the
//! root store) and one pool of idle connections per provider, however many sinks (one per
//! tenant, say) post to that provider. What differs between sinks stays theirs: each
//! exchange's timeout and the `Retry-After` holds are kept per sink by [`super::HttpClient`].
//!
//! The clients are looked up by the trust settings and the contents of the files they
//! name, so a reload after a CA file changed builds a new client; the system roots are
//! read when the first client trusting them is built and kept while any sink uses it. A
//! client lives as long as a sink holds it: the table keeps only weak references.

use std::path::Path;
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;
use ho_config::TlsCheck;
use ho_engine::tls_client::TlsError;
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use super::{connector, IDLE_TIMEOUT, MAX_IDLE_PER_HOST};

/// A hyper client with its pool, as the sinks send with it.
pub(super) type Pooled = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// What makes two clients differ: the trust settings and what their files held when read.
#[derive(PartialEq, Eq)]
struct Key {
    trust: TlsCheck,
    /// `ca_file`, `client_cert` and `client_key`, read (`None`: not set or unreadable).
    files: [Option<Vec<u8>>; 3],
}

impl Key {
    fn of(trust: &TlsCheck) -> Key {
        let read = |path: &Option<std::path::PathBuf>| {
            path.as_deref().and_then(|p: &Path| std::fs::read(p).ok())
        };
        Key {
            trust: trust.clone(),
            files: [
                read(&trust.ca_file),
                read(&trust.client_cert),
                read(&trust.client_key),
            ],
        }
    }
}

/// The live clients: few (one per distinct trust), so a list.
static CLIENTS: Mutex<Vec<(Key, Weak<Pooled>)>> = Mutex::new(Vec::new());

/// The client of every sink trusting `trust`: the one already in use, or a new one.
pub(super) fn client(trust: &TlsCheck) -> Result<Arc<Pooled>, TlsError> {
    let key = Key::of(trust);
    // Held while building, so sinks built at once with one trust read the roots once.
    let mut clients = CLIENTS.lock().expect("not poisoned");
    clients.retain(|(_, client)| client.strong_count() > 0);
    if let Some(client) = clients
        .iter()
        .find(|(k, _)| *k == key)
        .and_then(|(_, client)| client.upgrade())
    {
        return Ok(client);
    }
    let client = Arc::new(
        Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(MAX_IDLE_PER_HOST)
            .pool_idle_timeout(IDLE_TIMEOUT)
            // Without a timer, idle connections past the timeout are dropped only when the
            // next request looks for one.
            .pool_timer(TokioTimer::new())
            .build(connector(trust)?),
    );
    clients.push((key, Arc::downgrade(&client)));
    Ok(client)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ca_file(dir: &Path, name: &str) -> std::path::PathBuf {
        let cert = rcgen::generate_simple_self_signed(vec![name.to_owned()]).unwrap();
        let path = dir.join("ca.pem");
        std::fs::write(&path, cert.cert.pem()).unwrap();
        path
    }

    #[test]
    fn equal_trust_shares_one_client_and_a_changed_ca_file_gets_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let trust = TlsCheck::verify_with(Some(ca_file(dir.path(), "a.test")));
        let first = client(&trust).unwrap();
        assert!(Arc::ptr_eq(&first, &client(&trust).unwrap()));
        let insecure = TlsCheck {
            insecure: true,
            ..TlsCheck::verify_with(None)
        };
        assert!(!Arc::ptr_eq(&first, &client(&insecure).unwrap()));

        // The same path with other contents, as after an operator replaced the CA.
        ca_file(dir.path(), "b.test");
        let replaced = client(&trust).unwrap();
        assert!(!Arc::ptr_eq(&first, &replaced));

        // The table does not keep a client alive once no sink holds it.
        let weak = Arc::downgrade(&replaced);
        drop(replaced);
        assert!(weak.upgrade().is_none());
    }
}
