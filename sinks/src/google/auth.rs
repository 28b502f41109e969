//! Access tokens for the Cloud DNS API, the standard ways: a service account key (a JWT
//! signed with its RSA key, exchanged at its `token_uri`: RFC 7523, as Google's client
//! libraries do) or the metadata server (GKE Workload Identity, a VM's account).

use std::path::Path;
use std::time::SystemTime;

use bytes::Bytes;
use ho_engine::sink::SinkError;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request};
use ring::rand::SystemRandom;
use ring::signature::{RsaKeyPair, RSA_PKCS1_SHA256};
use serde::Deserialize;

use crate::bearer::BearerCache;
use crate::http::{error_for, HttpClient};

/// The scope the sink asks for: read and change Cloud DNS.
const SCOPE: &str = "https://www.googleapis.com/auth/ndev.clouddns.readwrite";

/// A service account key file's fields the exchange needs.
#[derive(Deserialize)]
struct KeyFile {
    #[serde(rename = "type")]
    kind: String,
    client_email: String,
    private_key: String,
    #[serde(default = "default_token_uri")]
    token_uri: String,
}

fn default_token_uri() -> String {
    "https://oauth2.googleapis.com/token".into()
}

/// A service account's key, ready to sign.
pub struct ServiceAccount {
    email: String,
    key: RsaKeyPair,
    token_uri: String,
}

/// Why a service account key file is refused; the text names the file, never its content.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {why}")]
pub struct KeyFileError {
    path: String,
    why: KeyFileWhy,
}

/// What is wrong with a key file.
#[derive(Debug, thiserror::Error)]
enum KeyFileWhy {
    #[error("{0}")]
    Read(std::io::Error),
    #[error("not a service account key file: {0}")]
    NotKeyFile(serde_json::Error),
    #[error(
        "a key of type \"{0}\"; a service account key (\"type\": \"service_account\") is needed"
    )]
    NotServiceAccount(String),
    #[error("private_key is not PEM")]
    NotPem,
    #[error("private_key is not an RSA key in PKCS#8: {0}")]
    NotRsa(String),
}

impl ServiceAccount {
    /// Reads and checks a key file; the error says what is wrong without its content.
    pub fn load(path: &Path) -> Result<ServiceAccount, KeyFileError> {
        let refused = |why: KeyFileWhy| KeyFileError {
            path: path.display().to_string(),
            why,
        };
        let text = std::fs::read_to_string(path).map_err(|e| refused(KeyFileWhy::Read(e)))?;
        let file: KeyFile =
            serde_json::from_str(&text).map_err(|e| refused(KeyFileWhy::NotKeyFile(e)))?;
        if file.kind != "service_account" {
            return Err(refused(KeyFileWhy::NotServiceAccount(file.kind)));
        }
        let der: String = file
            .private_key
            .lines()
            .filter(|l| !l.starts_with("-----"))
            .collect();
        let der = data_encoding::BASE64
            .decode(der.trim().as_bytes())
            .map_err(|_| refused(KeyFileWhy::NotPem))?;
        let key =
            RsaKeyPair::from_pkcs8(&der).map_err(|e| refused(KeyFileWhy::NotRsa(e.to_string())))?;
        Ok(ServiceAccount {
            email: file.client_email,
            key,
            token_uri: file.token_uri,
        })
    }

    /// The signed assertion asking for [`SCOPE`], valid an hour from `now`.
    fn assertion(&self, now: u64) -> Result<String, String> {
        let b64 = |bytes: &[u8]| data_encoding::BASE64URL_NOPAD.encode(bytes);
        let header = b64(br#"{"alg":"RS256","typ":"JWT"}"#);
        let claims = serde_json::json!({
            "iss": self.email,
            "scope": SCOPE,
            "aud": self.token_uri,
            "iat": now,
            "exp": now + 3600,
        });
        let signed = format!("{header}.{}", b64(claims.to_string().as_bytes()));
        let mut signature = vec![0; self.key.public().modulus_len()];
        self.key
            .sign(
                &RSA_PKCS1_SHA256,
                &SystemRandom::new(),
                signed.as_bytes(),
                &mut signature,
            )
            .map_err(|_| "cannot sign with the service account key".to_owned())?;
        Ok(format!("{signed}.{}", b64(&signature)))
    }
}

/// Where tokens come from.
pub enum Credentials {
    /// A service account key.
    Key(Box<ServiceAccount>),
    /// The metadata server at this base URL.
    Metadata(String),
}

/// The credentials and the token they last gave.
pub struct Tokens {
    credentials: Credentials,
    cache: BearerCache,
}

impl Tokens {
    /// No token yet.
    pub fn new(credentials: Credentials) -> Tokens {
        Tokens {
            credentials,
            cache: BearerCache::default(),
        }
    }

    /// A token valid for at least another minute, asked for when needed.
    pub async fn bearer(&mut self, client: &HttpClient) -> Result<String, SinkError> {
        if let Some(token) = self.cache.valid() {
            return Ok(token);
        }
        let (request, what) = match &self.credentials {
            Credentials::Key(account) => {
                let now = ho_engine::clock::since_epoch(SystemTime::now()).as_secs();
                let assertion = account.assertion(now).map_err(SinkError::permanent)?;
                let body = format!(
                    "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion={assertion}"
                );
                let mut request = Request::new(Full::new(Bytes::from(body)));
                *request.method_mut() = Method::POST;
                *request.uri_mut() = account.token_uri.parse().map_err(|e| {
                    SinkError::permanent(format!("token_uri {}: {e}", account.token_uri))
                })?;
                request.headers_mut().insert(
                    CONTENT_TYPE,
                    HeaderValue::from_static("application/x-www-form-urlencoded"),
                );
                let what = format!("token for {} from {}", account.email, account.token_uri);
                (request, what)
            }
            Credentials::Metadata(base) => {
                let url = format!("{base}/instance/service-accounts/default/token");
                let mut request = Request::new(Full::new(Bytes::new()));
                *request.uri_mut() = url
                    .parse()
                    .map_err(|e| SinkError::permanent(format!("{url}: {e}")))?;
                request
                    .headers_mut()
                    .insert("metadata-flavor", HeaderValue::from_static("Google"));
                (request, format!("token from the metadata server {url}"))
            }
        };
        let answer = client.send(request, &what).await?;
        if !answer.status.is_success() {
            let detail = String::from_utf8_lossy(&answer.body)
                .chars()
                .take(300)
                .collect::<String>();
            let hint = match &self.credentials {
                Credentials::Key(_) => "the service account key was refused (deleted or disabled?)",
                Credentials::Metadata(_) => "no account from the metadata server (set credentials_file outside Google Cloud)",
            };
            return Err(error_for(&answer, &format!("{what}: {hint}"), &detail));
        }
        self.cache.keep(&answer.body, &what)
    }

    /// Forgets the token (the API refused it).
    pub fn forget(&mut self) {
        self.cache.forget();
    }
}
