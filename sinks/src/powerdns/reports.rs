//! The clusters' reports (`[multi_cluster]`) in a PowerDNS zone: one TXT rrset per cluster
//! and tenant, written with a `REPLACE` carrying the ownership comment.

use std::sync::Arc;

use ho_engine::multi_cluster::report::{from_presentation, to_presentation};
use ho_engine::multi_cluster::{ReportStore, StoreFuture};
use hyper::Method;

use super::api::{Comment, PatchBody, Record, RrSet, ACCOUNT};
use super::Inner;

/// TTL of report records: read through the API, not by resolvers.
const REPORT_TTL: u64 = 60;

/// The report store of one PowerDNS sink.
pub(super) struct PowerDnsReports(pub(super) Arc<Inner>);

impl PowerDnsReports {
    async fn patch(
        inner: &Inner,
        rrset: RrSet,
        what: String,
    ) -> Result<(), ho_engine::sink::SinkError> {
        let body = serde_json::to_vec(&PatchBody {
            rrsets: vec![rrset],
        })
        .expect("serializable");
        inner
            .call(Method::PATCH, body.into(), &what)
            .await
            .map(|_| ())
    }
}

impl ReportStore for PowerDnsReports {
    fn write(&self, name: String, texts: Vec<String>) -> StoreFuture<()> {
        let inner = self.0.clone();
        Box::pin(async move {
            let rrset = RrSet {
                name: format!("{name}."),
                rtype: "TXT".into(),
                ttl: Some(REPORT_TTL),
                changetype: Some("REPLACE".into()),
                records: texts
                    .iter()
                    .map(|t| Record {
                        content: to_presentation(t),
                        disabled: false,
                    })
                    .collect(),
                comments: vec![Comment {
                    content: inner.mark.clone(),
                    account: ACCOUNT.into(),
                }],
            };
            let what = format!("PATCH zone {} (report {name})", inner.zone);
            Self::patch(&inner, rrset, what).await
        })
    }

    fn read(&self, suffix: String) -> StoreFuture<Vec<(String, Vec<String>)>> {
        let inner = self.0.clone();
        Box::pin(async move {
            let suffix = format!("{suffix}.");
            let zone = inner.read_zone().await?;
            Ok(zone
                .rrsets
                .into_iter()
                .filter(|r| r.rtype == "TXT" && r.name.to_ascii_lowercase().ends_with(&suffix))
                .map(|r| {
                    let name = r.name.trim_end_matches('.').to_ascii_lowercase();
                    let texts = r
                        .records
                        .iter()
                        .filter(|rec| !rec.disabled)
                        .map(|rec| from_presentation(&rec.content))
                        .collect();
                    (name, texts)
                })
                .collect())
        })
    }

    fn remove(&self, name: String) -> StoreFuture<()> {
        let inner = self.0.clone();
        Box::pin(async move {
            let what = format!("PATCH zone {} (remove report {name})", inner.zone);
            Self::patch(&inner, RrSet::delete(&format!("{name}."), "TXT"), what).await
        })
    }
}
