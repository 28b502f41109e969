//! One integration-test binary: the real engine, the real binary and real gateways on
//! loopback sockets, real files, real TLS.

mod api;
mod cli;
mod engine_e2e;
mod probes;
mod support;
