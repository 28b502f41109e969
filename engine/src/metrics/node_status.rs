//! `node_status{node_name,node_ip}`: one series per endpoint of the running plan, its labels
//! written from the plan's endpoints when the metrics are read. A `Family` kept each
//! endpoint's name and address again as a label set, with a hash table entry and a gauge
//! allocation each: about 120 bytes an endpoint, where this keeps one byte.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use ho_config::Plan;
use prometheus_client::encoding::{
    EncodeLabel, EncodeLabelSet, EncodeLabelValue, EncodeMetric, LabelSetEncoder,
    LabelValueEncoder, MetricEncoder,
};
use prometheus_client::metrics::MetricType;

/// 1 when an endpoint is up, 0 otherwise, for every endpoint of the plan the tracker runs.
/// Clones share the table.
#[derive(Clone, Debug, Default)]
pub struct NodeStatus {
    table: Arc<RwLock<Table>>,
}

/// The plan's endpoints (names and addresses) and each one's value, in the plan's order.
/// The values are atomics so that a change takes the lock shared, and both are shared so
/// that a read of the metrics (100,000 series, as fast as its reader takes them) holds the
/// lock only to take them: it writes the plan it started with, and an adoption meanwhile
/// never waits for it.
#[derive(Debug, Default)]
struct Table {
    plan: Option<Arc<Plan>>,
    up: Arc<[AtomicBool]>,
}

impl NodeStatus {
    /// Makes `plan`'s endpoints the series, each `up` as given (in the plan's order): the
    /// series of endpoints `plan` no longer has are gone. A plan's endpoint names are
    /// unique (validated; discovered and resolved endpoints are named apart), so a series
    /// per endpoint is one per label set.
    pub fn adopt(&self, plan: Arc<Plan>, up: impl IntoIterator<Item = bool>) {
        let up: Arc<[AtomicBool]> = up.into_iter().map(AtomicBool::new).collect();
        assert_eq!(up.len(), plan.endpoints.len(), "a value per endpoint");
        *self.table.write().expect("not poisoned") = Table {
            plan: Some(plan),
            up,
        };
    }

    /// Sets endpoint `endpoint` (its index in the adopted plan) up or not.
    pub fn set(&self, endpoint: usize, up: bool) {
        self.table.read().expect("not poisoned").up[endpoint].store(up, Ordering::Relaxed);
    }

    /// Bytes the table holds besides the plan it shares with the tracker.
    #[cfg(test)]
    pub(crate) fn own_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.table.read().expect("not poisoned").up)
    }
}

/// An address as a label value, written as text only when the metrics are read.
#[derive(Clone, Copy)]
struct LabelAddress(IpAddr);

impl EncodeLabelValue for LabelAddress {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        use std::fmt::Write;
        write!(encoder, "{}", self.0)
    }
}

/// An endpoint's labels (names kept from the original dashboards), borrowed from the plan for the length of one read.
struct NodeLabels<'a> {
    node_name: &'a str,
    node_ip: LabelAddress,
}

impl EncodeLabelSet for NodeLabels<'_> {
    fn encode(&self, mut encoder: LabelSetEncoder) -> Result<(), std::fmt::Error> {
        ("node_name", self.node_name).encode(encoder.encode_label())?;
        ("node_ip", self.node_ip).encode(encoder.encode_label())
    }
}

impl EncodeMetric for NodeStatus {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let (plan, up) = {
            let table = self.table.read().expect("not poisoned");
            (table.plan.clone(), Arc::clone(&table.up))
        };
        let Some(plan) = plan else {
            return Ok(());
        };
        for (ep, up) in plan.endpoints.iter().zip(up.iter()) {
            let labels = NodeLabels {
                node_name: &ep.name,
                node_ip: LabelAddress(ep.address),
            };
            encoder
                .encode_family(&labels)?
                .encode_gauge(&i64::from(up.load(Ordering::Relaxed)))?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Gauge
    }
}

#[cfg(test)]
#[path = "node_status_tests.rs"]
mod tests;
