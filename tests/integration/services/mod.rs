//! Real servers the tests start (Debian's packages, grpcio from PyPI; installed by `.ci/test`), each on
//! its own loopback address: a test fails, never skips, when one is missing; and the
//! orchestrator itself as clusters sharing a zone.

pub mod clusters;
pub mod dig;
pub mod dns_primary;
pub mod dns_secondary;
pub mod dnsmasq;
pub mod geoip;
pub mod grpc_health;
pub mod link;
pub mod pdns;
