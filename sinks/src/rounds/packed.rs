//! A round of a kind whose tenants' changes pack into shared requests (Cloudflare's batches,
//! Cloud DNS's changes): each tenant planned from the one listing, then as few requests as
//! the API takes, each tenant's changes in one of them.

use std::collections::BTreeMap;
use std::sync::Arc;

use ho_engine::sink::ownership;
use ho_engine::snapshot::TenantSnapshot;

use super::provider::Provider;
use super::{pack, Packable, RoundResults};

/// Each tenant's result once planned by `plan` (its change and the names it left alone
/// because they are someone else's), and the changes of the tenants that have any.
pub(crate) fn planned<C: Packable>(
    round: &BTreeMap<String, Arc<TenantSnapshot>>,
    mut plan: impl FnMut(&TenantSnapshot) -> (C, Vec<String>),
) -> (RoundResults, Vec<(String, C)>) {
    let mut results = BTreeMap::new();
    let mut groups = Vec::new();
    for (tenant, snapshot) in round {
        let (change, foreign) = plan(snapshot);
        let changes = change.size() > 0;
        results.insert(tenant.clone(), ownership::outcome(&foreign, changes));
        if changes {
            groups.push((tenant.clone(), change));
        }
    }
    (results, groups)
}

/// Sends `groups` packed into requests of at most `max`, in order; the first request
/// refused fails its tenants and those of every later one, which are not sent.
pub(crate) async fn send_packed<P>(
    provider: &mut P,
    groups: Vec<(String, P::Change)>,
    max: usize,
    results: &mut RoundResults,
) where
    P: Provider,
    P::Change: Packable,
{
    let requests = pack(groups, max);
    let carried: Vec<Vec<String>> = requests.iter().map(|(t, _)| t.clone()).collect();
    for (i, (tenants, change)) in requests.into_iter().enumerate() {
        let what = format!("{} tenants", tenants.len());
        if let Err(e) = provider.send(change, &what).await {
            for tenant in carried[i..].iter().flatten() {
                results.insert(tenant.clone(), Err(e.clone()));
            }
            return;
        }
    }
}
