//! The embedded server's own series, registered into the process's exposition the first
//! time a `dns_server` sink starts ([`Metrics::set`](ho_engine::metrics::Metrics::set)).

use ho_engine::metrics::MetricSet;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// `qtype`, `rcode` labels of a query the server answered.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct QueryLabels {
    /// Query type (`A`, `AAAA`, ...; `other` beyond the common ones).
    pub(super) qtype: &'static str,
    /// Response code (`NOERROR`, `NXDOMAIN`, `REFUSED`, ...).
    pub(super) rcode: &'static str,
}

/// `action` label of a rate-limited answer.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ActionLabel {
    /// `dropped` or `slipped`.
    pub(super) action: &'static str,
}

/// Queries, answer latency, rate limiting and the XDP path, summed over every `dns_server`
/// sink of the process.
#[derive(Clone)]
pub struct ServerMetrics {
    /// Queries answered, by type and rcode.
    pub(super) queries: Family<QueryLabels, Counter>,
    /// Time from a query's arrival to its answer being sent.
    pub(super) answer_seconds: Histogram,
    /// UDP answers response rate limiting held back, by action: `dropped`, or `slipped`
    /// (sent truncated so the client retries over TCP).
    pub(super) rate_limited: Family<ActionLabel, Counter>,
    /// UDP answers sent through the XDP socket rather than the ordinary UDP sockets: how
    /// much of the traffic takes the fast path.
    pub(super) xdp_answers: Counter,
}

impl Default for ServerMetrics {
    fn default() -> Self {
        ServerMetrics {
            queries: Family::default(),
            // 10 µs .. ~160 ms: an answer from memory takes microseconds; a signed one
            // made on a loaded machine, milliseconds.
            answer_seconds: Histogram::new(exponential_buckets(0.00001, 2.0, 15)),
            rate_limited: Family::default(),
            xdp_answers: Counter::default(),
        }
    }
}

impl MetricSet for ServerMetrics {
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "dns_queries",
            "Queries the embedded DNS server answered, by query type and response code",
            self.queries.clone(),
        );
        registry.register(
            "dns_answer_seconds",
            "Time from a DNS query's arrival to its answer being sent (embedded server)",
            self.answer_seconds.clone(),
        );
        registry.register(
            "dns_rate_limited",
            "UDP answers response rate limiting dropped or sent truncated (slipped), by action",
            self.rate_limited.clone(),
        );
        registry.register(
            "dns_xdp_answers",
            "UDP answers the embedded DNS server sent through its XDP socket",
            self.xdp_answers.clone(),
        );
    }
}
