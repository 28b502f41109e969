//! Real servers the tests start from Debian's packages (installed by `.ci/test`), each on
//! its own loopback address: a test fails, never skips, when one is missing.

pub mod dig;
pub mod dns_primary;
pub mod dnsmasq;
pub mod pdns;
