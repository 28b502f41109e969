//! The clusters' reports (`[multi_cluster]`) in a PowerDNS zone: one TXT rrset per cluster
//! and tenant, written with a `REPLACE` carrying the ownership comment.

use std::sync::Arc;

use ho_engine::multi_cluster::report::{from_presentation, to_presentation};
use ho_engine::sink::reports::{ReportStore, Rrset, StoreFuture};
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
        rrsets: Vec<RrSet>,
        what: String,
    ) -> Result<(), ho_engine::sink::SinkError> {
        let body = serde_json::to_vec(&PatchBody { rrsets }).expect("serializable");
        inner
            .call(Method::PATCH, body.into(), &what)
            .await
            .map(|_| ())
    }
}

impl ReportStore for PowerDnsReports {
    fn write(&self, reports: Vec<Rrset>) -> StoreFuture<()> {
        let inner = self.0.clone();
        Box::pin(async move {
            let rrsets: Vec<RrSet> = reports
                .iter()
                .map(|Rrset { name, texts }| RrSet {
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
                })
                .collect();
            let what = format!("PATCH zone {} ({} reports)", inner.zone, rrsets.len());
            Self::patch(&inner, rrsets, what).await
        })
    }

    fn read(&self, suffixes: Vec<String>) -> StoreFuture<Vec<Rrset>> {
        let inner = self.0.clone();
        Box::pin(async move {
            let suffixes: Vec<String> = suffixes.iter().map(|s| format!("{s}.")).collect();
            let zone = inner.read_zone().await?;
            Ok(zone
                .rrsets
                .into_iter()
                .filter(|r| r.rtype == "TXT")
                .map(|r| (r.name.to_ascii_lowercase(), r))
                .filter(|(name, _)| suffixes.iter().any(|s| name.ends_with(s.as_str())))
                .map(|(name, r)| {
                    let texts = r
                        .records
                        .iter()
                        .filter(|rec| !rec.disabled)
                        .map(|rec| from_presentation(&rec.content))
                        .collect();
                    Rrset::new(name.trim_end_matches('.'), texts)
                })
                .collect())
        })
    }

    fn remove(&self, name: String) -> StoreFuture<()> {
        let inner = self.0.clone();
        Box::pin(async move {
            let what = format!("PATCH zone {} (remove report {name})", inner.zone);
            Self::patch(
                &inner,
                vec![RrSet::delete(&format!("{name}."), "TXT")],
                what,
            )
            .await
        })
    }
}
