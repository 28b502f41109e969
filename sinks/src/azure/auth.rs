//! Access tokens for Azure Resource Manager, the standard ways: an app registration's
//! client secret, AKS workload identity (the federated token file the webhook mounts,
//! `AZURE_FEDERATED_TOKEN_FILE`, exchanged as a client assertion), or a managed identity
//! (the instance metadata service). The first two ask Microsoft Entra's v2 token endpoint.

use std::path::PathBuf;

use bytes::Bytes;
use ho_engine::sink::SinkError;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request};

use super::config::AzureDnsConfig;
use crate::bearer::{form_encode, BearerCache};
use crate::http::{error_for, HttpClient};
use ho_engine::secret::Secret;
use ho_engine::sink::SetupError;

/// What tokens are asked for: Resource Manager.
const RESOURCE: &str = "https://management.azure.com/";

/// Where tokens come from.
pub enum Credentials {
    /// An app registration's secret.
    ClientSecret {
        tenant: String,
        client_id: String,
        secret: Secret,
    },
    /// AKS workload identity: a federated token file read at each exchange (it rotates).
    Workload {
        tenant: String,
        client_id: String,
        token_file: PathBuf,
    },
    /// A managed identity (user-assigned when `client_id` is given).
    Managed { client_id: Option<String> },
}

impl Credentials {
    /// The credentials `config` and the environment name, checked.
    pub fn of(config: &AzureDnsConfig) -> Result<Credentials, SetupError> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        if config.client_secret_file.is_some() || config.client_secret_env.is_some() {
            let secret = Secret::load(
                config.client_secret_file.as_deref(),
                config.client_secret_env.as_deref(),
            )
            .map_err(SetupError::secret("client secret"))?;
            return Ok(Credentials::ClientSecret {
                tenant: config.tenant_id.clone().unwrap_or_default(),
                client_id: config.client_id.clone().unwrap_or_default(),
                secret,
            });
        }
        if let Some(file) = env("AZURE_FEDERATED_TOKEN_FILE") {
            let tenant = config.tenant_id.clone().or_else(|| env("AZURE_TENANT_ID"));
            let client_id = config.client_id.clone().or_else(|| env("AZURE_CLIENT_ID"));
            let (Some(tenant), Some(client_id)) = (tenant, client_id) else {
                return Err(SetupError::Credentials("workload identity (AZURE_FEDERATED_TOKEN_FILE is set) needs tenant_id and client_id, or AZURE_TENANT_ID and AZURE_CLIENT_ID".into()));
            };
            return Ok(Credentials::Workload {
                tenant,
                client_id,
                token_file: file.into(),
            });
        }
        Ok(Credentials::Managed {
            client_id: config.client_id.clone(),
        })
    }
}

/// The credentials, where to use them, and the token they last gave.
pub struct Tokens {
    credentials: Credentials,
    login_url: String,
    imds_url: String,
    cache: BearerCache,
}

impl Tokens {
    /// No token yet.
    pub fn new(credentials: Credentials, config: &AzureDnsConfig) -> Tokens {
        Tokens {
            credentials,
            login_url: config.login_url.trim_end_matches('/').to_owned(),
            imds_url: config.imds_url.trim_end_matches('/').to_owned(),
            cache: BearerCache::default(),
        }
    }

    /// A token valid for at least another minute, asked for when needed.
    pub async fn bearer(&mut self, client: &HttpClient) -> Result<String, SinkError> {
        if let Some(token) = self.cache.valid() {
            return Ok(token);
        }
        let (request, what, hint) = self.token_request()?;
        let answer = client.send(request, &what).await?;
        if !answer.status.is_success() {
            let detail: String = String::from_utf8_lossy(&answer.body)
                .chars()
                .take(300)
                .collect();
            return Err(error_for(&answer, &format!("{what}: {hint}"), &detail));
        }
        self.cache.keep(&answer.body, &what)
    }

    /// The request for a token with these credentials, what it is (for errors) and what a
    /// refusal most likely means.
    fn token_request(&self) -> Result<(Request<Full<Bytes>>, String, &'static str), SinkError> {
        let scope = form_encode(&format!("{RESOURCE}.default"));
        Ok(match &self.credentials {
            Credentials::ClientSecret {
                tenant,
                client_id,
                secret,
            } => {
                let body = format!(
                    "grant_type=client_credentials&client_id={}&scope={scope}&client_secret={}",
                    form_encode(client_id),
                    form_encode(secret.expose())
                );
                let url = format!("{}/{tenant}/oauth2/v2.0/token", self.login_url);
                (
                    form_post(&url, body)?,
                    format!("token for app {client_id} from {url}"),
                    "the client secret was refused (expired, or another app's?)",
                )
            }
            Credentials::Workload {
                tenant,
                client_id,
                token_file,
            } => {
                let assertion = federated_token(token_file)?;
                let body = format!(
                    "grant_type=client_credentials&client_id={}&scope={scope}&client_assertion_type={}&client_assertion={}",
                    form_encode(client_id),
                    form_encode("urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
                    form_encode(assertion.trim())
                );
                let url = format!("{}/{tenant}/oauth2/v2.0/token", self.login_url);
                (
                    form_post(&url, body)?,
                    format!("workload identity token for {client_id} from {url}"),
                    "the federated credential was refused (check the identity's federated credential subject)",
                )
            }
            Credentials::Managed { client_id } => (
                self.imds_request(client_id.as_deref())?,
                format!("managed identity token from {}", self.imds_url),
                "no managed identity here (set client_secret_file outside Azure)",
            ),
        })
    }

    /// The instance metadata service's token request (a managed identity).
    fn imds_request(&self, client_id: Option<&str>) -> Result<Request<Full<Bytes>>, SinkError> {
        let mut url = format!(
            "{}/metadata/identity/oauth2/token?api-version=2018-02-01&resource={}",
            self.imds_url,
            form_encode(RESOURCE)
        );
        if let Some(id) = client_id {
            url.push_str(&format!("&client_id={}", form_encode(id)));
        }
        let mut request = Request::new(Full::new(Bytes::new()));
        *request.uri_mut() = url
            .parse()
            .map_err(|e| SinkError::permanent(format!("{url}: {e}")))?;
        request
            .headers_mut()
            .insert("metadata", HeaderValue::from_static("true"));
        Ok(request)
    }

    /// Forgets the token (the API refused it).
    pub fn forget(&mut self) {
        self.cache.forget();
    }
}

/// A form POST to `url`.
fn form_post(url: &str, body: String) -> Result<Request<Full<Bytes>>, SinkError> {
    let mut request = Request::new(Full::new(Bytes::from(body)));
    *request.method_mut() = Method::POST;
    *request.uri_mut() = url
        .parse()
        .map_err(|e| SinkError::permanent(format!("{url}: {e}")))?;
    request.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/x-www-form-urlencoded"),
    );
    Ok(request)
}

/// The workload identity's federated token, read again for each token request (the kubelet
/// rotates the file).
fn federated_token(token_file: &std::path::Path) -> Result<String, SinkError> {
    std::fs::read_to_string(token_file).map_err(|e| {
        SinkError::retriable(format!(
            "the federated token file {}: {e}",
            token_file.display()
        ))
    })
}
